"""How well each offline draft guesses the target on free text: `python -m specviz draft-report`.

The draft is what bounds speculation once the engine is fast: an iteration costs at least one
target pass, so the speedup over the target alone is at most τ, the tokens an iteration emits. This
report measures, on the bench's held-out free-text prompts (specviz.labs.bench.HELD_OUT_PROMPTS: no
default was tuned on them, no recipe trains on them), for each drafter at T=0 and T=1 with its
default settings
(and, with --trees, each draft tree of specviz.config.TREE_MODES: today's branches, EAGLE-2's dynamic tree):

    τ               tokens per target pass (new tokens ÷ iterations, the correction included)
    drafts          drafts made per iteration (γ is the most: early stops, lookups that run out)
    accept@k        acceptance at draft position k (specviz.traces.trace.acceptance_by_position);
                    at T=0 a draft passes only when it is the target's own choice: greedy agreement
    alpha@k         the mean of β = Σ min(p, q) over the drafts that reached position k: the chance
                    its test passes at this temperature (what a sampled run's acceptance estimates)
    top-k coverage  at draft position 1, how often the target's choice (argmax p) is among the
                    draft's top 1, 2, 4 and 8 (the trace's top-10 lists of q): what a wider tree can buy.
                    Read from the runs at T > 0 only: at T = 0 q is one-hot, its top list one token
    lookups         the share of iterations a lookup drafted (the hybrid's n-gram or suffix match),
                    and the share of its drafts accepted
    v(rows)         one target pass of `rows` new tokens ÷ a one-row step, rows 1..16 (how flat
                    verification is on this machine)
    speedup         measured: the drafter's decode against the target alone on the same prompt,
                    interleaved (alternating which runs first), total tokens ÷ total seconds;
                    predicted: τ ÷ (drafts·c + v), the iteration's cost in target steps from the
                    run's measured c and v (specviz.traces.speedup's definitions)

Writes JSON and a markdown table (docs/benchmarks.md, "The draft report"). With --ship it writes
instead the shipped record the Drafters and Acceptance pages read, specviz/assets/draft_report.json
(the default hybrid and the shipped head, the sha256 of the head's weights it measured, the CPU, date
and settings): `python -m specviz draft-report --ship --threads 1` after the head is trained again
(tests/test_draft_quality.py fails until then). Its definitions: specviz.traces.draft_quality.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from specviz.config import DRAFTERS as REGISTRY
from specviz.engine.machine import cpu_name, load_average
from specviz.shipped import WEIGHTS
from specviz.traces.draft_quality import (
    COVERAGE_K,
    HEAD_WEIGHTS,
    RECORD,
    draft_stats,
    head_digest,
    lookup_share,
    top_k_coverage,
)

DRAFTERS = "hybrid,head,ngram"  # the default, the head alone, the lookup alone: registry keys or draft names
SHIPPED_DRAFTERS = "hybrid,head"  # --ship: the default and the shipped head, the pages' two
__all__ = ["COVERAGE_K", "draft_stats", "lookup_share", "top_k_coverage"]  # their home: specviz.traces.draft_quality
ROWS = (1, 2, 4, 7, 8, 12, 16)


def verify_rows(target, reps: int = 9) -> dict[str, float]:
    """v(rows): the median of `reps` passes of `rows` new tokens ÷ the median one-row step, same context
    (specviz.engine.verify_cost.measure, the measurement the dynamic tree's budget reads)."""
    from specviz.engine.verify_cost import measure

    v, _one = measure(target, ROWS, reps)
    return {str(r): v[r] for r in ROWS}


def measured_speedup(spec: list, alone: list) -> float:
    """Tokens per second of the drafter's runs over the target alone's, every prompt counted."""
    spec_rate = sum(t.summary["new_tokens"] for t in spec) / sum(t.summary["wall_ms"] for t in spec)
    alone_rate = sum(t.summary["new_tokens"] for t in alone) / sum(t.summary["wall_ms"] for t in alone)
    return spec_rate / alone_rate


def predicted_speedup(spec: list, alone: list) -> float | None:
    """τ ÷ (drafts·c + v) with c and v measured on these runs (per drafted token, per pass)."""
    step = sum(t.summary["wall_ms"] for t in alone) / sum(t.summary["new_tokens"] for t in alone)
    its = sum(t.summary["iterations"] for t in spec)
    drafted = sum(t.summary["drafted"] for t in spec)
    if not its or not step:
        return None
    c = sum(t.summary["draft_ms"] for t in spec) / drafted / step if drafted else 0.0
    v = sum(t.summary["verify_ms"] for t in spec) / its / step
    tau = sum(t.summary["new_tokens"] for t in spec) / its
    return tau / (drafted / its * c + v)


def decode_pairs(
    target, drafter: str, prompts: list[str], temperature: float, max_new: int, log, tree: bool | str = True
) -> tuple[list, list]:
    """Each prompt decoded by the drafter and by the target alone, alternating which goes first."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate

    spec, alone = [], []
    options = DecodeOptions(temperature=temperature, max_new_tokens=max_new, tree=tree)
    settings = {"target": target, "options": options}
    for i, prompt in enumerate(prompts):
        runs = [
            lambda p=prompt: spec.append(speculative_generate(p, draft=drafter, **settings)),
            lambda p=prompt: alone.append(autoregressive_generate(p, **settings)),
        ]
        for run in runs if i % 2 == 0 else reversed(runs):
            run()
        log(f"{drafter} ({tree}) T={temperature:g}: prompt {i + 1}/{len(prompts)}")
    return spec, alone


def report(prompts: list[str], drafters: tuple[str, ...], temperatures, max_new: int, log=print, trees=(True,)) -> dict:
    """The report of `drafters` (draft names) with each of `trees` (DecodeOptions.tree) on `prompts` at
    each temperature, and v(rows)."""
    from specviz.config import DEFAULT_GAMMA, DecodeOptions
    from specviz.engine.models import load_model

    target = load_model(None, dtype="float32")
    for tree in trees:  # a warm-up, so no timed run pays first-call costs (a dynamic tree's measured budget too)
        decode_pairs(target, drafters[0], prompts[:1], 0.0, 8, lambda _m: None, tree)
    rows = []
    for drafter in drafters:
        for tree in trees:
            for temperature in temperatures:
                spec, alone = decode_pairs(target, drafter, prompts, temperature, max_new, log, tree)
                row = {"drafter": drafter, "tree": tree, "temperature": temperature, **draft_stats(spec, DEFAULT_GAMMA)}
                row["speedup_measured"] = measured_speedup(spec, alone)
                row["speedup_predicted"] = predicted_speedup(spec, alone)
                rows.append(row)
    return {
        "cpu": cpu_name(),
        "threads": torch_threads(),
        "date": time.strftime("%Y-%m-%d"),
        "gamma": DEFAULT_GAMMA,
        "max_new_tokens": max_new,
        "seed": DecodeOptions().seed,
        "drafters": list(drafters),
        "temperatures": list(temperatures),
        "trees": list(trees),
        "head": {"file": HEAD_WEIGHTS.relative_to(WEIGHTS.parent).as_posix(), "sha256": head_digest()},
        "prompts": prompts,
        "v_rows": verify_rows(target),
        "load_average": load_average(),
        "rows": rows,
    }


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _cell(value, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def markdown(rep: dict) -> str:
    """The report as the tables docs/benchmarks.md shows."""
    lines = [
        f"{rep['cpu']}, {rep.get('threads', '?')} torch threads, {rep['date']}, γ = {rep['gamma']}, "
        f"{rep['max_new_tokens']} new tokens, {len(rep['prompts'])} held-out free-text prompts",
        "",
        "| drafter | T | τ | drafts/it | accept@1..γ | α@1..γ | top-1/2/4/8 at position 1 | lookups fired, accepted "
        "| speedup measured | predicted |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rep["rows"]:
        name = r["drafter"] if r.get("tree", True) is True else f"{r['drafter']} ({r['tree']})"
        cov = " / ".join(_cell(r["coverage"][f"top{k}"]) for k in COVERAGE_K) if r["coverage"] else "– (T = 0)"
        look = f"{_cell(r['lookups']['fired'])}, {_cell(r['lookups']['accepted'])}"
        lines.append(
            f"| {name} | {r['temperature']:g} | {_cell(r['tau'])} | {_cell(r['drafts_per_iteration'])} "
            f"| {' '.join(_cell(a) for a in r['accept_at'])} | {' '.join(_cell(a) for a in r['alpha_at'])} "
            f"| {cov} | {look} | {_cell(r['speedup_measured'])}× | {_cell(r['speedup_predicted'])}× |"
        )
    rows = rep["v_rows"]
    lines += ["", "| rows | " + " | ".join(rows) + " |", "| --- |" + " --- |" * len(rows)]
    lines.append("| v(rows) | " + " | ".join(_cell(v) for v in rows.values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import sys

    from specviz.labs.bench import HELD_OUT_PROMPTS
    from specviz.labs.command_help import with_defaults

    parser = argparse.ArgumentParser(prog="python -m specviz draft-report", description=__doc__.splitlines()[0])
    parser.add_argument("--drafters", default=None, help=f"comma-separated drafters: registry keys or draft names "
                        f"(default {DRAFTERS}; with --ship {SHIPPED_DRAFTERS})")  # fmt: skip
    parser.add_argument("--temperatures", default="0,1", help="comma-separated temperatures")
    parser.add_argument("--prompts", type=int, default=len(HELD_OUT_PROMPTS), help="how many held-out prompts")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="the most tokens each decode writes")
    parser.add_argument("--trees", default="branches", help="comma-separated draft trees: off, branches, dynamic")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=Path("draft-report.json"), help="JSON; the table goes beside it")
    parser.add_argument("--ship", action="store_true", help=f"write the shipped record the app reads, {RECORD.name}")
    args = with_defaults(parser).parse_args(sys.argv[1:] if argv is None else argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    temperatures = [float(t) for t in args.temperatures.split(",") if t.strip()]
    keys = {k.key: k.name for k in REGISTRY.values()}  # "head" -> the shipped head's draft name
    names = args.drafters or (SHIPPED_DRAFTERS if args.ship else DRAFTERS)
    drafters = tuple(keys.get(d.strip(), d.strip()) for d in names.split(",") if d.strip())
    trees = tuple(t.strip() for t in args.trees.split(",") if t.strip())
    rep = report(HELD_OUT_PROMPTS[: args.prompts], drafters, temperatures, args.max_new_tokens, trees=trees)
    rep["command"] = " ".join(["python -m specviz draft-report", *(sys.argv[1:] if argv is None else argv)])
    table = markdown(rep)
    if args.ship:
        RECORD.write_text(json.dumps(rep, indent=1) + "\n", encoding="utf-8")
    else:
        args.out.write_text(json.dumps(rep, indent=1) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    return 0
