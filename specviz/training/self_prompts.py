"""Prompts the target writes itself, for the draft head's training text (Magpie, Xu et al. 2024).

An instruction-tuned model given only its chat template up to an open user turn writes a user
message: a question, a request for code, a story, a list, a chat line. Sampled at temperature 1
these are free text of the kinds a student types into the app, far less repetitive than the
templated pool (specviz.training.prompt_pool), which is the gap the head's alpha showed between pool
prompts and the bench's free-text ones. No corpus is needed, so it works offline.

The messages are sampled in batches with fixed seeds, kept only when the turn ended by itself (the
end-of-turn token came within `max_tokens`) and holds at least `min_words` words, deduplicated,
and never one of the benchmark's prompts. They are cached as JSON beside the training text, so a
resumed or repeated run uses the very same prompts. The file is rewritten after every batch with the
count of batches sampled: batch k's seed depends only on k, so an interrupted run resumes at the next
batch and ends with the very prompts an uninterrupted one writes (and a larger n extends a smaller n's
list, whose prompts stay its first ones).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from specviz.engine.transformers_generate import generation_config
from specviz.errors import SpecvizError

SCHEMA = "specviz.self_prompts/1"
SENTINEL = "\x00specviz-user-message\x00"


def user_turn_prefix(tokenizer) -> list[int]:
    """Token ids of the chat template up to where the user's message begins (system turn included)."""
    if not getattr(tokenizer, "chat_template", None):
        raise SpecvizError(
            "This target's tokenizer has no chat template, so it cannot write its own prompts. "
            "Train with --self-prompts 0 (the templated pool only)."
        )
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": SENTINEL}], add_generation_prompt=False, tokenize=False
    )
    if SENTINEL not in text:
        raise SpecvizError("The chat template does not place the user's message verbatim; use --self-prompts 0.")
    return list(tokenizer(text[: text.index(SENTINEL)], add_special_tokens=False)["input_ids"])


def write_self_prompts(
    target,
    n: int,
    seed: int,
    folder: Path,
    exclude: set[str],
    batch: int = 64,
    max_tokens: int = 64,
    min_words: int = 4,
    log=print,
) -> list[str]:
    """n distinct user messages written by `target` (cached in folder/self-prompts-{seed}.json)."""
    path = folder / f"self-prompts-{seed}.json"
    prompts: list[str] = []
    k = 0  # batches sampled so far
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        same = saved.get("schema") == SCHEMA and saved.get("target") == target.name
        if same and len(saved["prompts"]) >= n:
            return saved["prompts"][:n]
        # An interrupted (or smaller) run of the same settings: go on from its last batch.
        if same and "batches" in saved and saved.get("max_tokens") == max_tokens and saved.get("batch") == batch:
            prompts, k = list(saved["prompts"]), int(saved["batches"])
    if n == 0:
        return []
    model, tokenizer = target.model, target.tokenizer
    end = target.eos_token_id
    prefix = torch.tensor(user_turn_prefix(tokenizer))  # [P]
    seen = {e.strip().lower() for e in exclude} | {p.lower() for p in prompts}
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    while len(prompts) < n:
        if k >= 4 * (n // batch + 1) + 8:
            raise SpecvizError(f"The target wrote only {len(prompts)} usable prompts of {n}; ask for fewer.")
        ids = prefix.repeat(batch, 1)  # [B, P]
        torch.manual_seed(seed * 100_003 + k)  # generate() samples from the global generator
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids.to(model.device),
                attention_mask=torch.ones_like(ids).to(model.device),
                generation_config=generation_config(max_tokens, 1.0, end, end),
            )
        for row in out[:, prefix.shape[0] :].cpu():  # [G] per message
            ended = (row == end).nonzero()
            if not ended.numel():
                continue  # cut off at max_tokens: not a whole message
            text = tokenizer.decode(row[: int(ended[0, 0])], skip_special_tokens=True).strip()
            key = text.lower()
            if len(text.split()) < min_words or key in seen:
                continue
            seen.add(key)
            prompts.append(text)
        k += 1
        _save(path, target.name, seed, max_tokens, batch, k, prompts)
        log(f"self-prompts: {min(len(prompts), n)}/{n} after {k} batches, {time.perf_counter() - t0:.0f} s")
    return prompts[:n]


def _save(path: Path, target: str, seed: int, max_tokens: int, batch: int, batches: int, prompts: list[str]) -> None:
    """Every prompt written so far and the batches that wrote them; replaced whole (written beside,
    then renamed), so an interrupted write never leaves half a file."""
    record = {
        "schema": SCHEMA, "target": target, "seed": seed, "max_tokens": max_tokens, "batch": batch,
        "batches": batches, "prompts": prompts,
    }  # fmt: skip
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(path)
