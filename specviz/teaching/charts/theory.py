"""Figures of the paper's closed forms (specviz.labs.theory): tokens per iteration and walltime
improvement against gamma, the (alpha, c) plane with the "speedup needs alpha > c" boundary, the
draft's alpha along its training, and Table 4 as rows; and, in words, whether a trace drafted as the
formula assumes (one chain of exactly gamma drafts every iteration).

Pure functions: no torch, no streamlit. A measured point (from a trace) is passed in as plain
numbers, so the same axes carry theory and measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go

from specviz.config import PAPER_DRAFT
from specviz.labs.theory import (
    TABLE_4,
    best_gamma,
    expected_tokens_per_iteration,
    walltime_improvement,
)
from specviz.teaching import glossary
from specviz.teaching.charts.drafting import STOP_WORDS, plural, run_summary
from specviz.teaching.charts.style import LAYOUT, PREDICTION_COLOR, STATUS_COLORS, house_figure, titled
from specviz.teaching.charts.words import words
from specviz.traces.trace import Trace

THEORY_COLOR = "#1565c0"  # the curve of the slider setting
MEASURED_COLOR = "#d81b60"  # what the current trace measured (a filled diamond everywhere)
BEST_COLOR = STATUS_COLORS["accepted"]  # the best gamma: a green star
LOSS_SHADE = "rgba(198, 40, 40, 0.10)"  # the region where drafting cannot pay (alpha <= c, or below 1x)
GAMMA_MAX = 16
SPEEDUP_SATURATION = 4.0  # the (α, c) plane's colours stop changing above 4x, so 1x (white) stays visible


def _gammas(gamma_max: int) -> list[int]:
    return list(range(1, gamma_max + 1))


def tokens_per_iteration_curve_figure(
    alpha: float,
    gamma: int,
    gamma_max: int = GAMMA_MAX,
    measured: dict[str, float] | None = None,
    compare_alphas: Sequence[float] = (0.5, 0.7, 0.9),
) -> go.Figure:
    """Expected tokens per iteration (1 - α^(γ+1)) / (1 - α) against γ: the chosen α bold, a few
    others faint for scale, the ceiling γ + 1 dotted, the chosen γ marked.

    measured: {"gamma": γ of the trace, "tokens": its mean accepted length, "alpha": its α}.
    """
    gs = _gammas(gamma_max)
    fig = house_figure()
    _tokens_curves(fig, gs, alpha, compare_alphas)
    _your_gamma(
        fig,
        gamma,
        expected_tokens_per_iteration(alpha, gamma),
        f"your γ = {gamma}",
        "your γ %{x}: %{y:.2f} tokens per iteration<extra></extra>",
    )
    if measured and measured.get("tokens") is not None and measured.get("gamma"):
        fig.add_scatter(
            x=[measured["gamma"]],
            y=[measured["tokens"]],
            mode="markers",
            marker={"color": MEASURED_COLOR, "size": 13, "symbol": "diamond"},
            name="measured (current trace)",
            hovertemplate="current trace: γ %{x}, %{y:.2f} tokens per iteration<extra></extra>",
        )
    fig.update_layout(
        title=titled(f"Expected tokens per iteration at α = {alpha:.2f}  (Eq. 1)"),
        xaxis_title="γ (draft tokens per iteration)",
        yaxis_title="tokens per iteration (tokens)",
        height=400,
    )
    fig.update_xaxes(dtick=1 if gamma_max <= 16 else 2)
    # The ceiling grows with γ; cut it so the curves, not the ceiling, fill the chart.
    curves = [expected_tokens_per_iteration(a, gamma_max) for a in (alpha, *compare_alphas)]
    if measured and measured.get("tokens") is not None:
        curves.append(measured["tokens"])
    fig.update_yaxes(range=[0, min(gamma_max + 1, max(curves) * 1.15 + 0.5)])
    return fig


def _tokens_curves(fig: go.Figure, gs: list[int], alpha: float, compare_alphas: Sequence[float]) -> None:
    """Eq. 1's curves: the ceiling γ + 1 dotted, the other α faint for scale, the chosen α bold."""
    fig.add_scatter(
        x=gs,
        y=[g + 1 for g in gs],
        mode="lines",
        line={"color": "#9e9e9e", "dash": "dot"},
        name="ceiling γ + 1 (every draft accepted)",
        hovertemplate="γ %{x}: at most %{y} tokens<extra></extra>",
    )
    for a in compare_alphas:
        if abs(a - alpha) < 1e-9:
            continue
        fig.add_scatter(
            x=gs,
            y=[expected_tokens_per_iteration(a, g) for g in gs],
            mode="lines",
            line={"color": "rgba(21, 101, 192, 0.28)", "width": 1.5},
            name=f"α = {a:g}",
            hovertemplate=f"α {a:g}, γ %{{x}}: %{{y:.2f}} tokens<extra></extra>",
        )
    fig.add_scatter(
        x=gs,
        y=[expected_tokens_per_iteration(alpha, g) for g in gs],
        mode="lines+markers",
        line={"color": THEORY_COLOR, "width": 3},
        marker={"size": 5},
        name=f"expected at α = {alpha:.2f}",
        hovertemplate="γ %{x}: %{y:.2f} tokens per iteration<extra></extra>",
    )


