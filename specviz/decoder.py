"""The speculative decoding loop and the target-only baseline, both recording a Trace.

One iteration, numbered as in the trace:
    (1) draft gamma tokens with the drafter (it catches its own cache up first)
    (2) verify: one target forward over only the positions it has not seen, drafts included
    (3) accept/reject each draft with min(1, p/q) against a uniform draw r
    (4) resample from the residual at the first rejection, or draw a bonus token
    (5) roll the target's KV cache back to the accepted prefix (the drafter rolls its own back
        at its next proposal)

The baseline is the same loop with no drafter: each iteration is one target step, with the same
sampling, the same cache handling and the same random generator, so comparisons are like for like.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specviz.config import DecodeConfig, SamplingConfig, validate_prompt
from specviz.drafters import Drafter, ModelDrafter, NgramDrafter, crop_cache, forward_logits
from specviz.errors import ConfigError
from specviz.gate import device_gate
from specviz.models import (
    DEFAULT_DRAFT,
    DEFAULT_TARGET,
    NGRAM_DRAFT,
    SELF_DRAFT,
    LoadedModel,
    check_vocabulary,
    load_model,
)
from specviz.sampling import probabilities
from specviz.trace import TOP_N, Trace
from specviz.verify import RULES, Verdict, beta, verify


@dataclass
class Progress:
    """Handed to `on_iteration` after each iteration, so a page can stream tokens as they come."""

    iteration: int
    new_tokens: int
    max_new_tokens: int
    output_token_ids: list[int]
    record: dict | None  # the iteration as recorded in the trace (None when tracing is off)
    token_text: dict[str, str]


def speculative_generate(
    prompt: str | list[int],
    *,
    target: str | LoadedModel | None = None,
    draft: str | LoadedModel | Drafter | None = None,
    gamma: int = 4,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    max_new_tokens: int = 64,
    trace: bool = True,
    rule: str = "exact",
    chat_template: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    on_iteration: Callable[[Progress], None] | None = None,
    on_wait: Callable[[int], None] | None = None,
) -> Trace:
    """Decode with speculative sampling and return its Trace (summary only when trace=False)."""
    if rule not in RULES:
        raise ConfigError(f"rule must be one of {', '.join(RULES)}; got {rule!r}.")
    sampling = SamplingConfig(temperature, top_k, top_p)
    target_name = target.name if isinstance(target, LoadedModel) else target
    draft_name = draft if isinstance(draft, str) or draft is None else draft.name
    cfg = DecodeConfig(target_name, draft_name, gamma, sampling, seed, max_new_tokens, chat_template)
    validate_prompt(prompt)
    target_model = _resolve_target(target, device, dtype)
    drafter = _resolve_drafter(draft, target_model, device, dtype)
    return _decode(prompt, target_model, drafter, cfg, trace, rule, on_iteration, on_wait)


def autoregressive_generate(
    prompt: str | list[int],
    *,
    target: str | LoadedModel | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    max_new_tokens: int = 64,
    trace: bool = True,
    chat_template: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    on_iteration: Callable[[Progress], None] | None = None,
    on_wait: Callable[[int], None] | None = None,
) -> Trace:
    """The target alone, one token per step: the baseline every speedup is measured against."""
    sampling = SamplingConfig(temperature, top_k, top_p)
    target_name = target.name if isinstance(target, LoadedModel) else target
    cfg = DecodeConfig(target_name, None, 1, sampling, seed, max_new_tokens, chat_template)
    validate_prompt(prompt)
    target_model = _resolve_target(target, device, dtype)
    return _decode(prompt, target_model, None, cfg, trace, "exact", on_iteration, on_wait)


def _resolve_target(target, device, dtype) -> LoadedModel:
    if isinstance(target, LoadedModel):
        return target
    return load_model(target or DEFAULT_TARGET, device=device, dtype=dtype)


def _resolve_drafter(draft, target: LoadedModel, device, dtype) -> Drafter:
    if draft is None:
        draft = DEFAULT_DRAFT if target.name == DEFAULT_TARGET else NGRAM_DRAFT
    if draft == NGRAM_DRAFT:
        return NgramDrafter()
    if draft == SELF_DRAFT:
        return ModelDrafter(target, name=SELF_DRAFT)
    if isinstance(draft, str):
        draft = load_model(draft, device=device or target.device, dtype=dtype or target.dtype)
    if isinstance(draft, LoadedModel):
        check_vocabulary(target, draft)
        return ModelDrafter(draft)
    return draft  # already a Drafter


# ----- the loop ---------------------------------------------------------------------------------


def _decode(
    prompt, target: LoadedModel, drafter, cfg: DecodeConfig, traced: bool, rule: str, on_iteration, on_wait
) -> Trace:
    # One decode per device at a time (see specviz.gate); on_wait(ahead) reports the queue.
    with device_gate(target.device).turn(on_wait), torch.inference_mode():
        return _Run(prompt, target, drafter, cfg, traced, rule, on_iteration).run()


class _Run:
    """State of one decode. Owns its caches and its generator; never touches the model objects."""

    def __init__(self, prompt, target: LoadedModel, drafter, cfg: DecodeConfig, traced, rule, on_iteration):
        self.prompt, self.target, self.drafter, self.cfg = prompt, target, drafter, cfg
        self.traced, self.rule, self.on_iteration = traced, rule, on_iteration
        self.sampling = cfg.sampling
        self.device = torch.device(target.device)
        self.vocab_size = target.vocab_size
        self.eos = target.eos_token_id
        self.token_text: dict[str, str] = {}

    # -- setup --
    def _prompt_ids(self) -> list[int]:
        if not isinstance(self.prompt, str):
            ids = list(self.prompt)
        elif self.target.tokenizer is None:
            raise ConfigError("This target has no tokenizer; give the prompt as a list of token ids.")
        else:
            tok = self.target.tokenizer
            if self.cfg.chat_template and getattr(tok, "chat_template", None):
                messages = [{"role": "user", "content": self.prompt}]
                ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
                if not isinstance(ids, list):  # transformers 5 returns a BatchEncoding
                    ids = ids["input_ids"]
            else:
                ids = tok(self.prompt)["input_ids"]
        if not ids:
            raise ConfigError("The prompt produced no tokens: type some text for the model to continue.")
        if max(ids) >= self.vocab_size:
            raise ConfigError(f"Prompt token id {max(ids)} is outside the target's vocabulary of {self.vocab_size}.")
        limit = self.target.max_positions
        if limit is not None and len(ids) + self.cfg.max_new_tokens > limit:
            raise ConfigError(
                f"The prompt is {len(ids)} tokens and {self.cfg.max_new_tokens} more are asked for, but the "
                f"model reads at most {limit} tokens. Shorten the prompt or lower max new tokens."
            )
        return ids

    def run(self) -> Trace:
        from transformers import DynamicCache

        prompt_ids = self._prompt_ids()
        generator = torch.Generator(device=self.device)
        generator.manual_seed(self.cfg.seed)
        self.generator = generator
        if self.drafter is not None:
            self.drafter.start(self.sampling, generator, self.vocab_size)
        cache = DynamicCache(config=self.target.model.config)
        seq = torch.tensor(prompt_ids, dtype=torch.long, device=self.device)  # [L] prompt + output
        seen = 0  # how many positions of seq the target's cache holds
        iterations: list[dict] = []
        drafted_total = accepted_total = 0
        betas_sum, betas_n = 0.0, 0
        draft_ms_total = verify_ms_total = 0.0
        stop_reason = "max_new_tokens"
        new_tokens = n_iter = 0

        _sync(self.device)
        t_start = time.perf_counter()
        while new_tokens < self.cfg.max_new_tokens:
            remaining = self.cfg.max_new_tokens - new_tokens
            t0 = time.perf_counter()

            # (1) draft. Leave room for the correction so the run never overshoots max_new_tokens.
            gamma = min(self.cfg.gamma, remaining - 1) if self.drafter is not None else 0
            if gamma > 0:
                drafts, q = self.drafter.propose(seq, gamma)  # [g], [g, V]
                drafts, q = drafts.to(self.device), q.to(self.device)
                drafts, q = self._cut_after_eos(drafts, q)
            else:
                drafts = torch.empty(0, dtype=torch.long, device=self.device)
                q = torch.empty(0, self.vocab_size, device=self.device)
            g = drafts.shape[0]
            if self.traced:
                _sync(self.device)
            t1 = time.perf_counter()

            # (2) verify: one target pass over the unseen tokens and the drafts.
            feed = torch.cat([seq[seen:], drafts])  # [T]
            logits = forward_logits(self.target.model, feed, cache, keep=g + 1)[:, : self.vocab_size]
            p = probabilities(logits, self.sampling)  # [g + 1, V]

            # (3) accept/reject and (4) resample or bonus.
            verdict = verify(drafts, q, p, generator, self.sampling.greedy, self.rule)
            n = verdict.accepted_count
            correction = verdict.correction_token
            ends_with_eos = n > 0 and n == g and self.eos is not None and int(drafts[-1]) == self.eos
            if ends_with_eos:
                correction = None  # the text ended inside the drafts: nothing follows end of sequence
            if self.traced:
                _sync(self.device)
            t2 = time.perf_counter()

            # (5) roll the target cache back to the accepted prefix.
            emitted = drafts[:n]
            if correction is not None:
                emitted = torch.cat([emitted, torch.tensor([correction], device=self.device)])
            old_len = seq.shape[0]
            seq = torch.cat([seq, emitted])
            seen = min(old_len + n, seq.shape[0] - 1)  # the newest token is fed at the next pass
            crop_cache(cache, seen)
            new_tokens += emitted.shape[0]

            n_iter += 1
            drafted_total += g
            accepted_total += n
            draft_ms, verify_ms = (t1 - t0) * 1e3, (t2 - t1) * 1e3
            draft_ms_total += draft_ms
            verify_ms_total += verify_ms
            record = None
            if self.traced:
                record = self._record(
                    n_iter - 1,
                    (t0 - t_start) * 1e3,
                    draft_ms,
                    verify_ms,
                    drafts,
                    q,
                    p,
                    verdict,
                    correction,
                    old_len - len(prompt_ids),
                )
                iterations.append(record)
                # alpha averages beta over the positions the text really reached: the accepted
                # drafts and the first rejected one. Later drafts sit on a prefix that was thrown away.
                reached = record["drafts"][: n + 1]
                betas_sum += sum(d["beta"] for d in reached)
                betas_n += len(reached)
            if self.on_iteration is not None:
                self.on_iteration(
                    Progress(
                        n_iter,
                        new_tokens,
                        self.cfg.max_new_tokens,
                        seq[len(prompt_ids) :].tolist(),
                        record,
                        self.token_text,
                    )
                )
            if ends_with_eos or (correction is not None and correction == self.eos):
                stop_reason = "eos"
                break

        _sync(self.device)
        wall_ms = (time.perf_counter() - t_start) * 1e3
        output_ids = seq[len(prompt_ids) :].tolist()
        summary = {
            "iterations": n_iter,
            "target_calls": n_iter,
            "drafted": drafted_total,
            "accepted": accepted_total,
            "new_tokens": len(output_ids),
            "acceptance_rate": accepted_total / drafted_total if drafted_total else None,
            "mean_accepted_length": len(output_ids) / n_iter if n_iter else 0.0,
            "alpha": betas_sum / betas_n if betas_n else None,
            "wall_ms": wall_ms,
            "tokens_per_s": len(output_ids) / (wall_ms / 1e3) if wall_ms > 0 else 0.0,
            "draft_ms": draft_ms_total,
            "verify_ms": verify_ms_total,
        }
        return Trace(
            mode="speculative" if self.drafter is not None else "autoregressive",
            config=self._config_dict(),
            prompt=self.prompt if isinstance(self.prompt, str) else "",
            prompt_token_ids=prompt_ids,
            output_token_ids=output_ids,
            output_text=self._decode_text(output_ids),
            stop_reason=stop_reason,
            iterations=iterations,
            summary=summary,
            extra={"token_text": self.token_text} if self.traced else {},
        )

    def _cut_after_eos(self, drafts: torch.Tensor, q: torch.Tensor):
        """Nothing follows end of sequence, so drafts after an EOS are never proposed."""
        if self.eos is None:
            return drafts, q
        hits = (drafts == self.eos).nonzero()
        if hits.numel():
            end = int(hits[0, 0]) + 1
            return drafts[:end], q[:end]
        return drafts, q

    # -- recording: tensors become plain numbers once per iteration --
    def _record(
        self, index, start_ms, draft_ms, verify_ms, drafts, q, p, verdict: Verdict, correction, position0
    ) -> dict:
        g = drafts.shape[0]
        n = verdict.accepted_count
        rows = torch.arange(g, device=self.device)
        q_x = q[rows, drafts].tolist()
        p_x = p[rows, drafts].tolist()
        accept_prob = verdict.accept_prob.tolist()
        r = verdict.r.tolist() if verdict.r is not None else [None] * g
        betas = beta(p[:g], q).clamp(max=1.0).tolist()  # float32 sums can overshoot 1 by ~1e-5
        q_top = _top(q)
        p_top = _top(p)
        ids = drafts.tolist()
        draft_records = [
            {
                "position": position0 + j,
                "token_id": ids[j],
                "token": self._text(ids[j]),
                "q": q_x[j],
                "p": p_x[j],
                "accept_prob": accept_prob[j],
                "r": r[j],
                "accepted": j < n,
                "q_top": q_top[j],
                "p_top": p_top[j],
                "beta": betas[j],
            }
            for j in range(g)
        ]
        corr = None
        if correction is not None:
            kind = verdict.correction_kind if self.drafter is not None else "target"
            dist = verdict.residual if verdict.residual is not None else p[n]
            corr = {
                "kind": kind,
                "position": position0 + n,
                "token_id": correction,
                "token": self._text(correction),
                "p": float(dist[correction]),
                "residual_top": _top(verdict.residual[None])[0] if verdict.residual is not None else None,
                "p_top": p_top[n],
            }
        for pairs in q_top + p_top:
            for token_id, _ in pairs:
                self._text(token_id)
        return {
            "index": index,
            "start_ms": start_ms,
            "draft_ms": draft_ms,
            "verify_ms": verify_ms,
            "accepted_count": n,
            "drafts": draft_records,
            "correction": corr,
        }

    def _text(self, token_id: int) -> str:
        key = str(token_id)
        if key not in self.token_text:
            tok = self.target.tokenizer
            self.token_text[key] = tok.decode([token_id]) if tok is not None else f"<{token_id}>"
        return self.token_text[key]

    def _decode_text(self, ids: list[int]) -> str:
        tok = self.target.tokenizer
        if tok is None:
            return " ".join(f"<{i}>" for i in ids)
        return tok.decode(ids, skip_special_tokens=False)

    def _config_dict(self) -> dict:
        s = self.sampling
        return {
            "target": self.target.name,
            "draft": self.drafter.name if self.drafter is not None else None,
            "gamma": self.cfg.gamma if self.drafter is not None else 0,
            "temperature": s.temperature,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "seed": self.cfg.seed,
            "max_new_tokens": self.cfg.max_new_tokens,
            "device": str(self.device),
            "dtype": self.target.dtype,
            "rule": self.rule,
            "traced": self.traced,
            "chat_template": self.cfg.chat_template,
        }


def _top(probs: torch.Tensor) -> list[list[list]]:
    """probs [rows, V] -> per row, [token_id, prob] for the TOP_N most likely tokens with prob > 0."""
    if probs.shape[0] == 0:
        return []
    k = min(TOP_N, probs.shape[-1])
    values, indices = torch.topk(probs, k, dim=-1)
    return [
        [[i, v] for i, v in zip(ix, vs, strict=True) if v > 0]
        for ix, vs in zip(indices.tolist(), values.tolist(), strict=True)
    ]


def _sync(device: torch.device) -> None:
    """Wait for queued GPU work so a timestamp means what it says (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
