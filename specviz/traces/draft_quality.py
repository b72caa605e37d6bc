"""How well a draft guesses the target, read from traces: τ, acceptance and α by draft position, the
draft's top-k coverage and the lookups' share; and the shipped record of the shipped drafters on
held-out free text (assets/draft_report.json, written by `python -m specviz draft-report --ship`).

One home for these rules: the draft report (specviz.labs.draft_report) measures with them, the
Acceptance page reads the run on show with them, and the Drafters page shows the shipped record.
Plain data in, plain numbers out: no torch.

    τ               tokens per target pass: new tokens ÷ iterations, the correction included (the
                    headline's tokens per iteration, specviz.traces.summary's mean_accepted_length)
    accept@k        acceptance at draft position k (specviz.traces.summary.acceptance_by_position)
    alpha@k         the mean of β = Σ min(p, q) over the drafts that reached position k
    top-k coverage  at draft position 1, how often the target's choice (argmax p, the first of the
                    draft's p_top) is among the draft's top k (its q_top): what a wider tree can buy.
                    Only where q is a distribution: at T = 0 q is one-hot, its top list one token

The record names the head it measured by the sha256 of its weights file (`head_digest`), so a head
trained again leaves a record that `record_is_stale` finds out (tests/test_draft_quality.py fails).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path

from specviz.errors import SpecvizError
from specviz.shipped import ASSETS, WEIGHTS
from specviz.traces.summary import acceptance_by_position

COVERAGE_K = (1, 2, 4, 8)
RECORD = ASSETS / "draft_report.json"
HEAD_WEIGHTS = WEIGHTS / "specviz-head-smollm2" / "head.safetensors"
# The command that writes RECORD (docs/benchmarks.md, "The shipped record").
SHIP_COMMAND = "python -m specviz draft-report --ship --threads 1"


def draft_stats(traces: list, gamma: int) -> dict:
    """What a drafter's traces (one per prompt, one temperature) say of its drafts."""
    its = [it for t in traces for it in t.iterations]
    made = [len(it["drafts"]) for it in its]
    new_tokens = sum(t.summary["new_tokens"] for t in traces)
    by_pos = acceptance_by_position(its, gamma)
    return {
        "iterations": len(its),
        "tau": new_tokens / len(its) if its else None,
        "drafts_per_iteration": statistics.fmean(made) if made else None,
        "accept_at": [row["acceptance"] for row in by_pos],
        "reached_at": [row["reached"] for row in by_pos],
        "alpha_at": [row["mean_beta"] for row in by_pos],
        "coverage": top_k_coverage(its) if traces and traces[0].config.get("temperature") else None,
        "lookups": lookup_share(its),
    }


def top_k_coverage(iterations: list[dict]) -> dict[str, float | None]:
    """At draft position 1: the share of drafts whose q's top-k held the target's choice (argmax p)."""
    firsts = [it["drafts"][0] for it in iterations if it["drafts"]]
    out: dict[str, float | None] = {}
    for k in COVERAGE_K:
        hits = [int(d["p_top"][0][0]) in {int(tok) for tok, _ in d["q_top"][:k]} for d in firsts if d["p_top"]]
        out[f"top{k}"] = sum(hits) / len(hits) if hits else None
    return out


def lookup_share(iterations: list[dict]) -> dict[str, float | None]:
    """How often a lookup (n-gram or suffix match) drafted, and how many of its drafts passed."""
    drafted = [it for it in iterations if it["drafts"]]
    looked = [it for it in drafted if (it.get("drafting") or {}).get("source") in ("ngram", "suffix")]
    made = sum(len(it["drafts"]) for it in looked)
    return {
        "fired": len(looked) / len(drafted) if drafted else None,
        "accepted": sum(it["accepted_count"] for it in looked) / made if made else None,
    }


def coverage_caveat(trace) -> str | None:
    """Why a trace's top-k coverage means nothing, or None when it does: "greedy" (T = 0: q is one-hot,
    its top list the one token it drafted), "one_hot" (every first draft's q was one token: a lookup's,
    or a tree's chosen tokens) or "no_drafts" (no iteration drafted)."""
    firsts = [it["drafts"][0] for it in trace.iterations if it["drafts"]]
    if not trace.config.get("temperature"):
        return "greedy"
    if not firsts:
        return "no_drafts"
    if all(len(d["q_top"]) <= 1 or d["q_top"][0][1] >= 1.0 for d in firsts):
        return "one_hot"
    return None


def run_quality(trace) -> dict:
    """The run on show in the record's terms (draft_stats of this one trace), with its coverage only
    where it means something (`coverage_caveat`), and its temperature."""
    stats = draft_stats([trace], int(trace.config.get("gamma") or 0))
    caveat = coverage_caveat(trace)
    stats["coverage"] = top_k_coverage(trace.iterations) if caveat is None else None
    return {**stats, "coverage_caveat": caveat, "temperature": float(trace.config.get("temperature") or 0.0)}


def head_digest(path: Path = HEAD_WEIGHTS) -> str:
    """The sha256 of the shipped head's weights file: which head a record measured."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_record(path: Path = RECORD) -> dict:
    """The shipped record, checked enough to show. Raises SpecvizError with a message naming the problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecvizError(f"Cannot read {path.name}: {exc}.") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows or not isinstance(data.get("head"), dict):
        raise SpecvizError(f"{path.name} has no 'rows' of drafters or no 'head' it measured.")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not all(k in row for k in ("drafter", "temperature", "tau", "accept_at")):
            raise SpecvizError(f"{path.name}: row {i + 1} needs a drafter, a temperature, tau and accept_at.")
    return data


def record_is_stale(record: dict, path: Path = HEAD_WEIGHTS) -> bool:
    """True when the head the record measured is not the head shipped now (its weights changed)."""
    return record.get("head", {}).get("sha256") != head_digest(path)


def record_row(record: dict, drafter: str, temperature: float) -> dict | None:
    """The record's row of `drafter` (a draft name) at the temperature nearest `temperature`."""
    rows = [r for r in record["rows"] if r["drafter"] == drafter and r.get("tree", "branches") in ("branches", True)]
    if not rows:
        return None
    return min(rows, key=lambda r: abs(r["temperature"] - temperature))