def _your_gamma(fig: go.Figure, gamma: int, y: float, name: str, hovertemplate: str) -> None:
    """The slider's γ on its curve: an open circle, the same on both γ charts."""
    fig.add_scatter(
        x=[gamma],
        y=[y],
        mode="markers",
        marker={"color": THEORY_COLOR, "size": 14, "symbol": "circle-open", "line": {"width": 3}},
        name=name,
        hovertemplate=hovertemplate,
    )


def walltime_curve_figure(
    alpha: float,
    c: float,
    gamma: int,
    gamma_max: int = GAMMA_MAX,
    measured: dict[str, float] | None = None,
    lang: str = "en",
    v: float = 1.0,
) -> go.Figure:
    """Expected walltime improvement against γ at the chosen α, c and v (specviz.labs.theory: v = 1 is
    Thm 3.8), the best γ starred, the 1× line (the target alone) with the losing side shaded.

    measured: {"gamma", "alpha", "c", "v"} of the current trace, drawn as the improvement its own
    α, c and v predict; plus "speedup" when a baseline measured one (a second marker).
    lang: the language of its words (specviz.teaching.charts.words).
    """
    w = words(lang)
    gs = _gammas(gamma_max)
    ys = [walltime_improvement(alpha, g, c, v) for g in gs]
    best = best_gamma(alpha, c, gamma_max, v)
    fig = house_figure()
    fig.add_hrect(y0=0, y1=1, fillcolor=LOSS_SHADE, line_width=0, layer="below")
    fig.add_scatter(
        x=[gs[0], gs[-1]],
        y=[1, 1],
        mode="lines",
        line={"color": STATUS_COLORS["rejected"], "dash": "dash"},
        name=w["one_x"],
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=gs,
        y=ys,
        mode="lines+markers",
        line={"color": THEORY_COLOR, "width": 3},
        marker={"size": 5},
        name=w["expected_ac"].format(alpha=alpha, c=c),
        hovertemplate="γ %{x}: %{y:.2f}× faster<extra></extra>",
    )
    fig.add_scatter(
        x=[best],
        y=[ys[best - 1]],
        mode="markers",
        marker={"color": BEST_COLOR, "size": 18, "symbol": "star"},
        name=w["best_gamma"].format(gamma=best, speedup=ys[best - 1]),
        hovertemplate="best γ %{x}: %{y:.2f}×<extra></extra>",
    )
    y = ys[gamma - 1] if gamma <= gamma_max else walltime_improvement(alpha, gamma, c, v)
    _your_gamma(fig, gamma, y, w["your_gamma"].format(gamma=gamma), "your γ %{x}: %{y:.2f}×<extra></extra>")
    top = max([*ys, 1.2, *_walltime_measured(fig, measured, w)])
    fig.update_layout(
        # Thm 3.8 is the paper's v = 1; any other v is this formula, not the theorem.
        title=titled((w["walltime_title"] if v == 1.0 else w["walltime_title_v"]).format(alpha=alpha, c=c, v=v)),
        xaxis_title=w["gamma_x"],
        yaxis_title=w["walltime_y"],
        height=400,
    )
    fig.update_xaxes(dtick=1 if gamma_max <= 16 else 2)
    fig.update_yaxes(range=[0, top * 1.1])
    return fig


