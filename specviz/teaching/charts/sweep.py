"""Figures of a gamma x temperature sweep (specviz.labs.sweep.SweepResult): the speedup heatmap, measured
tokens per iteration against the formula, and measured speedup against τ / (γc + v) (Thm 3.8 at v = 1).

Pure functions: a SweepResult (or anything with .cells and .temperatures()) in, a go.Figure out.
Every word comes from the catalogue's "charts" section (keys "sweep_..."), in the language `lang`.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from specviz.labs.theory import expected_tokens_per_iteration
from specviz.teaching import glossary
from specviz.teaching.charts.style import PREDICTION_COLOR, house_figure, titled
from specviz.teaching.charts.words import words


def temperature_colors(temperatures: list[float]) -> dict[float, str]:
    """One colour per temperature, cool (greedy) to warm (random), the same in every sweep figure."""
    if len(temperatures) == 1:
        return {temperatures[0]: "#1565c0"}
    points = [i / (len(temperatures) - 1) for i in range(len(temperatures))]
    return dict(zip(temperatures, sample_colorscale("Plasma", [0.05 + 0.8 * p for p in points]), strict=True))


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 15})
    return fig


def speedup_heatmap(result: Any, lang: str = "en") -> go.Figure:
    """Measured speedup (speculative tokens/s ÷ target-alone tokens/s at the same temperature) per cell.

    The colour scale is centred on 1×: red slower, white even, green faster; each cell is labelled.
    Cells a stopped sweep never reached stay empty.
    """
    # The planned grid when known, so the cells a stopped sweep never reached show as gaps.
    gammas = sorted({*result.gammas(), *(result.config.get("gammas") or [])})
    temps = sorted({*result.temperatures(), *(float(t) for t in result.config.get("temperatures") or [])})
    w = words(lang)
    fig = house_figure()
    layout = {
        "title": titled(w["sweep_heat_title"]),
        "xaxis_title": w["sweep_gamma_x"],
        "yaxis_title": w["sweep_temperature"],
        "height": 170 + 70 * max(1, len(temps)),
    }
    if not result.cells:
        fig.update_layout(**layout)
        return _empty(fig, w["sweep_empty"])
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
        colorbar={"title": {"text": w["sweep_col_speedup"]}},
        hovertemplate=w["sweep_hover_heat"],
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


def tokens_per_iteration_sweep_figure(result: Any, lang: str = "en") -> go.Figure:
    """Measured mean tokens per iteration (markers) against (1 - α^(γ+1)) / (1 - α) from each
    temperature's mean measured α (dashed line), one colour per temperature."""
    w = words(lang)
    fig = house_figure()
    for t, color, cells in _cells_by_temperature(result):
        gs = [c["gamma"] for c in cells]
        measured = [c["mean_accepted_length"] for c in cells]
        _add_at_temperature(fig, t, gs, measured, w["sweep_measured"], w["sweep_hover_tokens"], **_dots(color))
        alphas = [c["alpha"] for c in cells if c.get("alpha") is not None]
        if alphas:
            alpha = sum(alphas) / len(alphas)
            formula = [expected_tokens_per_iteration(alpha, g) for g in gs]
            name = w["sweep_formula_at"].format(alpha=f"{alpha:.2f}")
            _add_at_temperature(fig, t, gs, formula, name, w["sweep_hover_formula"], **_dashes(color))
    return _per_gamma_layout(fig, result, w["sweep_tokens_title"], w["sweep_tokens_y"], lang)


def speedup_sweep_figure(result: Any, lang: str = "en") -> go.Figure:
    """Measured speedup (markers) against τ / (γc + v) from each run's own α, c and v (dashed), per temperature."""
    w = words(lang)
    fig = house_figure()
    if result.cells:
        gs = result.gammas()
        fig.add_scatter(
            x=[gs[0], gs[-1]],
            y=[1, 1],
            mode="lines",
            line={"color": PREDICTION_COLOR, "width": 1},
            name=w["sweep_one_x"],
            hoverinfo="skip",
        )
    for t, color, cells in _cells_by_temperature(result):
        measured = [c["speedup"] for c in cells]
        gs = [c["gamma"] for c in cells]
        dots = _dots(color, joined=True)
        _add_at_temperature(fig, t, gs, measured, w["sweep_measured"], w["sweep_hover_speedup"], **dots)
        predicted = [c for c in cells if c.get("predicted_speedup") is not None]
        if predicted:
            x, y = [c["gamma"] for c in predicted], [c["predicted_speedup"] for c in predicted]
            name = w["sweep_predicted_name"]
            _add_at_temperature(fig, t, x, y, name, w["sweep_hover_predicted"], **_dashes(color))
    return _per_gamma_layout(fig, result, w["sweep_speedup_title"], w["sweep_speedup_y"], lang)


def _per_gamma_layout(fig: go.Figure, result: Any, title: str, y_title: str, lang: str) -> go.Figure:
    """The frame shared by the per-γ line charts: γ on x in whole steps, y from zero."""
    w = words(lang)
    fig.update_layout(title=titled(title), xaxis_title=w["sweep_gamma_x"], yaxis_title=y_title, height=420)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(rangemode="tozero")
    if not result.cells:
        _empty(fig, w["sweep_empty"])
    return fig


# The table's columns: the cell's key, the column's catalogue key ("" when the name is a symbol,
# the same in every language), its number format.
TABLE_COLUMNS = [
    ("gamma", "", None), ("temperature", "sweep_temperature", None), ("speedup", "sweep_col_speedup", "%.3f"),
    ("predicted_speedup", "sweep_col_predicted", "%.3f"), ("tokens_per_s", "sweep_col_tps", "%.1f"),
    ("baseline_tokens_per_s", "sweep_col_base_tps", "%.1f"), ("mean_accepted_length", "sweep_col_tpi", "%.3f"),
    ("predicted_tokens_per_iteration", "sweep_col_formula_tpi", "%.3f"), ("alpha", "", "%.3f"), ("c", "", "%.3f"),
    ("verify_cost", "", "%.3f"), ("acceptance_rate", "", "%.3f"),
]  # fmt: skip
SYMBOLS = {"gamma": "γ", "alpha": "α", "c": "c", "verify_cost": "v"}


def _column_names(lang: str) -> dict[str, str]:
    """The cell key -> its column's name in `lang`."""
    w = words(lang)
    names = {key: w[word] if word else SYMBOLS.get(key, "") for key, word, _ in TABLE_COLUMNS}
    names["acceptance_rate"] = glossary.term("acceptance_rate", lang).label
    return names


def sweep_table(result: Any, lang: str = "en") -> list[dict[str, Any]]:
    """The cells as table rows with units in the column names (in `lang`)."""
    names = _column_names(lang)
    required = {"gamma", "temperature", "speedup", "tokens_per_s", "baseline_tokens_per_s", "mean_accepted_length"}
    return [
        {names[key]: c[key] if key in required else c.get(key) for key, _, _ in TABLE_COLUMNS} for c in result.cells
    ]


def sweep_table_formats(lang: str = "en") -> dict[str, str]:
    """sweep_table's column name -> its printf number format (γ and the temperature have none)."""
    names = _column_names(lang)
    return {names[key]: fmt for key, _, fmt in TABLE_COLUMNS if fmt}
