"""The race of drafters (specviz.race): measured speedup beside the paper's prediction per
drafter, and acceptance by draft position, one line per drafter."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz import glossary
from specviz.charts.style import P_COLOR, PREDICTION_COLOR, house_figure, titled


def race_speed_figure(result: dict[str, Any]) -> go.Figure:
    rows = result["rows"]
    labels = [r["label"] for r in rows]
    cfg = result["config"]
    fig = house_figure()
    fig.add_bar(
        x=labels,
        y=[r["speedup"] for r in rows],
        name="measured speedup (tokens/s ÷ target alone)",
        marker_color=P_COLOR,
        text=[f"{r['speedup']:.2f}×" for r in rows],
        textposition="outside",
        customdata=[[r["tokens_per_iteration"], r["c"], r["verify_cost"]] for r in rows],
        hovertemplate="%{x}<br>measured %{y:.2f}×<br>tokens per iteration %{customdata[0]:.2f}"
        "<br>c %{customdata[1]:.3f}, verify %{customdata[2]:.2f} target steps<extra></extra>",
    )
    fig.add_bar(
        x=labels,
        y=[r["predicted_speedup"] for r in rows],
        name="predicted from α, γ, c and v: τ / (γc + v)",
        marker_color=PREDICTION_COLOR,
        opacity=0.55,
        hovertemplate="%{x}<br>predicted %{y:.2f}×<extra></extra>",
    )
    fig.add_hline(
        y=1.0,
        line_dash="dash",
        line_color="#757575",
        annotation_text="1× = no gain",
        annotation_position="top right",  # the target-as-draft bar, last, is always below 1×: room there
    )
    fig.update_layout(
        barmode="group",
        height=430,
        title=titled(f"Which draft wins? γ {cfg['gamma']}, temperature {cfg['temperature']:g}"),
    )
    fig.update_yaxes(title="speedup over the target alone (×; dashed: 1× = no gain)", rangemode="tozero")
    fig.update_xaxes(title="drafter")
    return fig


def race_position_figure(result: dict[str, Any]) -> go.Figure:
    fig = house_figure()
    for r in result["rows"]:
        by_position = r["acceptance_by_position"]
        fig.add_scatter(
            x=list(range(1, len(by_position) + 1)),
            y=by_position,
            mode="lines+markers",
            name=r["label"],
            hovertemplate=f"{r['label']}<br>draft position %{{x}}: %{{y:.2f}}<extra></extra>",
        )
    fig.update_layout(height=400, title=titled("How deep do the drafts hold? Acceptance by draft position"))
    fig.update_yaxes(title=f"{glossary.ACCEPTANCE_AT_POSITION.label.lower()} (fraction)", range=[0, 1.05])
    fig.update_xaxes(title="draft position within an iteration (1..γ)", dtick=1)
    return fig