def _walltime_measured(fig: go.Figure, measured: dict[str, float] | None, w: dict[str, str]) -> list[float]:
    """The current trace on the walltime chart: what the formula gives for its own α, c and v, and
    the speedup its baseline measured; returns the heights drawn, so the axis can reach them."""
    if not (measured and measured.get("alpha") is not None and measured.get("c") is not None and measured.get("gamma")):
        return []
    g = int(measured["gamma"])
    pred = walltime_improvement(measured["alpha"], g, measured["c"], measured.get("v") or 1.0)
    fig.add_scatter(
        x=[g],
        y=[pred],
        mode="markers",
        marker={"color": MEASURED_COLOR, "size": 13, "symbol": "diamond"},
        name=w["trace_predicted"].format(speedup=pred),
        hovertemplate="current trace γ %{x}: the formula with its α, c and v gives %{y:.2f}×<extra></extra>",
    )
    if measured.get("speedup") is None:
        return [pred]
    fig.add_scatter(
        x=[g],
        y=[measured["speedup"]],
        mode="markers",
        marker={"color": MEASURED_COLOR, "size": 13, "symbol": "x"},
        name=w["trace_measured"].format(speedup=measured["speedup"]),
        hovertemplate="current trace γ %{x}: measured %{y:.2f}×<extra></extra>",
    )
    return [pred, measured["speedup"]]


@lru_cache(maxsize=8)
def best_speedup_grid(
    c_max: float, gamma_max: int, steps: int, v: float = 1.0
) -> tuple[list[float], list[float], list[list[float]]]:
    """(alphas [steps], cs [steps], z [c][alpha]): the best speedup any gamma up to gamma_max gives
    at each point of the (alpha, c) plane at verification cost v. It depends on nothing else, and 41 x 41 points x 16
    gammas take a third of a second, so it is computed once per grid (the Theory page redraws on
    every slider move). Callers must not modify the lists."""
    alphas = [i / (steps - 1) for i in range(steps)]
    cs = [c_max * j / (steps - 1) for j in range(steps)]
    z = [[max(walltime_improvement(a, best_gamma(a, cc, gamma_max, v), cc, v), 0.0) for a in alphas] for cc in cs]
    return alphas, cs, z


