"""The race of drafters: one prompt, every offline drafter side by side against the target alone.

For each drafter: tokens per iteration, acceptance by draft position, α, c and v (specviz.traces.speedup:
its time per drafted token and its verify pass, each over the target alone's single-token step),
the measured speedup (tokens/s over the target alone's: a rate, so runs that stop at different
lengths still compare on equal work; one timed pair per drafter, the same home as every page's)
and the prediction from α, γ, c and v. Each drafter warms up on a few tokens first, so loading
stays out of the timings.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from specviz.config import DEFAULT_GAMMA, DRAFTERS, DecodeOptions, drafter_kind
from specviz.labs.theory import walltime_improvement
from specviz.shipped import ASSETS
from specviz.traces.speedup import measured_costs, speedup
from specviz.traces.trace import acceptance_by_position

RACE_SCHEMA = "specviz.race/1"
RECORDING = ASSETS / "race.json"  # the race recorded with the offline target (scripts/record_examples.py)
# The race's drafters, in the order the page shows them (specviz.config.DRAFTERS: every kind raced).
OFFLINE_DRAFTS = tuple(k.name for k in DRAFTERS.values() if k.raced)
CSV_COLUMNS = (
    "draft", "gamma", "temperature", "new_tokens", "iterations", "tokens_per_iteration", "acceptance_rate", "alpha",
    "c", "verify_cost", "speedup", "predicted_speedup", "acceptance_by_position",
)  # fmt: skip


def run_race(
    prompt: str | list[int],
    *,
    target,
    drafts: Sequence[str] = OFFLINE_DRAFTS,
    gamma: int = DEFAULT_GAMMA,
    temperature: float = 0.0,
    seed: int = 0,
    max_new_tokens: int = 48,
    on_progress: Callable[[int, int, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Race `drafts` on one prompt with the loaded `target`; returns plain data (JSON-ready)."""
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate

    run = DecodeOptions(gamma=gamma, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens)
    warm = replace(run, max_new_tokens=4)
    autoregressive_generate(prompt, target=target, options=warm)  # warm-up
    base = autoregressive_generate(prompt, target=target, options=run)
    b = base.summary
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(drafts):
        if should_stop is not None and should_stop():
            break
        if on_progress is not None:
            on_progress(i, len(drafts), name)
        speculative_generate(prompt, target=target, draft=name, options=warm)  # warm-up (loads it)
        trace = speculative_generate(prompt, target=target, draft=name, options=run)
        rows.append(race_row(name, trace, base))
    return {
        "schema": RACE_SCHEMA,
        "prompt": prompt if isinstance(prompt, str) else "",
        "config": {
            "target": target.name,
            "gamma": gamma,
            "temperature": temperature,
            "seed": seed,
            "max_new_tokens": max_new_tokens,
            "dtype": target.dtype,
            "kernels": target.kernels_label,
        },  # fmt: skip
        "baseline": {
            "new_tokens": b["new_tokens"],
            "tokens_per_s": b["tokens_per_s"],
            "step_ms": b["verify_ms"] / b["iterations"],
        },
        "rows": rows,
    }


def race_row(name: str, trace, base) -> dict[str, Any]:
    """One drafter's row of the race: its run against the target alone's (c, v and the speedup
    from specviz.traces.speedup, as every page computes them)."""
    s, gamma = trace.summary, trace.config["gamma"]
    costs, ratio = measured_costs(trace, base), speedup(trace, base)
    alpha, c, v = s["alpha"], costs.c or 0.0, costs.v
    return {
        "draft": name,
        "label": kind.key if (kind := drafter_kind(name)) else name,  # pages name it: catalogue.drafter_words
        "new_tokens": s["new_tokens"],
        "iterations": s["iterations"],
        "tokens_per_iteration": s["mean_accepted_length"],
        "acceptance_rate": s["acceptance_rate"],
        "alpha": alpha,
        "acceptance_by_position": [r["acceptance"] for r in acceptance_by_position(trace.iterations, gamma)],
        "c": c,
        "verify_cost": v,
        "speedup": ratio,
        "predicted_speedup": walltime_improvement(alpha, gamma, c, v) if alpha is not None else None,
        "identical_to_target": trace.output_token_ids == base.output_token_ids
        if trace.config["temperature"] == 0
        else None,
    }


def race_to_csv(result: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    cfg = result["config"]
    for r in result["rows"]:
        by_position = " ".join("" if a is None else f"{a:.4f}" for a in r["acceptance_by_position"])
        writer.writerow(
            [r["draft"], cfg["gamma"], cfg["temperature"], r["new_tokens"], r["iterations"], r["tokens_per_iteration"],
             r["acceptance_rate"], r["alpha"], r["c"], r["verify_cost"], r["speedup"], r["predicted_speedup"],
             by_position]
        )  # fmt: skip
    return out.getvalue()


def shipped() -> dict[str, Any] | None:
    """The recorded race that ships, or None when this copy has none (or it cannot be read): the
    Drafters page opens on it and the lesson quotes it."""
    try:
        data = json.loads(RECORDING.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == RACE_SCHEMA else None
