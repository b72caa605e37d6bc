"""The captured CUDA step proves itself before it serves (issue 58).

On CUDA the target's default forward is its static step replayed from CUDA graphs (specviz.engine.cuda_steps).
The only path that ran exact on a GPU before it is transformers' eager forward. So on the first load on
CUDA, before a user's run: a short prompt's pass, then verification passes of the shapes a run repeats
(several rows, then one row), each run twice on fresh caches, once through the captured step and once
through the same static step run eagerly, and compared:

    the argmax of every row equal, and the largest logit difference within CAPTURE_TOLERANCE.

In bfloat16 bit-equality is not expected (a graph may pick other kernels), so the tolerance is
stated, not zero. On an error or a mismatch the load falls back to transformers' eager forward (and the
draft head to its eager step), and says why: LoadedModel.forward and capture_note, the trace's config,
the page's model line and /metrics. SPECVIZ_CUDA_STEP forces a path: "captured" (no proof), "eager"
(never captured), unset or "proven" (the default). tests/test_capture_proof.py plants a faulty capture
through this same code on the CPU and sees the fallback taken.
"""

from __future__ import annotations

import os

import torch

# The largest |logit difference| between a captured and an eager static step that still counts as the
# same step. A bfloat16 logit carries 8 bits of mantissa: at logits of magnitude up to 32 one rounding
# is 0.125, and a different kernel order may add a few such roundings; a wrong step (a stale buffer,
# another row's cache) moves logits by whole units and changes argmaxes.
CAPTURE_TOLERANCE = 0.5
PROOF_PROMPT = (1, 9690, 198, 2683, 457, 253, 1789, 30, 2, 198, 1, 4093, 198)  # a short chat turn's ids
PROOF_ROWS = (4, 1, 1)  # a verification pass of 4 rows, then two one-row steps: the shapes a run repeats
MODES = ("proven", "captured", "eager")
FALLBACKS: list[str] = []  # why each load in this process fell back (the app's /metrics counts them)


def cuda_step_mode() -> str:
    """SPECVIZ_CUDA_STEP: "proven" (the default: captured once it passed its proof), "captured" or "eager"."""
    mode = os.environ.get("SPECVIZ_CUDA_STEP", "proven").strip().lower() or "proven"
    if mode not in MODES:
        from specviz.errors import ConfigError

        raise ConfigError(f"SPECVIZ_CUDA_STEP={mode!r}: use one of {', '.join(MODES)}.")
    return mode


def prove(static, vocab: int) -> str | None:
    """Run the proof on a StaticLlama whose `capture` is set: None when the captured step agrees with
    the same step run eagerly, else why it does not (an error's message, or where and by how much)."""
    from specviz.engine.static_llama import StaticLlama

    eager = StaticLlama(static.lean, capture=None)
    try:
        with torch.inference_mode():
            got, want = _passes(static, vocab), _passes(eager, vocab)
    except Exception as exc:  # noqa: BLE001 - any failure of the captured step is a reason not to serve it
        return f"the captured step failed: {type(exc).__name__}: {exc}"
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if not torch.equal(a.argmax(-1), b.argmax(-1)):
            return f"the captured step's argmax differs from the eager step's at pass {k + 1}"
        gap = float((a.float() - b.float()).abs().max())
        if not gap <= CAPTURE_TOLERANCE:
            return f"the captured step's logits differ from the eager step's by {gap:.3g} at pass {k + 1}"
    return None


def _passes(static, vocab: int) -> list[torch.Tensor]:
    """The proof's passes on a fresh cache -> each pass's logits [rows, V] (the prompt's last row first)."""
    device = static.device
    ids = torch.tensor(PROOF_PROMPT, device=device) % vocab
    cache = static.new_cache(len(PROOF_PROMPT) + sum(PROOF_ROWS))
    logits, _ = static.forward(ids, cache, keep=1)
    out = [logits]
    for k, rows in enumerate(PROOF_ROWS):
        feed = (torch.arange(rows, device=device) * 7919 + 31 * k) % vocab  # fixed, varied tokens
        logits, _ = static.forward(feed, cache, keep=rows)
        out.append(logits)
    return out