def alpha_c_plane_figure(
    alpha: float,
    c: float,
    measured: dict[str, float] | None = None,
    c_max: float = 0.6,
    gamma_max: int = GAMMA_MAX,
    steps: int = 41,
    v: float = 1.0,
) -> go.Figure:
    """The (α, c) plane coloured by the best speedup any γ gives at verification cost v (white = 1×,
    deep green = 4× or more); at v = 1 the line α = c splits it (Cor 3.9): above the line (c ≥ α)
    drafting cannot pay for any γ, and a dearer verification (v > 1) moves the white border below
    it. The slider setting and the current trace are points on it; Table 4's rows are faint
    crosses for reference (measured with v = 1)."""
    fig = house_figure()
    _plane_map(fig, c_max, gamma_max, steps, v)
    fig.add_scatter(
        x=[alpha],
        y=[c],
        mode="markers",
        marker={"color": THEORY_COLOR, "size": 15, "symbol": "circle", "line": {"color": "white", "width": 2}},
        name="your sliders",
        hovertemplate="sliders: α %{x:.2f}, c %{y:.2f}<extra></extra>",
    )
    if measured and measured.get("alpha") is not None and measured.get("c") is not None:
        my = min(measured["c"], c_max)
        clipped = " (c off the chart, drawn at the top)" if measured["c"] > c_max else ""
        fig.add_scatter(
            x=[measured["alpha"]],
            y=[my],
            mode="markers",
            marker={"color": MEASURED_COLOR, "size": 15, "symbol": "diamond", "line": {"color": "white", "width": 2}},
            name="current trace (measured)" + clipped,
            hovertemplate=f"current trace: α %{{x:.3f}}, c {measured['c']:.3f}<extra></extra>",
        )
    fig.update_layout(
        title=titled(
            "Where speculative decoding pays: the best speedup over γ for each α and c"
            + ("" if v == 1.0 else f", at v = {v:.2f}")
        ),
        xaxis_title=f"{glossary.ALPHA.label}, 0 to 1",
        yaxis_title="c (draft step time ÷ target step time)",
        height=430,
    )
    fig.update_xaxes(range=[0, 1])
    fig.update_yaxes(range=[0, c_max])
    return fig


def _plane_map(fig: go.Figure, c_max: float, gamma_max: int, steps: int, v: float) -> None:
    """The plane itself, the same whatever the sliders say: the best speedup as colour, the line
    α = c, and Table 4's rows."""
    alphas, cs, z = best_speedup_grid(c_max, gamma_max, steps, v)
    fig.add_heatmap(
        x=alphas,
        y=cs,
        z=z,
        zmin=0,
        zmax=SPEEDUP_SATURATION,
        colorscale=[[0, "#ef9a9a"], [1 / SPEEDUP_SATURATION, "#ffffff"], [1, "#1b5e20"]],
        colorbar={"title": {"text": "best speedup (×)"}, "len": 0.85, "ticksuffix": "×"},
        hovertemplate="α %{x:.2f}, c %{y:.2f}: best speedup %{z:.2f}×<extra></extra>",
        name="best speedup over γ",
        showlegend=False,
    )
    fig.add_scatter(
        x=[0, c_max],
        y=[0, c_max],
        mode="lines",
        line={"color": STATUS_COLORS["rejected"], "width": 3, "dash": "dash"},
        name="α = c: above it no γ gives a speedup (Cor 3.9)",
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=[r.alpha for r in TABLE_4],
        y=[r.c for r in TABLE_4],
        mode="markers",
        marker={"color": PREDICTION_COLOR, "size": 7, "symbol": "x-thin", "line": {"width": 1.5}},
        name="the paper's Table 4 (T5 pairs)",
        text=[f"{r.task} {r.draft} T={r.temperature:g}" for r in TABLE_4],
        hovertemplate="%{text}: α %{x:.2f}, c %{y:.2f}<extra></extra>",
    )


def table4_rows() -> list[dict[str, Any]]:
    """Table 4 of the paper beside Thm 3.8 recomputed here: a visible check of specviz.labs.theory."""
    rows = []
    for r in TABLE_4:
        ours = r.predicted()
        rows.append(
            {
                "task": r.task,
                "draft": r.draft,
                "temperature": r.temperature,
                "γ": r.gamma,
                "α": r.alpha,
                "c": r.c,
                "paper expected (×)": r.expected,
                "paper measured (×)": r.empirical,
                "our formula (×)": round(ours, 2),
                "formula − paper expected": round(ours - r.expected, 2),
            }
        )
    return rows


