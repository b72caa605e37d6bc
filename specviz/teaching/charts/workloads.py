"""Where it pays (specviz.labs.workloads): one chart per measure by kind of task and drafter (α,
tokens per iteration and the measured speedup, the paper's prediction beside the last two),
acceptance by draft position per kind for one drafter, and the table the page shows."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.labs.workloads import KIND_KEYS, WorkloadsResult, draft_label, kind_label
from specviz.teaching import glossary
from specviz.teaching.charts.style import PREDICTION_COLOR, house_figure, titled

# One colour per drafter, the same on every chart of the page (the hybrid first: the app's default).
DRAFT_COLORS = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457")
# Kinds share one chart of lines: each its own dash and marker too, so lines that meet stay apart.
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")

# measure -> (chart title, y-axis title with its unit, the prediction's column or None)
MEASURES = {
    "alpha": (
        "α by kind of task: how often a draft passes",
        f"{glossary.ALPHA.label} (0 to 1)",
        None,
    ),
    "tokens_per_iteration": (
        "Tokens per target pass by kind of task",
        f"{glossary.MEAN_ACCEPTED_LENGTH.label} (tokens)",
        "predicted_tokens_per_iteration",
    ),
    "speedup": (
        "Measured speedup over the target alone, by kind of task",
        "speedup (×; dashed: 1× = no gain)",
        "predicted_speedup",
    ),
}
PREDICTED_NAME = {
    "predicted_tokens_per_iteration": "predicted from α: (1 − α^(γ+1)) / (1 − α)",
    "predicted_speedup": "predicted from α, γ, c, v: τ / (γc + v)",
}


def measure_figure(result: WorkloadsResult, measure: str) -> go.Figure:
    """Grouped bars: one group per kind, one bar per drafter; diamonds mark the formula's prediction."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}.")
    title, y_title, predicted = MEASURES[measure]
    kinds = result.kinds()
    x = [tick_label(k) for k in kinds]
    fig = house_figure()
    for i, draft in enumerate(result.drafts()):
        cells = [result.cell(k, draft) or {} for k in kinds]
        color = DRAFT_COLORS[i % len(DRAFT_COLORS)]
        fig.add_bar(
            x=x, y=[c.get(measure) for c in cells], name=draft_label(draft), marker_color=color,
            offsetgroup=draft, legendgroup=draft,
            customdata=[[kind_label(k), c.get("prompts"), c.get("new_tokens"), c.get("pairs")]
                        for k, c in zip(kinds, cells, strict=True)],
            hovertemplate=f"{draft_label(draft)}<br>%{{customdata[0]}}: %{{y:.2f}}<br>%{{customdata[1]}} prompt(s), "
            "%{customdata[2]} tokens, %{customdata[3]} timed pair(s)<extra></extra>",
        )  # fmt: skip
        if predicted:
            fig.add_scatter(
                x=x, y=[c.get(predicted) for c in cells], mode="markers", offsetgroup=draft, legendgroup=draft,
                marker={"symbol": "diamond", "size": 10, "color": PREDICTION_COLOR, "line": {"color": color,
                        "width": 2}},
                name=PREDICTED_NAME[predicted], showlegend=i == 0,
                hovertemplate=f"{draft_label(draft)}<br>%{{x}}: predicted %{{y:.2f}}<extra></extra>",
            )  # fmt: skip
    if measure == "speedup":  # named in the axis title: a label on the line ran into the last group's bars
        fig.add_hline(y=1.0, line_dash="dash", line_color="#757575")
    fig.update_layout(barmode="group", scattermode="group", height=420, title=titled(title))
    fig.update_yaxes(title=y_title, rangemode="tozero", range=[0, 1.05] if measure == "alpha" else None)
    fig.update_xaxes(title="kind of task (its prompts pooled; the table names each)", tickangle=0)
    return fig


def tick_label(kind: str) -> str:
    """A kind's one-word key under its group (its full name is in the hover and the table): six
    groups in half the page's width leave no room for "summarization / extraction", even on two lines."""
    return kind if kind in KIND_KEYS else kind_label(kind)


def position_figure(result: WorkloadsResult, draft: str) -> go.Figure:
    """Acceptance at each draft position, one line per kind, for one drafter."""
    fig = house_figure()
    for i, kind in enumerate(result.kinds()):
        cell = result.cell(kind, draft)
        if cell is None:
            continue
        by_position = cell["acceptance_by_position"]
        fig.add_scatter(
            x=list(range(1, len(by_position) + 1)), y=by_position, mode="lines+markers", name=kind_label(kind),
            line={"dash": _DASHES[i % len(_DASHES)], "width": 2.5, "color": DRAFT_COLORS[i % len(DRAFT_COLORS)]},
            marker={"symbol": _SYMBOLS[i % len(_SYMBOLS)], "size": 9},
            hovertemplate=f"{kind_label(kind)}<br>draft position %{{x}}: %{{y:.2f}}<extra></extra>",
        )  # fmt: skip
    fig.update_layout(height=400, title=titled(f"How deep do the drafts hold? {draft_label(draft)}, by kind"))
    fig.update_yaxes(title=f"{glossary.ACCEPTANCE_AT_POSITION.label.lower()} (fraction)", range=[0, 1.05])
    fig.update_xaxes(title="draft position within an iteration (1..γ)", dtick=1)
    return fig


def workloads_table(result: WorkloadsResult) -> list[dict[str, Any]]:
    """The page's table: one row per (kind, drafter), each measure beside the formula's prediction
    from the same row (short headers: the nine columns fit the page's width at 1280 px)."""
    return [
        {
            "kind": kind_label(c["kind"]),
            "drafter": c["label"],
            "α": c["alpha"],
            "tokens/pass": c["tokens_per_iteration"],
            "predicted": c["predicted_tokens_per_iteration"],
            "c": c["c"],
            "v": c["verify_cost"],
            "speedup ×": c["speedup"],
            "predicted ×": c["predicted_speedup"],
        }
        for kind in result.kinds()
        for c in result.cells
        if c["kind"] == kind
    ]
