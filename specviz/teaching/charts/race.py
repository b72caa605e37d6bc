"""The race of drafters (specviz.labs.race): measured speedup beside the paper's prediction per
drafter, and acceptance by draft position, one line per drafter. Words: the catalogue's "charts",
keys "race_..."; a drafter's name is the catalogue's "drafters" (catalogue.drafter_words)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.teaching import catalogue, glossary
from specviz.teaching.charts.style import P_COLOR, PREDICTION_COLOR, house_figure, titled
from specviz.teaching.charts.words import words


def drafter_label(row: dict[str, Any], lang: str = "en") -> str:
    """A race row's drafter as `lang` names it (the catalogue's "drafters", by its registered kind)."""
    return catalogue.drafter_words(row.get("draft"), lang)[0]


def race_speed_figure(result: dict[str, Any], lang: str = "en") -> go.Figure:
    w = words(lang)
    rows = result["rows"]
    labels = [drafter_label(r, lang) for r in rows]
    cfg = result["config"]
    fig = house_figure()
    fig.add_bar(
        x=labels,
        y=[r["speedup"] for r in rows],
        name=w["race_measured_name"],
        marker_color=P_COLOR,
        text=[f"{r['speedup']:.2f}×" for r in rows],
        textposition="outside",
        customdata=[[r["tokens_per_iteration"], r["c"], r["verify_cost"]] for r in rows],
        hovertemplate=w["race_measured_hover"],
    )
    fig.add_bar(
        x=labels,
        y=[r["predicted_speedup"] for r in rows],
        name=w["race_predicted_name"],
        marker_color=PREDICTION_COLOR,
        opacity=0.55,
        hovertemplate=w["race_predicted_hover"],
    )
    # The dashed line's meaning is in the y-axis title: a label on the line itself met the label of a
    # bar just below 1× (issue 59), and a bar may stand anywhere near it.
    fig.add_hline(y=1.0, line_dash="dash", line_color="#757575")
    fig.update_layout(
        barmode="group",
        height=430,
        title=titled(w["race_speed_title"].format(gamma=cfg["gamma"], temperature=f"{cfg['temperature']:g}")),
    )
    fig.update_yaxes(title=w["race_speed_y"], rangemode="tozero")
    fig.update_xaxes(title=w["race_drafter_axis"])
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


def race_position_figure(result: dict[str, Any], lang: str = "en") -> go.Figure:
    w = words(lang)
    fig = house_figure()
    rows = result["rows"]
    names = [drafter_label(r, lang) for r in rows]
    for k, (r, name, shift) in enumerate(zip(rows, names, _offsets(len(rows)), strict=True)):
        by_position = r["acceptance_by_position"]
        positions = list(range(1, len(by_position) + 1))
        same = [
            w["race_list_sep"].join(
                n
                for o, n in zip(rows, names, strict=True)
                if o is not r and _same_at(o["acceptance_by_position"], j, a)
            )
            for j, a in enumerate(by_position)
        ]
        fig.add_scatter(
            x=[x + shift for x in positions],
            y=by_position,
            mode="lines+markers",
            name=name,
            line={"dash": _DASHES[k % len(_DASHES)], "width": 2.5},
            marker={"symbol": _SYMBOLS[k % len(_SYMBOLS)], "size": 9},
            customdata=[
                [x, w["race_same_as"].format(names=o) if o else ""] for x, o in zip(positions, same, strict=True)
            ],
            hovertemplate=name + w["race_position_hover"],
        )
    fig.update_layout(height=400, title=titled(w["race_position_title"]))
    label = glossary.term("acceptance_at_position", lang).label
    fig.update_yaxes(title=w["race_position_y"].format(label=label.lower()), range=[0, 1.05])
    fig.update_xaxes(title=w["race_position_x"], dtick=1)
    return fig


def _same_at(values: list[float | None], j: int, a: float | None) -> bool:
    """Whether `values[j]` equals `a` as the hover prints them (two decimals); a position no draft
    reached (None) equals nothing."""
    if a is None or j >= len(values) or values[j] is None:
        return False
    return abs(values[j] - a) < 0.005
