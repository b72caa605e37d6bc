"""The regime: where speculation pays, measured on this machine for both weight formats of the target.

A verification pass checks rows = 1 + the drafts at once. Speculation pays when that pass costs little more
than one step, v(rows) = pass ÷ one-row step close to 1: the step waits on memory (it streams every weight
once whatever the rows), as the float32 weights do on a CPU. Where the step computes instead (the weights
as shipped: each weight is expanded from its block before it is used, once per row block; llama.cpp's
integer dot products), every row adds its arithmetic and v(rows) climbs towards rows; then the tokens an
iteration gains (τ) no longer pay for the pass and the drafting (the formula's τ / (c + v)).

For each format (specviz.config.WEIGHT_FORMATS) `measure` times, interleaved in one process:
    the one-row step and v(rows) for 1 to 16 rows      (specviz.engine.verify_cost.measure)
    the default drafter and the target alone on a prompt, as pairs (tokens per second)
and from the speculative run's own counts: τ (tokens per iteration), c (drafting per iteration in target
steps) and the rows each verification pass fed (the default's tree shrinks when its head is unsure), so
predicted = τ / (c + v̄), v̄ the mean of v over those passes, stands beside the measured speedup. Where
it stops paying: the fewest rows whose v(rows) reaches τ - c.

The Serving page opens on the recording shipped in specviz/assets (`recording`), and measures again here.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

SCHEMA = "specviz.regime/1"
ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16)
PAIRS = 3  # speculative and target-alone runs, interleaved, per format
NEW_TOKENS = 64
PROMPT = "Explain what a black hole is to a ten year old."  # free text, no copying to help the draft
RECORDING = Path(__file__).resolve().parent.parent / "assets" / "regime.json"


def measure(targets: dict[str, Any], prompt: str = PROMPT, new_tokens: int = NEW_TOKENS, should_stop=None) -> dict:
    """targets: {format asked for: LoadedModel} -> the regime record (module docstring), keyed by the
    format each ran (two that both ran float32 are measured once). should_stop(): checked between
    formats; a stopped measurement keeps the formats it finished."""
    from specviz.engine import verify_cost
    from specviz.engine.machine import cpu_name

    formats = {}
    for target in targets.values():
        name = target.weights  # what it ran: float32 where the blocks could not (LoadedModel.weights_note)
        if name in formats or (should_stop is not None and should_stop()):
            continue
        v, one = verify_cost.measure(target, ROWS)
        f = {
            "weights": target.weights,
            "kernels": target.kernels_label,
            "one_row_ms": round(one * 1e3, 3),
            "v": {str(r): round(v[r], 3) for r in ROWS},
            **_pairs(target, prompt, new_tokens),
        }
        passes = f.pop("pass_rows")
        f["v_pass"] = round(statistics.fmean(v_at(f, r) for r in passes), 3) if passes else 1.0
        formats[name] = f
    import torch

    return {
        "schema": SCHEMA,
        "machine": cpu_name(),
        "threads": torch.get_num_threads(),
        "prompt": prompt,
        "new_tokens": new_tokens,
        "formats": formats,
    }


def _pairs(target, prompt: str, new_tokens: int) -> dict:
    """The default drafter against the target alone, PAIRS times interleaved: tokens per second, the
    speedup, and the speculative run's τ, c and verification rows."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate

    options = DecodeOptions(temperature=0.0, max_new_tokens=new_tokens)
    spec_rates, alone_rates, traces = [], [], []
    for i in range(PAIRS + 1):  # the first pair warms both up, untimed
        order = ("spec", "alone") if i % 2 else ("alone", "spec")
        for which in order:
            start = time.perf_counter()
            if which == "spec":
                trace = speculative_generate(prompt, target=target, options=options)
            else:
                trace = autoregressive_generate(prompt, target=target, options=options, trace=False)
            rate = trace.summary["new_tokens"] / (time.perf_counter() - start)
            if i:
                (spec_rates if which == "spec" else alone_rates).append(rate)
                if which == "spec":
                    traces.append(trace)
    spec, alone = statistics.median(spec_rates), statistics.median(alone_rates)
    return {
        "tokens_per_s": {"speculative": round(spec, 2), "target_alone": round(alone, 2)},
        "measured_speedup": round(spec / alone, 3),
        **_counts(traces[len(traces) // 2], 1e3 / alone),
    }


def _counts(trace, step_ms: float) -> dict:
    """τ, c (drafting per iteration ÷ the target alone's step) and the rows a verification pass fed
    (the target's cache rows it wrote: the newest token and every draft of its tree) of a traced run,
    the first iteration (the prompt's pass, no drafts) left out."""
    later = trace.iterations[1:]
    tau = (trace.summary["new_tokens"] - 1) / max(1, len(later))
    c = statistics.median(it["draft_ms"] for it in later) / step_ms if later else 0.0
    written = [it["cache"]["target"]["after_pass"] - it["cache"]["target"]["before"] for it in later if it.get("cache")]
    rows = int(statistics.median(written)) if written else 1
    return {"tau": round(tau, 3), "c": round(c, 3), "verify_rows": rows, "pass_rows": written}


def predicted_speedup(record: dict, name: str) -> float:
    """τ / (c + v̄) of one format: v̄ the mean v of its verification passes."""
    f = record["formats"][name]
    return f["tau"] / (f["c"] + f["v_pass"])


def v_at(f: dict, rows: int) -> float:
    """v of a format at `rows`, from the nearest measured row count at or above it (a pass of more rows
    does all a pass of fewer does)."""
    measured = sorted(int(r) for r in f["v"])
    return f["v"][str(next((r for r in measured if r >= rows), measured[-1]))]


def stops_paying_at(record: dict, name: str) -> int | None:
    """The fewest rows whose v(rows) reaches τ - c (where a pass no longer pays for itself), or None
    when no measured row count does."""
    f = record["formats"][name]
    return next((int(r) for r in sorted(f["v"], key=int) if f["v"][r] >= f["tau"] - f["c"]), None)


def recording() -> dict | None:
    """The shipped record (specviz/assets/regime.json), or None when it is missing or damaged."""
    try:
        record = json.loads(RECORDING.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("schema") == SCHEMA else None
