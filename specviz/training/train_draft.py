"""Train the offline draft for the default target: a small Llama distilled from the target itself.

With no hub access, SmolLM2-135M-Instruct has no small sibling to draft for it, so we make one:

    1. write a varied prompt set (stories, explanations, code, chat turns, lists), wrap each in
       the target's chat template, and let the target answer them (batched, KV-cached sampling;
       half the batches sampled at temperature 1, half greedy, so the draft sees both kinds of text);
       at every generated position keep the target's top-k next-token probabilities (temperature 1);
    2. build a small LlamaForCausalLM with tied embeddings over the same tokenizer, its embedding
       initialised from the target's embedding matrix projected onto its top principal directions
       (so the draft starts with the target's notion of which tokens are alike);
    3. distil: cross-entropy to the target's top-k probabilities plus one "other" bucket for the
       rest of the mass (the KL up to a constant), with AdamW and a cosine schedule;
    4. every few steps measure alpha = mean over held-out positions of beta = sum_x min(p(x), q(x))
       (exact: the held-out target distributions are kept in full) and the greedy agreement
       argmax q == argmax p, and write that history to a small JSON for the app to plot;
    5. save the draft as a standard transformers folder (fp16 safetensors + tokenizer).

    python -m specviz train-draft [--out specviz/weights/specviz-draft-smollm2] [--history
        assets/draft_training.json] [--sequences 576] [--steps 500] [--threads 1] ...

Seeds are fixed; the same flags give the same draft on the same machine and library versions.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from specviz.decoding.prompting import prompt_token_ids
from specviz.engine.machine import machine, versions
from specviz.engine.transformers_generate import generation_config, left_padded
from specviz.shipped import ASSETS, WEIGHTS
from specviz.training.prompt_pool import build_prompts
from specviz.training.recipe import lr_scale, run_recipe, write_record

DEFAULT_OUT = WEIGHTS / "specviz-draft-smollm2"
DEFAULT_HISTORY = ASSETS / "draft_training.json"


@dataclass(frozen=True)
class TrainConfig:
    target: str | None = None  # None: the offline default target
    hidden: int = 256  # draft width; the LM head (vocab x hidden) dominates its step time on a CPU
    layers: int = 3  # draft depth; each layer adds little time next to the LM head
    intermediate: int = 1024  # MLP width (4 x hidden, as in small GPTs)
    sequences: int = 576  # target answers generated for training (held-out ones come on top)
    heldout: int = 24  # extra answers kept aside to measure alpha (half sampled, half greedy)
    new_tokens: int = 128  # tokens the target writes per answer (the bench decodes fewer)
    gen_batch: int = 48  # answers generated together; large enough to keep the CPU's matmuls busy
    top_k: int = 64  # target probabilities kept per position; the rest is one "other" bucket
    steps: int = 500  # optimiser steps
    batch: int = 12  # answers per optimiser step
    lr: float = 3e-3  # peak learning rate (after warm-up), cosine-decayed to 10%
    embed_lr: float = 1e-3  # the PCA-initialised embedding already means something: move it gently
    norm_lr: float = 3e-2  # norm gains must grow from 0.25 towards the target's ~1.8 within a few dozen steps
    warmup: int = 20  # linear warm-up steps
    weight_decay: float = 0.01
    eval_every: int = 50  # steps between alpha measurements
    gen_dtype: str = "bfloat16"  # the target writes the training text in bf16: faster on AVX-512 CPUs (benchmarks.md)
    train_dtype: str = "bfloat16"  # autocast dtype for the draft's matmuls while training ("float32": off)
    threads: int = 0  # torch CPU threads (0: torch's default); 1 is far faster on a CPU shared with others
    seed: int = 0


# ----- 1. prompts and target text ---------------------------------------------------------------


@dataclass
class Sample:
    """One target answer: ids [L] (prompt + answer), and for each answer token t the target's
    top-k next-token distribution given ids[: start + t] (temperature 1)."""

    ids: torch.Tensor  # [L] int64
    start: int  # index of the first answer token in ids
    topk_ids: torch.Tensor  # [G, k] int64, G = L - start
    topk_probs: torch.Tensor  # [G, k] float32
    temperature: float  # how the answer was sampled (0: greedy)


def chat_ids(tokenizer, prompt: str) -> list[int]:
    """The prompt as the decoder feeds it (specviz.decoding.prompting owns the rule)."""
    return prompt_token_ids(tokenizer, prompt)


def generate_samples(target, prompts: list[str], temperatures: list[float], cfg: TrainConfig, log) -> list[Sample]:
    """Let the target answer every prompt; keep its top-k probabilities at each answer position."""

    model, tokenizer = target.model, target.tokenizer
    eos = target.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    samples: list[Sample] = []
    t0 = time.perf_counter()
    for b in range(0, len(prompts), cfg.gen_batch):
        chunk = prompts[b : b + cfg.gen_batch]
        temperature = temperatures[(b // cfg.gen_batch) % len(temperatures)]
        encoded = [chat_ids(tokenizer, p) for p in chunk]
        width = max(len(e) for e in encoded)
        input_ids, attention = left_padded(encoded, pad)  # [B, P] each
        gen_cfg = generation_config(
            cfg.new_tokens, temperature, eos, pad, output_logits=True, return_dict_in_generate=True
        )
        torch.manual_seed(cfg.seed * 100_003 + b)  # generate() samples from the global generator
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids.to(model.device),
                attention_mask=attention.to(model.device),
                generation_config=gen_cfg,
            )
        answers = out.sequences[:, width:].cpu()  # [B, G]
        # The raw logits (before temperature) give the target's temperature-1 distribution.
        logits = torch.stack(out.logits, dim=1).float().cpu()  # [B, G, V]
        probs = torch.softmax(logits[..., : target.vocab_size], dim=-1)
        top_probs, top_ids = torch.topk(probs, cfg.top_k, dim=-1)  # [B, G, k]
        del logits, probs
        for i, e in enumerate(encoded):
            ans = answers[i]
            ends = (ans == eos).nonzero()
            g = int(ends[0, 0]) + 1 if ends.numel() else ans.shape[0]  # keep the EOS: the draft must predict it
            samples.append(
                Sample(
                    ids=torch.cat([torch.tensor(e), ans[:g]]),
                    start=len(e),
                    topk_ids=top_ids[i, :g].clone(),
                    topk_probs=top_probs[i, :g].clone(),
                    temperature=temperature,
                )
            )
        done = min(b + cfg.gen_batch, len(prompts))
        tokens = sum(s.topk_ids.shape[0] for s in samples)
        log(f"generated {done}/{len(prompts)} answers, {tokens} tokens, {time.perf_counter() - t0:.0f} s")
    return samples


# ----- 2. the draft -----------------------------------------------------------------------------


def make_draft(target, cfg: TrainConfig):
    """A small LlamaForCausalLM with tied embeddings, its embedding the target's projected by PCA."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tc = target.model.config
    heads = max(1, cfg.hidden // 64)
    config = LlamaConfig(
        vocab_size=tc.vocab_size,
        hidden_size=cfg.hidden,
        intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=cfg.hidden // heads,
        max_position_embeddings=tc.max_position_embeddings,
        rms_norm_eps=tc.rms_norm_eps,
        rope_parameters=dict(getattr(tc, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 10000.0}),
        tie_word_embeddings=True,
        bos_token_id=tc.bos_token_id,
        eos_token_id=tc.eos_token_id,
        pad_token_id=tc.pad_token_id,
    )
    torch.manual_seed(cfg.seed)
    draft = LlamaForCausalLM(config)
    with torch.no_grad():
        emb = target.model.get_input_embeddings().weight.detach().float().cpu()  # [V, D]
        # Top principal directions of the target's token embeddings (uncentred, so the projection
        # E V keeps the dot products that the tied LM head turns into logits).
        _, vectors = torch.linalg.eigh(emb.T @ emb)  # ascending eigenvalues; vectors [D, D]
        basis = vectors[:, -cfg.hidden :].flip(-1)  # [D, h]
        draft.get_input_embeddings().weight.copy_(emb @ basis)  # [V, h]
        # A small final gain makes the first q nearly flat; at gain 1 every token's own embedding,
        # still dominant in the residual stream, would give it a logit near 50 and swamp early steps.
        draft.model.norm.weight.fill_(0.25)
    draft.tie_weights()
    return draft


# ----- 3. distillation --------------------------------------------------------------------------


def distill_loss(logits: torch.Tensor, top_ids: torch.Tensor, top_probs: torch.Tensor) -> torch.Tensor:
    """Cross-entropy from the target's top-k distribution (plus an "other" bucket) to the draft.

    logits [N, V] draft, top_ids [N, k], top_probs [N, k] target -> scalar. Equals the KL divergence
    KL(p || q) over the coarse distribution {top-k tokens, everything else}, plus p's entropy.
    """
    log_q = torch.log_softmax(logits.float(), dim=-1)  # [N, V]
    log_q_top = log_q.gather(-1, top_ids)  # [N, k]
    p_other = (1.0 - top_probs.sum(-1)).clamp(min=0.0)  # [N]
    q_other = (1.0 - log_q_top.exp().sum(-1)).clamp(min=1e-6)  # [N]
    ce = -(top_probs * log_q_top).sum(-1) - p_other * q_other.log()  # [N]
    return ce.mean()


def collate(samples: list[Sample], pad: int):
    """Right-padded ids [B, L], plus the flat (row, position) of each answer token's prediction
    and the target's top-k there ([N, k] each)."""
    width = max(s.ids.shape[0] for s in samples)
    ids = torch.full((len(samples), width), pad, dtype=torch.long)  # [B, L]
    rows, cols = [], []
    for i, s in enumerate(samples):
        ids[i, : s.ids.shape[0]] = s.ids
        g = s.topk_ids.shape[0]
        # The logit at position start - 1 + t predicts answer token t.
        cols.append(torch.arange(s.start - 1, s.start - 1 + g))
        rows.append(torch.full((g,), i))
    top_ids = torch.cat([s.topk_ids for s in samples])  # [N, k]
    top_probs = torch.cat([s.topk_probs for s in samples])  # [N, k]
    return ids, torch.cat(rows), torch.cat(cols), top_ids, top_probs


def draft_logits_at(draft, ids: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """ids [B, L] -> draft logits [N, V] at the selected positions only (the LM head is the costly part)."""
    hidden = draft.model(input_ids=ids).last_hidden_state  # [B, L, h]; causal, so right padding is harmless
    return draft.lm_head(hidden[rows, cols])  # [N, V]


# ----- 4. measuring alpha -----------------------------------------------------------------------


class HeldOut:
    """Held-out answers with the target's full temperature-1 distributions, to measure exact beta."""

    def __init__(self, target, samples: list[Sample], pad: int):
        self.batch = collate(samples, pad)
        ids, rows, cols, _, _ = self.batch
        self.sampled = torch.tensor([samples[int(r)].temperature > 0 for r in rows])  # [N] text sampled at T=1
        with torch.inference_mode():
            logits = target.model(input_ids=ids.to(target.model.device)).logits.float().cpu()  # [B, L, V]
        self.p = torch.softmax(logits[rows, cols][:, : target.vocab_size], dim=-1)  # [N, V]

    @torch.no_grad()
    def measure(self, draft) -> dict:
        ids, rows, cols, _, _ = self.batch
        q = torch.softmax(draft_logits_at(draft, ids, rows, cols).float()[:, : self.p.shape[1]], dim=-1)  # [N, V]
        beta = torch.minimum(self.p, q).sum(-1)  # [N]
        agree = (self.p.argmax(-1) == q.argmax(-1)).float()  # [N]
        s, g = self.sampled, ~self.sampled
        return {
            # alpha at temperature 1 on text the target sampled at temperature 1 (what the decoder measures)
            "alpha": float(beta[s].mean()) if s.any() else float(beta.mean()),
            # greedy acceptance: the draft's argmax is the target's, on the target's greedy text
            "greedy_agreement": float(agree[g].mean()) if g.any() else float(agree.mean()),
        }


# ----- the recipe -------------------------------------------------------------------------------


def train(cfg: TrainConfig, out: Path, history_path: Path | None, log=print, data_path: Path | None = None) -> dict:
    from specviz.engine.models import load_model

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    wall0 = time.perf_counter()
    # float32 weights: the recipe reads the target's embedding as a matrix (the blocks have none)
    target = load_model(cfg.target, device="cpu", dtype="float32", weights="float32")  # exact p, held-out
    writer = load_model(cfg.target, device="cpu", dtype=cfg.gen_dtype, weights="float32")  # writes the text
    tokenizer = target.tokenizer
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else target.eos_token_id

    train_samples, held_samples, gen_seconds = target_text(cfg, target, writer, data_path, log)
    heldout = HeldOut(target, held_samples, pad)
    train_tokens = sum(s.topk_ids.shape[0] for s in train_samples)
    log(f"data: {len(train_samples)} answers, {train_tokens} tokens in {gen_seconds:.0f} s")

    # 2. the draft and its optimiser: the embedding moves more gently than the fresh layers.
    draft = make_draft(target, cfg)
    draft.train()
    optim = make_optimiser(draft, cfg)
    history, train_seconds = distil(draft, optim, cfg, train_samples, pad, heldout, log)
    size_mb = save_draft(draft, tokenizer, out)
    counted = {"answers": len(train_samples), "tokens": train_tokens, "heldout_positions": int(heldout.p.shape[0])}
    result = {
        "schema": "specviz.draft_training/1",
        "target": target.name,
        "draft": f"offline:{out.name}",
        "recipe": asdict(cfg),
        "data": counted,
        "generation_seconds": round(gen_seconds, 1),
        "training_seconds": round(train_seconds, 1),
        "total_seconds": round(time.perf_counter() - wall0, 1),
        "folder_mb": round(size_mb, 1),
        "hardware": machine("cpu"),
        "versions": versions(),
        "measure": "alpha: mean over held-out positions of beta = sum_x min(p(x), q(x)) at temperature 1, on "
        "text the target sampled at temperature 1; greedy_agreement: share of held-out positions of the "
        "target's greedy text where argmax q == argmax p (the greedy acceptance rate).",
        "history": history,
    }
    write_record(history_path, result)
    log(f"saved {out} ({size_mb:.1f} MB); total {result['total_seconds']:.0f} s")
    return result


def target_text(cfg: TrainConfig, target, writer, data_path: Path | None, log) -> tuple[list, list, float]:
    """1. the target's text -> (training answers, held-out answers, seconds it took to write).
    Held-out prompts come from the same pool but are never trained on; text an earlier run wrote
    to data_path is reused."""
    prompts = build_prompts(cfg.sequences + cfg.heldout, cfg.seed)
    temperatures = [1.0, 0.0]  # alternate batches: sampled text (alpha at T=1) and greedy text (T=0)
    t_gen = time.perf_counter()
    if data_path is not None and data_path.is_file():  # reuse text written by an earlier run
        # weights_only: the cache is data (tensors in Sample records), never code to unpickle.
        with torch.serialization.safe_globals([Sample]):
            saved = torch.load(data_path, weights_only=True)
        log(f"loaded {len(saved['train'])} answers from {data_path} (written in {saved['seconds']:.0f} s)")
        return saved["train"], saved["heldout"], saved["seconds"]
    train_samples = generate_samples(writer, prompts[: cfg.sequences], temperatures, cfg, log)
    half = cfg.heldout // 2
    held = prompts[cfg.sequences :]
    held_samples = generate_samples(target, held[:half], [1.0], cfg, log)
    held_samples += generate_samples(target, held[half:], [0.0], cfg, log)
    gen_seconds = time.perf_counter() - t_gen
    if data_path is not None:
        data_path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"train": train_samples, "heldout": held_samples, "seconds": gen_seconds}, data_path)
    return train_samples, held_samples, gen_seconds


