"""The bench's report (specviz.labs.bench): where it ran (`environment`: the hardware and the
versions), its summaries (`best_by_temperature`: each draft's best gamma; `target_alone_over_hf`:
the target alone against transformers' generate()), and the results as markdown tables, one per
draft, written beside the JSON (`markdown`, `write_report`). docs/benchmarks.md explains every column.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch

from specviz.engine.machine import cpu_name
from specviz.labs import roofline


def best_by_temperature(results: list[dict]) -> dict:
    """For each temperature, the gamma with the highest untraced speedup."""
    best: dict[str, dict] = {}
    for row in results:
        key = str(row["temperature"])
        if key not in best or row["speedup"]["untraced"] > best[key]["speedup"]["untraced"]:
            best[key] = row
    return {
        k: {
            "gamma": v["gamma"],
            "speedup": v["speedup"]["untraced"],
            "speedup_over_fastest_alone": v["speedup_over_fastest_alone"],
            "over_hf_generate": v.get("over_hf_generate"),
        }
        for k, v in best.items()
    }


def environment(threads: int) -> dict:
    import transformers

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "hardware": {
            "device": "cuda" if gpu else "cpu",
            "gpu": gpu,
            "cpu": cpu_name(),
            "cpu_count": os.cpu_count(),
            "torch_threads": threads,
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
    }


def _fmt(value, spec: str, unit: str = "") -> str:
    """A number with its unit, or "n/a" alone (never "n/ax") when it was not measured."""
    return "n/a" if value is None else format(value, spec) + unit


def markdown(report: dict) -> str:
    """The results as markdown tables (one per draft), with the hardware and the baselines above."""
    hw, v, s = report["hardware"], report["versions"], report["settings"]
    where = hw["gpu"] or f"{hw['cpu']}, {hw['cpu_count']} cores, {hw['torch_threads']} torch thread(s)"
    lines = [
        f"Target `{s['target']}` ({s['dtype']}, kernels: {s['kernels']}), {s['prompts']} prompts "
        f"({s.get('prompt_set', 'bench')} set) x "
        f"{s['max_new_tokens']} new tokens, draft tree: {s.get('tree', 'branches')}, median of {s['reps']} reps "
        "after a warm-up.",
        f"Hardware: {where}. torch {v['torch']}, transformers {v['transformers']}, Python {v['python']}. "
        f"Load average before/after: {report['load_before']} / {report['load_after']}.",
        "",
    ]
    for t, alone in report.get("target_alone", {}).items():
        lines.append(
            f"- target alone at T={t}: specviz {alone['specviz_tokens_per_s']:.2f} tokens/s, transformers generate() "
            f"{alone['hf_generate_tokens_per_s']:.2f} ({alone['specviz_over_hf_generate']:.2f}x), its prompt lookup "
            f"{alone['hf_lookup_tokens_per_s']:.2f} tokens/s"
        )
    if "roofline" in report:
        lines += roofline.markdown_lines(report["roofline"])
    for run in report["runs"]:
        lines += ["", f"### Draft `{run['draft']}`", ""]
        for t, b in run["baseline"].items():
            hf_generate = b.get("hf_generate_tokens_per_s")
            lines.append(
                f"- baseline at T={t}: {b['tokens_per_s']:.2f} tokens/s ({b['target_step_ms']:.1f} ms per target step)"
                + ("" if hf_generate is None else f"; transformers generate() {hf_generate:.2f} tokens/s")
            )
        for t, b in run["best"].items():
            lines.append(
                f"- best gamma at T={t}: {b['gamma']} ({b['speedup']:.2f}x; "
                f"{b['speedup_over_fastest_alone']:.2f}x over the fastest target alone; "
                f"{_fmt(b.get('over_hf_generate'), '.2f', 'x')} transformers generate())"
            )
        lines += [
            "",
            "| T | γ | tokens/s untraced | tokens/s traced | tokens/s HF assisted | speedup "
            "| speedup over the fastest target alone | × HF generate() | × HF prompt lookup | speedup HF "
            "| acceptance rate | acceptance by position | mean accepted length | α | expected tokens | c "
            "| verify / step | predicted speedup | efficiency | tracing overhead | specviz / HF "
            "| output vs target alone |",
            "|" + "---|" * 22,
        ]
        for r in run["results"]:
            tps, sp = r["tokens_per_s"], r["speedup"]
            by_pos = " ".join(_fmt(a, ".2f") for a in r["acceptance_by_position"])
            lines.append(
                f"| {r['temperature']:g} | {r['gamma']} | {tps['untraced']:.2f} | {tps['traced']:.2f} "
                f"| {_fmt(tps.get('hf'), '.2f')} | {sp['untraced']:.2f}x "
                f"| {r['speedup_over_fastest_alone']:.2f}x ({r['fastest_alone']}) "
                f"| {_fmt(r.get('over_hf_generate'), '.2f', 'x')} | {_fmt(r.get('over_hf_lookup'), '.2f', 'x')} "
                f"| {_fmt(sp.get('hf'), '.2f', 'x')} "
                f"| {_fmt(r['acceptance_rate'], '.3f')} | {by_pos} | {_fmt(r['mean_accepted_length'], '.2f')} "
                f"| {_fmt(r['alpha'], '.3f')} | {_fmt(r['expected_tokens'], '.2f')} | {r['c']:.3f} "
                f"| {r['verify_over_target_step']:.2f} | {_fmt(r['predicted_speedup'], '.2f', 'x')} "
                f"| {_fmt(r['efficiency'], '.2f')} | {100 * r['tracing_overhead']:.1f}% "
                f"| {_fmt(r['specviz_over_hf'], '.2f')} | {_sameness_cell(r.get('sameness', {}))} |"
            )
    return "\n".join(lines) + "\n"


def _sameness_cell(counts: dict) -> str:
    words = {
        "identical": "identical",
        "near_tie": "near-tie",
        "mismatch": "MISMATCH",
        "differs": "differs",
        "different_samples": "samples (T>0)",
    }
    return ", ".join(f"{counts[k]} {w}" for k, w in words.items() if counts.get(k)) or "n/a"


def write_report(report: dict, out: Path) -> None:
    """The JSON report at `out`, its markdown table beside it (.md) and on stdout."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    table = markdown(report)
    out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"written {out} and {out.with_suffix('.md')}")


def target_alone_over_hf(baselines: dict) -> dict:
    """Per temperature, specviz's target alone against transformers' generate() on the same model,
    from the first draft's sweep (the baselines rotate between its gamma blocks)."""
    out = {}
    for t, b in baselines.items():
        p, h = b["tokens_per_s"], b["hf_generate_tokens_per_s"]
        out[t] = {
            "specviz_tokens_per_s": p,
            "hf_generate_tokens_per_s": h,
            "hf_lookup_tokens_per_s": b["hf_lookup_tokens_per_s"],
            "specviz_over_hf_generate": p / h,
        }
    return out