def draft_training_figure(history: Sequence[dict[str, Any]], c: float, gamma_max: int = GAMMA_MAX) -> go.Figure:
    """α of the draft along its training (left axis) and the best speedup Thm 3.8 predicts from it
    at cost ratio c (right axis). history: [{"step", "alpha", "greedy_agreement"?,
    "alpha_bench_prompts"?}, ...]."""
    steps = [h["step"] for h in history]
    alphas = [h["alpha"] for h in history]
    fig = house_figure()
    fig.add_scatter(
        x=steps,
        y=alphas,
        mode="lines+markers",
        line={"color": THEORY_COLOR, "width": 3},
        name="α at temperature 1 (held-out text)",
        hovertemplate="step %{x}: α %{y:.3f}<extra></extra>",
    )
    _optional_measures(fig, history, steps)
    speedups = [walltime_improvement(a, best_gamma(a, c, gamma_max), c) for a in alphas]
    best_gs = [best_gamma(a, c, gamma_max) for a in alphas]
    fig.add_scatter(
        x=steps,
        y=speedups,
        yaxis="y2",
        mode="lines+markers",
        line={"color": BEST_COLOR, "width": 3},
        marker={"symbol": "star", "size": 9},
        name=f"predicted best speedup at T=1, c = {c:.2f} (right axis)",
        customdata=best_gs,
        hovertemplate="step %{x}: %{y:.2f}× at best γ %{customdata}<extra></extra>",
    )
    fig.update_layout(
        title=titled("The shipped draft along its training: α and the speedup it predicts"),
        xaxis_title="training step (optimiser updates)",
        yaxis={"title": {"text": glossary.ALPHA.label}, "range": [0, 1]},
        yaxis2={
            "title": {"text": "predicted speedup (× target alone)"},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "showgrid": False,
            # Plotly lines an overlaying axis's ticks up with the left axis's grid, which put 1.491,
            # 1.193, 0.895 on the speedup axis: its own round ticks instead (it draws no grid of its own).
            "tickmode": "auto",
        },
        height=420,
    )
    fig.update_layout(margin={**LAYOUT["margin"], "r": 70})
    return fig


# The draft's other measures along its training, each drawn only when every point of the record
# has it: key, dash, marker, legend, hover.
OPTIONAL_MEASURES = (
    ("greedy_agreement", "dot", "circle", "greedy agreement (α at temperature 0)", "greedy agreement %{y:.3f}"),
    (
        "alpha_bench_prompts",
        "dash",
        "diamond",
        "α at temperature 1 on the benchmark's free-text prompts",
        "α %{y:.3f} on the benchmark's prompts",
    ),
)


def _optional_measures(fig: go.Figure, history: Sequence[dict[str, Any]], steps: list[Any]) -> None:
    """A dotted or dashed line for each of OPTIONAL_MEASURES that every point of `history` recorded."""
    for key, dash, symbol, name, hover in OPTIONAL_MEASURES:
        values = [h.get(key) for h in history]
        if all(v is not None for v in values):
            fig.add_scatter(
                x=steps,
                y=values,
                mode="lines+markers",
                line={"color": THEORY_COLOR, "width": 2, "dash": dash},
                marker={"symbol": symbol},
                name=name,
                hovertemplate=f"step %{{x}}: {hover}<extra></extra>",
            )