def make_optimiser(draft, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with three learning rates ("peak" keeps each group's own for the schedule)."""
    # Adam moves each weight by about lr per step, so the norm gains (which set the logits' scale)
    # get a larger rate: at the layers' rate they would need hundreds of steps to reach it.
    embed = draft.get_input_embeddings().weight
    others = [p for p in draft.parameters() if p is not embed]
    decay = [p for p in others if p.ndim >= 2]
    norms = [p for p in others if p.ndim < 2]
    return torch.optim.AdamW(
        [
            {"params": [embed], "lr": cfg.embed_lr, "weight_decay": 0.0, "peak": cfg.embed_lr},
            {"params": decay, "lr": cfg.lr, "weight_decay": cfg.weight_decay, "peak": cfg.lr},
            {"params": norms, "lr": cfg.norm_lr, "weight_decay": 0.0, "peak": cfg.norm_lr},
        ],
        betas=(0.9, 0.95),
    )


def distil(draft, optim, cfg: TrainConfig, train_samples: list[Sample], pad: int, heldout: HeldOut, log):
    """3. distil, measuring alpha as we go -> (history, training seconds)."""
    history = [{"step": 0, "seconds": 0.0, "loss": None, **heldout.measure(draft)}]
    log(f"step 0: alpha {history[0]['alpha']:.3f}, greedy agreement {history[0]['greedy_agreement']:.3f}")
    order_rng = random.Random(cfg.seed)
    order: list[int] = []
    t_train = time.perf_counter()
    losses = []
    for step in range(1, cfg.steps + 1):
        if len(order) < cfg.batch:  # a fresh shuffled pass over the answers
            order += order_rng.sample(range(len(train_samples)), len(train_samples))
        picked, order = order[: cfg.batch], order[cfg.batch :]
        losses.append(distil_step(draft, optim, cfg, [train_samples[i] for i in picked], pad, step))
        if step % cfg.eval_every == 0 or step == cfg.steps:
            draft.eval()
            point = {
                "step": step,
                "seconds": round(time.perf_counter() - t_train, 1),
                "loss": sum(losses) / len(losses),
                **heldout.measure(draft),
            }
            draft.train()
            losses = []
            history.append(point)
            log(
                f"step {step}: loss {point['loss']:.3f}, alpha {point['alpha']:.3f}, "
                f"greedy agreement {point['greedy_agreement']:.3f}, {point['seconds']:.0f} s"
            )
    return history, time.perf_counter() - t_train


def distil_step(draft, optim, cfg: TrainConfig, batch: list[Sample], pad: int, step: int) -> float:
    """One optimiser step on a batch of answers -> its loss."""
    ids, rows, cols, top_ids, top_probs = collate(batch, pad)
    scale = lr_scale(step, cfg.warmup, cfg.steps)
    for group in optim.param_groups:
        group["lr"] = group["peak"] * scale
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.train_dtype == "bfloat16"):
        logits = draft_logits_at(draft, ids, rows, cols)  # [N, V]
    loss = distill_loss(logits, top_ids, top_probs)
    optim.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
    optim.step()
    return float(loss.detach())


def save_draft(draft, tokenizer, out: Path) -> float:
    """5. save in half precision, with the tokenizer beside it so the folder loads on its own -> its MB."""
    draft.eval()
    out.mkdir(parents=True, exist_ok=True)
    draft.to(torch.float16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return sum(f.stat().st_size for f in out.iterdir() if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    def run(cfg, data, out, history, log):
        return train(cfg, out, history, log, data)

    doc = __doc__.splitlines()[0]
    return run_recipe(
        argv, "python -m specviz train-draft", doc, TrainConfig(), DEFAULT_OUT, DEFAULT_HISTORY, None, run
    )
