"""The race of drafters (specviz.labs.race): measured speedup beside the paper's prediction per
drafter, and acceptance by draft position, one line per drafter."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.teaching import glossary
from specviz.teaching.charts.style import P_COLOR, PREDICTION_COLOR, house_figure, titled


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


# Drafters often hold equally deep (the head and the hybrid, which drafts with the head when the
# n-gram finds no match, meet at most positions): one line would hide the other. Each drafter gets
# its own dash and marker, and its points sit a little to the side of the position they belong to
# (the hover names the position itself), so every line stays in sight where lines meet.
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")
_SPREAD = 0.24  # of one draft position: the room the drafters' points share, side by side


def _offsets(n: int) -> list[float]:
    return [0.0] * n if n < 2 else [_SPREAD * (i / (n - 1) - 0.5) for i in range(n)]


def race_position_figure(result: dict[str, Any]) -> go.Figure:
    fig = house_figure()
    rows = result["rows"]
    for k, (r, shift) in enumerate(zip(rows, _offsets(len(rows)), strict=True)):
        by_position = r["acceptance_by_position"]
        positions = list(range(1, len(by_position) + 1))
        same = [
            ", ".join(o["label"] for o in rows if o is not r and _same_at(o["acceptance_by_position"], j, a))
            for j, a in enumerate(by_position)
        ]
        fig.add_scatter(
            x=[x + shift for x in positions],
            y=by_position,
            mode="lines+markers",
            name=r["label"],
            line={"dash": _DASHES[k % len(_DASHES)], "width": 2.5},
            marker={"symbol": _SYMBOLS[k % len(_SYMBOLS)], "size": 9},
            customdata=[[x, f"<br>the same as {o}" if o else ""] for x, o in zip(positions, same, strict=True)],
            hovertemplate=f"{r['label']}<br>draft position %{{customdata[0]}}: %{{y:.2f}}%{{customdata[1]}}"
            "<extra></extra>",
        )
    fig.update_layout(height=400, title=titled("How deep do the drafts hold? Acceptance by draft position"))
    fig.update_yaxes(title=f"{glossary.ACCEPTANCE_AT_POSITION.label.lower()} (fraction)", range=[0, 1.05])
    fig.update_xaxes(
        title="draft position within an iteration (1..γ); each drafter's points a little to the side, so none hides",
        dtick=1,
    )
    return fig


def _same_at(values: list[float | None], j: int, a: float | None) -> bool:
    """Whether `values[j]` equals `a` as the hover prints them (two decimals); a position no draft
    reached (None) equals nothing."""
    if a is None or j >= len(values) or values[j] is None:
        return False
    return abs(values[j] - a) < 0.005