def drafting_against_formula(trace: Trace) -> tuple[str, str] | None:
    """Whether `trace` drafted as the formula assumes, every iteration one chain of exactly γ drafts:
    (kind, sentence), kind "paper" (the paper's algorithm: the assumption holds but for the first
    iteration and the last ones near max new tokens, which the sentence counts), "most" (more than half
    the iterations drafted fewer than γ, or a tree), "some" (fewer did); None: every iteration drafted
    one chain of γ."""
    gamma = trace.config.get("gamma") or 0
    its = trace.iterations
    if not gamma or not its:
        return None
    short = [it for it in its if len(it["drafts"]) < gamma]
    trees = [it for it in its if it.get("tree")]
    if trace.config.get("draft") == PAPER_DRAFT:
        return "paper", _paper_sentence(its, short, gamma)
    if not short and not trees:
        return None
    parts = []
    if short:
        parts.append(run_summary(trace))
    if trees:
        parts.append(
            f"In {len(trees)} of {plural(len(its), 'iteration')} it drafted a tree: several branches checked in one "
            "target pass, one kept, where the formula knows one chain."
        )
    parts.append(
        f"The formula assumes every iteration drafts one chain of exactly γ = {gamma}, so its prediction is for "
        "drafting this run did not do."
    )
    kind = "most" if 2 * len({it["index"] for it in short + trees}) > len(its) else "some"
    return kind, " ".join(parts)


def _paper_sentence(its: list[dict[str, Any]], short: list[dict[str, Any]], gamma: int) -> str:
    """The paper's algorithm, truthfully: which iterations drafted fewer than γ, and why."""
    first = [it for it in short if (it.get("drafting") or {}).get("stop") == "no_features"]
    room = [it for it in short if it not in first and not (it.get("drafting") or {}).get("stop")]
    other = [it for it in short if it not in first and it not in room]
    text = (
        f"This trace is the paper's Algorithm 1: the draft head drafted one chain of γ = {gamma}, no tree, no early "
        f"stop, so the formula's assumption about drafting holds. {len(its) - len(short)} of "
        f"{plural(len(its), 'iteration')} drafted all γ"
    )
    reasons = []
    if first:
        reasons.append(
            "the first drafted none (the head reads the target's features, which the target's first pass makes)"
        )
    if room:
        reasons.append(f"{plural(len(room), 'iteration')} near max new tokens had room for fewer")
    if other:
        words = ", ".join(
            sorted({STOP_WORDS.get((it.get("drafting") or {}).get("stop"), "an unrecorded reason") for it in other})
        )
        reasons.append(f"{plural(len(other), 'iteration')} stopped for another reason ({words})")
    return text + ("; " + "; ".join(reasons) if reasons else "") + "."


def measured_where(trace: Trace, here: bool) -> str:
    """Where a trace's c and v were measured, in one sentence: on this machine (`here`: the app made the
    run), else where the trace was recorded, as it records it (a shipped example's `recorded_with`,
    else its device), which need not be this machine."""
    example = (trace.extra.get("example") or {}).get("recorded_with")
    device = trace.config.get("device") or "a device the trace does not name"
    if here:
        return f"c and v were measured on this machine ({device}), where this run was made."
    if example:
        return (
            f"c and v were measured where this example was recorded ({example}), not on this machine: "
            "a run made here measures its own."
        )
    return f"c and v were measured where this trace was recorded ({device}), not necessarily on this machine."


def sliders_against_run(m: dict[str, Any] | None, alpha: float, gamma: int, c: float, v: float) -> str | None:
    """The sliders' values that are not the run's on show (m: theory.measured_point), as shown, in one
    sentence: the sliders start from their own defaults, so their γ = 7 must not read as the run's γ.
    None when there is no run or every slider shows the run's value."""
    if m is None:
        return None
    pairs = [("γ", gamma, m.get("gamma"), "{}"), ("α", alpha, m.get("alpha"), "{:.2f}")]
    pairs += [("c", c, m.get("c"), "{:.2f}"), ("v", v, m.get("v"), "{:.2f}")]
    differ = [
        f"{name} = {fmt.format(mine)} (the run's {fmt.format(run)})"
        for name, mine, run, fmt in pairs
        if run is not None and fmt.format(mine) != fmt.format(run)
    ]
    if not differ:
        return None
    return (
        f"The sliders hold their own values, not the run's on show: {', '.join(differ)}. The numbers and curves "
        "under them are for the sliders; the run's own prediction is under “Current trace”, and “Use the current "
        "trace's α, γ, c, v” sets the sliders to it."
    )
