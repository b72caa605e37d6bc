"""Figures of the paper's closed forms (specviz.labs.theory): tokens per iteration and walltime
improvement against gamma, the (alpha, c) plane with the "speedup needs alpha > c" boundary, the
draft's alpha along its training, and Table 4 as rows. What the Theory page says in words (whether a
trace drafted as the formula assumes, where it was measured, its prediction beside its measurement)
is in specviz.teaching.charts.theory_text.

Pure functions: no torch, no streamlit. A measured point (from a trace) is passed in as plain
numbers, so the same axes carry theory and measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go

from specviz.labs.theory import TABLE_4, best_gamma, expected_tokens_per_iteration, walltime_improvement
from specviz.teaching import glossary
from specviz.teaching.charts.style import LAYOUT, PREDICTION_COLOR, STATUS_COLORS, house_figure, titled
from specviz.teaching.charts.words import words

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
    lang: str = "en",
) -> go.Figure:
    """Expected tokens per iteration (1 - α^(γ+1)) / (1 - α) against γ: the chosen α bold, a few
    others faint for scale, the ceiling γ + 1 dotted, the chosen γ marked; its words in `lang`.

    measured: {"gamma": γ of the trace, "tokens": its mean accepted length, "alpha": its α}.
    """
    w = words(lang)
    gs = _gammas(gamma_max)
    fig = house_figure()
    _tokens_curves(fig, gs, alpha, compare_alphas, w)
    _your_gamma(
        fig,
        gamma,
        expected_tokens_per_iteration(alpha, gamma),
        w["your_gamma"].format(gamma=gamma),
        w["theory_your_gamma_tokens_hover"],
    )
    if measured and measured.get("tokens") is not None and measured.get("gamma"):
        fig.add_scatter(
            x=[measured["gamma"]],
            y=[measured["tokens"]],
            mode="markers",
            marker={"color": MEASURED_COLOR, "size": 13, "symbol": "diamond"},
            name=w["theory_measured_trace"],
            hovertemplate=w["theory_measured_tokens_hover"],
        )
    fig.update_layout(
        title=titled(w["theory_tokens_title"].format(alpha=alpha)),
        xaxis_title=w["gamma_x"],
        yaxis_title=w["theory_tokens_y"],
        height=400,
    )
    fig.update_xaxes(dtick=1 if gamma_max <= 16 else 2)
    # The ceiling grows with γ; cut it so the curves, not the ceiling, fill the chart.
    curves = [expected_tokens_per_iteration(a, gamma_max) for a in (alpha, *compare_alphas)]
    if measured and measured.get("tokens") is not None:
        curves.append(measured["tokens"])
    fig.update_yaxes(range=[0, min(gamma_max + 1, max(curves) * 1.15 + 0.5)])
    return fig


def _tokens_curves(
    fig: go.Figure, gs: list[int], alpha: float, compare_alphas: Sequence[float], w: dict[str, str]
) -> None:
    """Eq. 1's curves: the ceiling γ + 1 dotted, the other α faint for scale, the chosen α bold."""
    fig.add_scatter(
        x=gs,
        y=[g + 1 for g in gs],
        mode="lines",
        line={"color": "#9e9e9e", "dash": "dot"},
        name=w["theory_ceiling"],
        hovertemplate=w["theory_ceiling_hover"],
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
            hovertemplate=w["theory_compare_hover"].format(a=f"{a:g}"),
        )
    fig.add_scatter(
        x=gs,
        y=[expected_tokens_per_iteration(alpha, g) for g in gs],
        mode="lines+markers",
        line={"color": THEORY_COLOR, "width": 3},
        marker={"size": 5},
        name=w["theory_expected_at"].format(alpha=alpha),
        hovertemplate=w["theory_tokens_hover"],
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
        hovertemplate=w["theory_faster_hover"],
    )
    fig.add_scatter(
        x=[best],
        y=[ys[best - 1]],
        mode="markers",
        marker={"color": BEST_COLOR, "size": 18, "symbol": "star"},
        name=w["best_gamma"].format(gamma=best, speedup=ys[best - 1]),
        hovertemplate=w["theory_best_hover"],
    )
    y = ys[gamma - 1] if gamma <= gamma_max else walltime_improvement(alpha, gamma, c, v)
    _your_gamma(fig, gamma, y, w["your_gamma"].format(gamma=gamma), w["theory_your_gamma_hover"])
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
        hovertemplate=w["theory_trace_predicted_hover"],
    )
    if measured.get("speedup") is None:
        return [pred]
    fig.add_scatter(
        x=[g],
        y=[measured["speedup"]],
        mode="markers",
        marker={"color": MEASURED_COLOR, "size": 13, "symbol": "x"},
        name=w["trace_measured"].format(speedup=measured["speedup"]),
        hovertemplate=w["theory_trace_measured_hover"],
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
    lang: str = "en",
) -> go.Figure:
    """The (α, c) plane coloured by the best speedup any γ gives at verification cost v (white = 1×,
    deep green = 4× or more); at v = 1 the line α = c splits it (Cor 3.9): above the line (c ≥ α)
    drafting cannot pay for any γ, and a dearer verification (v > 1) moves the white border below
    it. The slider setting and the current trace are points on it; Table 4's rows are faint
    crosses for reference (measured with v = 1). Its words in `lang`."""
    w = words(lang)
    fig = house_figure()
    _plane_map(fig, c_max, gamma_max, steps, v, w)
    fig.add_scatter(
        x=[alpha],
        y=[c],
        mode="markers",
        marker={"color": THEORY_COLOR, "size": 15, "symbol": "circle", "line": {"color": "white", "width": 2}},
        name=w["theory_your_sliders"],
        hovertemplate=w["theory_sliders_hover"],
    )
    if measured and measured.get("alpha") is not None and measured.get("c") is not None:
        my = min(measured["c"], c_max)
        clipped = w["theory_c_clipped"] if measured["c"] > c_max else ""
        fig.add_scatter(
            x=[measured["alpha"]],
            y=[my],
            mode="markers",
            marker={"color": MEASURED_COLOR, "size": 15, "symbol": "diamond", "line": {"color": "white", "width": 2}},
            name=w["theory_trace_point"] + clipped,
            hovertemplate=w["theory_trace_point_hover"].format(c=measured["c"]),
        )
    fig.update_layout(
        title=titled(w["theory_plane_title"] if v == 1.0 else w["theory_plane_title_v"].format(v=v)),
        xaxis_title=w["theory_plane_x"].format(alpha=glossary.term("alpha", lang).label),
        yaxis_title=w["theory_plane_y"],
        height=430,
    )
    fig.update_xaxes(range=[0, 1])
    fig.update_yaxes(range=[0, c_max])
    return fig


