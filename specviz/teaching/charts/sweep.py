"""Figures of a gamma x temperature sweep (specviz.labs.sweep.SweepResult): the speedup heatmap, measured
tokens per iteration against the formula, and measured speedup against τ / (γc + v) (Thm 3.8 at v = 1).

Pure functions: a SweepResult (or anything with .cells and .temperatures()) in, a go.Figure out.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from specviz.labs.theory import expected_tokens_per_iteration
from specviz.teaching import glossary
from specviz.teaching.charts.style import PREDICTION_COLOR, house_figure, titled


def temperature_colors(temperatures: list[float]) -> dict[float, str]:
    """One colour per temperature, cool (greedy) to warm (random), the same in every sweep figure."""
    if len(temperatures) == 1:
        return {temperatures[0]: "#1565c0"}
    points = [i / (len(temperatures) - 1) for i in range(len(temperatures))]
    return dict(zip(temperatures, sample_colorscale("Plasma", [0.05 + 0.8 * p for p in points]), strict=True))


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 15})
    return fig


def speedup_heatmap(result: Any) -> go.Figure:
    """Measured speedup (speculative tokens/s ÷ target-alone tokens/s at the same temperature) per cell.

    The colour scale is centred on 1×: red slower, white even, green faster; each cell is labelled.
    Cells a stopped sweep never reached stay empty.
    """
    # The planned grid when known, so the cells a stopped sweep never reached show as gaps.
    gammas = sorted({*result.gammas(), *(result.config.get("gammas") or [])})
    temps = sorted({*result.temperatures(), *(float(t) for t in result.config.get("temperatures") or [])})
    fig = house_figure()
    layout = {
        "title": titled("Measured speedup over the target alone, by γ and temperature"),
        "xaxis_title": "γ (draft tokens per iteration)",
        "yaxis_title": "temperature",
        "height": 170 + 70 * max(1, len(temps)),
    }
    if not result.cells:
        fig.update_layout(**layout)
        return _empty(fig, "No results yet: run the sweep.")
    z, text = [], []
    for t in temps:
        row, labels = [], []
        for g in gammas:
            cell = result.cell(g, t)
            row.append(None if cell is None else cell["speedup"])
            labels.append("" if cell is None else f"{cell['speedup']:.2f}×")
        z.append(row)
        text.append(labels)
    values = [v for row in z for v in row if v is not None]
    hi = max([*values, 1.5])
    lo = min([*values, 0.5])
    # Centre white on 1x in a scale from lo to hi.
    mid = (1 - lo) / (hi - lo) if hi > lo else 0.5
    fig.add_heatmap(
        x=[str(g) for g in gammas],
        y=[f"{t:g}" for t in temps],
        z=z,
        zmin=lo,
        zmax=hi,
        text=text,
        texttemplate="%{text}",
        colorscale=[[0, "#c62828"], [mid, "#ffffff"], [1, "#2e7d32"]],
        colorbar={"title": {"text": "speedup (×)"}},
        hovertemplate="γ %{x}, temperature %{y}: %{z:.2f}× the target alone<extra></extra>",
        xgap=2,
        ygap=2,
    )
    fig.update_layout(**layout)
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return fig


def _cells_by_temperature(result: Any) -> list[tuple[float, str, list[dict[str, Any]]]]:
    """(temperature, its colour, its cells in γ order) for each temperature of the sweep."""
    temps = result.temperatures()
    colors = temperature_colors(temps)
    by_gamma = sorted(result.cells, key=lambda c: c["gamma"])
    return [(t, colors[t], [c for c in by_gamma if c["temperature"] == t]) for t in temps]


def _dots(color: str, joined: bool = False) -> dict[str, Any]:
    """How a temperature's measured values are drawn: dots in its colour, joined by a thin line if `joined`."""
    if joined:
        return {"mode": "markers+lines", "line": {"color": color, "width": 1}, "marker": {"color": color, "size": 11}}
    return {"mode": "markers", "marker": {"color": color, "size": 11}}


def _dashes(color: str) -> dict[str, Any]:
    """How a temperature's formula values are drawn: a dashed line in its colour."""
    return {"mode": "lines", "line": {"color": color, "dash": "dash", "width": 2}}


