"""Training text for the draft head: the target writes answers, and we keep its features.

For each prompt of the head's pool (specviz.training.prompt_pool.head_prompts) the target writes one
greedy answer and `samples_per_prompt` answers sampled at temperature 1, batched with a KV cache.
While it writes, a forward hook on its final norm keeps the feature the head reads: the
final-norm hidden state at every position (prompt included), the vector the LM head turns into
p. So the features come from the very pass that wrote the text: no second pass. A head that also
reads earlier decoder layers (specviz.engine.draft_head, feature_layers) gets their outputs the same way, from
hooks on those layers in the same pass.

The text is written in `gen_dtype` (bfloat16 by default, about twice as fast on this CPU); the
decoder gives the head float32 features, which differ by about one bf16 rounding step, well inside
the noise the head is trained with.

Data lives in shards (one per generation batch) under a folder, so an interrupted run resumes
where it stopped and a finished one is reused by later training runs. A shard is reused only when
it answers the very prompts of its batch at the same temperature (its sequences begin with those
prompts' token ids): a folder written with other --prompts, --heldout or --gen-batch settings is
refused with an error instead of silently mixing held-out text into training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from specviz.decoding.prompting import prompt_token_ids
from specviz.engine.draft_head import layer_outputs
from specviz.engine.transformers_generate import generation_config, left_padded
from specviz.errors import SpecvizError


@dataclass
class Sequence:
    """One written answer. ids [L] = prompt + answer (EOS kept); features [L - 1, D]: the target's
    final-norm hidden state at positions 0..L-2 (the one at L-1 was never computed)."""

    ids: torch.Tensor  # [L] int64
    start: int  # index of the first answer token
    features: torch.Tensor  # [L - 1, D] bfloat16 (float32 for held-out text, where p must be exact)
    temperature: float  # 0: greedy
    # [L - 1, n, D] the outputs of decoder layers `layer_ids` at the same positions (same dtype as features)
    layers: torch.Tensor | None = None
    layer_ids: tuple[int, ...] = ()


def write_answers(
    target,
    prompts: list[str],
    temperature: float,
    new_tokens: int,
    batch: int,
    seed: int,
    folder: Path,
    tag: str,
    log=print,
    feature_dtype: torch.dtype = torch.bfloat16,
    layer_ids: tuple[int, ...] = (),
    keep: bool = True,
    first: int = 0,
) -> list[Sequence]:
    """Let the target answer `prompts` at `temperature`, `batch` at a time; shard k of this tag is
    saved as folder/{tag}-{k}.pt and reloaded instead of rewritten when present. With layer_ids,
    the outputs of those decoder layers are kept too. keep=False only writes the missing shards and
    returns [] (text at scale does not fit in memory: the training reads it back shard by shard).
    first: where `prompts` begin in their whole list (a multiple of `batch`), so that a list written
    in parts gets the very shards and seeds it would get written whole."""
    if first % batch:
        raise ValueError(f"first ({first}) must be a multiple of the batch ({batch})")
    folder.mkdir(parents=True, exist_ok=True)
    captured: list[torch.Tensor] = []
    hook = target.model.model.norm.register_forward_hook(lambda _m, _i, out: captured.append(out.detach()))
    with layer_outputs(target.model, tuple(layer_ids)) as layer_out:
        out_sequences: list[Sequence] = []
        t0, tokens = time.perf_counter(), 0
        try:
            for b in range(0, len(prompts), batch):
                shard = folder / f"{tag}-{(first + b) // batch}.pt"
                encoded = [prompt_token_ids(target.tokenizer, p) for p in prompts[b : b + batch]]
                if shard.is_file():
                    if keep:
                        out_sequences += load_matching_shard(shard, encoded, temperature, layer_ids)
                    continue
                torch.manual_seed(seed * 100_003 + first + b)  # generate() samples from the global generator
                hooked = (captured, layer_out, tuple(layer_ids))
                written = _write_batch(target, encoded, temperature, new_tokens, hooked, feature_dtype)
                partial = shard.with_suffix(".pt.partial")  # renamed when whole: a killed save leaves no shard
                torch.save([_to_dict(s) for s in written], partial)
                partial.replace(shard)
                out_sequences += written if keep else []
                tokens += sum(s.ids.shape[0] - s.start for s in written)
                done = first + min(b + batch, len(prompts))
                log(f"{tag}: {done}/{first + len(prompts)} answers, {tokens} tokens, {time.perf_counter() - t0:.0f} s")
        finally:
            hook.remove()
    return out_sequences


def _write_batch(
    target, encoded: list[list[int]], temperature: float, new_tokens: int, hooked: tuple, dtype: torch.dtype
) -> list[Sequence]:
    """The target answers one batch of prompts (token ids), each answer kept with the features of the
    pass that wrote it. hooked = (captured, layer_out, layer_ids): the lists the hooks on its final norm
    and on decoder layers layer_ids fill at every forward."""
    captured, layer_out, layer_ids = hooked
    model, eos = target.model, target.eos_token_id
    pad = target.tokenizer.pad_token_id if target.tokenizer.pad_token_id is not None else eos
    width = max(len(e) for e in encoded)
    input_ids, attention = left_padded(encoded, pad)  # [B, P] each
    gen_cfg = generation_config(new_tokens, temperature, eos, pad)
    captured.clear()
    for outputs in layer_out.values():
        outputs.clear()
    with torch.inference_mode():
        out = model.generate(
            input_ids=input_ids.to(model.device),
            attention_mask=attention.to(model.device),
            generation_config=gen_cfg,
        )
    features = torch.cat(captured, dim=1).cpu()  # [B, P + G - 1, D]: prefill, then one column per step
    if layer_ids:  # [B, P + G - 1, n, D]
        stacked = torch.stack([torch.cat(layer_out[i], dim=1).cpu() for i in layer_ids], dim=2)
    answers = out[:, width:].cpu()  # [B, G]
    written = []
    for i, e in enumerate(encoded):
        ans = answers[i]
        ends = (ans == eos).nonzero()
        g = int(ends[0, 0]) + 1 if ends.numel() else ans.shape[0]  # keep the EOS: the head must predict it
        ids = torch.cat([torch.tensor(e), ans[:g]])  # [L]
        left = width - len(e)
        feats = features[i, left : left + ids.shape[0] - 1].to(dtype).clone()  # [L - 1, D]
        layers = stacked[i, left : left + ids.shape[0] - 1].to(dtype).clone() if layer_ids else None
        written.append(Sequence(ids, len(e), feats, temperature, layers, layer_ids))
    return written


def load_matching_shard(
    path: Path, encoded: list[list[int]], temperature: float, layer_ids: tuple[int, ...] = ()
) -> list[Sequence]:
    """A shard's sequences, after checking that they answer `encoded` (the batch's prompts as token
    ids, in order) at `temperature` and hold the outputs of decoder layers `layer_ids`; SpecvizError
    otherwise."""
    sequences = load_shard(path)
    if layer_ids and any(s.layer_ids != tuple(layer_ids) for s in sequences):
        raise SpecvizError(
            f"{path} does not hold the outputs of decoder layers {list(layer_ids)} that --feature-layers asks "
            "for (it was written for another head). Use another --data folder, or delete its shards to write "
            "them again."
        )
    if not layer_ids:  # a head without earlier layers: leave them out of memory and of its batches
        for s in sequences:
            s.layers, s.layer_ids = None, ()
    held = [s.ids[: s.start].tolist() for s in sequences]
    if held != encoded or any(s.temperature != temperature for s in sequences):
        raise SpecvizError(
            f"{path} holds answers to other prompts or at another temperature than this run asks for "
            "(it was written with other --prompts, --heldout, --gen-batch or --target settings). "
            "Use another --data folder, or delete that folder's shards to write them again."
        )
    return sequences


def load_shard(path: Path) -> list[Sequence]:
    """A shard's sequences. weights_only: a shard is data (plain dicts of tensors), never code to unpickle.
    mmap: the features stay in the file and are read as a batch touches them, so a training run holds
    text many times larger than its memory (ten times the shipped head's is about 15 GB of features)."""
    loaded = torch.load(path, mmap=True, weights_only=True)
    return [Sequence(**{**d, "layer_ids": tuple(d.get("layer_ids", ()))}) for d in loaded]


def _to_dict(s: Sequence) -> dict:
    d = {"ids": s.ids, "start": s.start, "features": s.features, "temperature": s.temperature}
    if s.layers is not None:
        d.update(layers=s.layers, layer_ids=list(s.layer_ids))
    return d