def _plane_map(fig: go.Figure, c_max: float, gamma_max: int, steps: int, v: float, w: dict[str, str]) -> None:
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
        colorbar={"title": {"text": w["theory_colorbar"]}, "len": 0.85, "ticksuffix": "×"},
        hovertemplate=w["theory_plane_hover"],
        name=w["theory_best_over_gamma"],
        showlegend=False,
    )
    fig.add_scatter(
        x=[0, c_max],
        y=[0, c_max],
        mode="lines",
        line={"color": STATUS_COLORS["rejected"], "width": 3, "dash": "dash"},
        name=w["theory_alpha_c_line"],
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=[r.alpha for r in TABLE_4],
        y=[r.c for r in TABLE_4],
        mode="markers",
        marker={"color": PREDICTION_COLOR, "size": 7, "symbol": "x-thin", "line": {"width": 1.5}},
        name=w["theory_table4_points"],
        # The paper's task and model names stay as it writes them (T5-small), the task said in words.
        customdata=[w[f"theory_task_{r.task}"].format(draft=r.draft, t=f"{r.temperature:g}") for r in TABLE_4],
        hovertemplate=w["theory_table4_hover"],
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


def draft_training_figure(
    history: Sequence[dict[str, Any]], c: float, gamma_max: int = GAMMA_MAX, lang: str = "en"
) -> go.Figure:
    """α of the draft along its training (left axis) and the best speedup Thm 3.8 predicts from it
    at cost ratio c (right axis), its words in `lang`. history: [{"step", "alpha", "greedy_agreement"?,
    "alpha_bench_prompts"?}, ...]."""
    w = words(lang)
    steps = [h["step"] for h in history]
    alphas = [h["alpha"] for h in history]
    fig = house_figure()
    fig.add_scatter(
        x=steps,
        y=alphas,
        mode="lines+markers",
        line={"color": THEORY_COLOR, "width": 3},
        name=w["theory_training_alpha"],
        hovertemplate=w["theory_training_alpha_hover"],
    )
    _optional_measures(fig, history, steps, w)
    speedups = [walltime_improvement(a, best_gamma(a, c, gamma_max), c) for a in alphas]
    best_gs = [best_gamma(a, c, gamma_max) for a in alphas]
    fig.add_scatter(
        x=steps,
        y=speedups,
        yaxis="y2",
        mode="lines+markers",
        line={"color": BEST_COLOR, "width": 3},
        marker={"symbol": "star", "size": 9},
        name=w["theory_training_speedup"].format(c=c),
        customdata=best_gs,
        hovertemplate=w["theory_training_speedup_hover"],
    )
    fig.update_layout(
        title=titled(w["theory_training_title"]),
        xaxis_title=w["theory_training_x"],
        yaxis={"title": {"text": glossary.term("alpha", lang).label}, "range": [0, 1]},
        yaxis2={
            "title": {"text": w["theory_training_y2"]},
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
# has it: key, dash, marker; its legend and hover are the charts words "theory_training_<key>"
# and "theory_training_<key>_hover".
OPTIONAL_MEASURES = (("greedy_agreement", "dot", "circle"), ("alpha_bench_prompts", "dash", "diamond"))


def _optional_measures(fig: go.Figure, history: Sequence[dict[str, Any]], steps: list[Any], w: dict[str, str]) -> None:
    """A dotted or dashed line for each of OPTIONAL_MEASURES that every point of `history` recorded."""
    for key, dash, symbol in OPTIONAL_MEASURES:
        values = [h.get(key) for h in history]
        if all(v is not None for v in values):
            fig.add_scatter(
                x=steps,
                y=values,
                mode="lines+markers",
                line={"color": THEORY_COLOR, "width": 2, "dash": dash},
                marker={"symbol": symbol},
                name=w[f"theory_training_{key}"],
                hovertemplate=w[f"theory_training_{key}_hover"],
            )