def _add_at_temperature(fig: go.Figure, t: float, x: list, y: list, name: str, hover: str, **style: Any) -> None:
    """One temperature's values over γ, named and grouped in the legend by that temperature; the
    hover says `hover` after "T t, γ g: "."""
    fig.add_scatter(
        x=x,
        y=y,
        name=f"T = {t:g}: {name}",
        legendgroup=f"{t}",
        hovertemplate=f"T {t:g}, γ %{{x}}: {hover}<extra></extra>",
        **style,
    )


def tokens_per_iteration_sweep_figure(result: Any) -> go.Figure:
    """Measured mean tokens per iteration (markers) against (1 - α^(γ+1)) / (1 - α) from each
    temperature's mean measured α (dashed line), one colour per temperature."""
    fig = house_figure()
    for t, color, cells in _cells_by_temperature(result):
        gs = [c["gamma"] for c in cells]
        measured = [c["mean_accepted_length"] for c in cells]
        _add_at_temperature(fig, t, gs, measured, "measured", "measured %{y:.2f} tokens per iteration", **_dots(color))
        alphas = [c["alpha"] for c in cells if c.get("alpha") is not None]
        if alphas:
            alpha = sum(alphas) / len(alphas)
            formula = [expected_tokens_per_iteration(alpha, g) for g in gs]
            name = f"formula at mean α = {alpha:.2f}"
            _add_at_temperature(fig, t, gs, formula, name, "formula %{y:.2f}", **_dashes(color))
    return _per_gamma_layout(
        fig, result, "Tokens per iteration: measured against (1 − α^(γ+1)) / (1 − α)", "tokens per iteration (tokens)"
    )


def speedup_sweep_figure(result: Any) -> go.Figure:
    """Measured speedup (markers) against τ / (γc + v) from each run's own α, c and v (dashed), per temperature."""
    fig = house_figure()
    if result.cells:
        gs = result.gammas()
        fig.add_scatter(
            x=[gs[0], gs[-1]],
            y=[1, 1],
            mode="lines",
            line={"color": PREDICTION_COLOR, "width": 1},
            name="1× (target alone)",
            hoverinfo="skip",
        )
    for t, color, cells in _cells_by_temperature(result):
        measured = [c["speedup"] for c in cells]
        _add_at_temperature(
            fig, t, [c["gamma"] for c in cells], measured, "measured", "measured %{y:.2f}×", **_dots(color, joined=True)
        )
        predicted = [c for c in cells if c.get("predicted_speedup") is not None]
        if predicted:
            x, y = [c["gamma"] for c in predicted], [c["predicted_speedup"] for c in predicted]
            name = "predicted from its α, c and v"
            _add_at_temperature(fig, t, x, y, name, "predicted %{y:.2f}×", **_dashes(color))
    return _per_gamma_layout(
        fig, result, "Speedup: measured against the paper's prediction", "speedup (× target alone)"
    )


def _per_gamma_layout(fig: go.Figure, result: Any, title: str, y_title: str) -> go.Figure:
    """The frame shared by the per-γ line charts: γ on x in whole steps, y from zero."""
    fig.update_layout(
        title=titled(title), xaxis_title="γ (draft tokens per iteration)", yaxis_title=y_title, height=420
    )
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(rangemode="tozero")
    if not result.cells:
        _empty(fig, "No results yet: run the sweep.")
    return fig


def sweep_table(result: Any) -> list[dict[str, Any]]:
    """The cells as table rows with units in the column names."""
    rows = []
    for c in result.cells:
        rows.append(
            {
                "γ": c["gamma"],
                "temperature": c["temperature"],
                "speedup (×)": c["speedup"],
                "predicted speedup (×)": c.get("predicted_speedup"),
                "tokens/s": c["tokens_per_s"],
                "target alone tokens/s": c["baseline_tokens_per_s"],
                "tokens per iteration": c["mean_accepted_length"],
                "formula tokens per iteration": c.get("predicted_tokens_per_iteration"),
                "α": c.get("alpha"),
                "c": c.get("c"),
                "v": c.get("verify_cost"),
                glossary.ACCEPTANCE_RATE.label: c.get("acceptance_rate"),
            }
        )
    return rows
