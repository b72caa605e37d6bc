"""Figures only the lesson needs: picking the iterations to teach from a trace, and the picture of
why the output is unchanged, min(p, q) + max(0, p - q) = p, at one drafted position.

Pure functions of plain trace data: no torch, no streamlit.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from specviz.charts.inspector import MAX_BARS
from specviz.charts.style import LAYOUT, P_COLOR, RESIDUAL_COLOR, STATUS_COLORS, titled
from specviz.charts.tokens import label_token, token_text
from specviz.charts.words import words


def pick_iterations(iterations: list[dict[str, Any]]) -> dict[str, int | None]:
    """Indices (0-based) of the iterations a lesson shows: one that ends with a resample (preferring
    one with an accepted draft before the rejection, so every decision appears) and one that ends
    with a bonus. None when the trace has no such iteration."""

    def kind(it: dict[str, Any]) -> str | None:
        return (it.get("correction") or {}).get("kind")

    resamples = [i for i, it in enumerate(iterations) if kind(it) == "resample"]
    rich = [i for i in resamples if iterations[i]["accepted_count"] >= 1]
    bonuses = [i for i, it in enumerate(iterations) if kind(it) == "bonus"]
    return {
        "resample": (rich or resamples or [None])[0],
        "bonus": max(bonuses, key=lambda i: len(iterations[i]["drafts"]), default=None),
    }


def composition_figure(draft: dict[str, Any], extra: dict[str, Any], lang: str = "en") -> go.Figure:
    """At one drafted position, P(output = x) stacked from its two routes: accepted as a draft,
    min(p, q), and resampled after a rejection, max(0, p − q). The stack meets p (purple diamonds)
    for every token: the proof that the output follows the target, in one picture.

    Only tokens in the recorded top lists (and the drafted token) are known; others count as 0.
    lang: the language of its words (specviz.charts.words).
    """
    w = words(lang)
    q_of = {tid: prob for tid, prob in draft["q_top"]}
    p_of = {tid: prob for tid, prob in draft["p_top"]}
    q_of[draft["token_id"]] = draft["q"]
    p_of[draft["token_id"]] = draft["p"]
    ids = sorted(set(q_of) | set(p_of), key=lambda t: -max(p_of.get(t, 0.0), q_of.get(t, 0.0)))[:MAX_BARS]
    labels = []
    for t in ids:
        text = draft["token"] if t == draft["token_id"] else token_text(extra, t)
        label = html.escape(label_token(text))
        labels.append(f"{label} (#{t})" if label in labels else label)
    p = [p_of.get(t, 0.0) for t in ids]
    q = [q_of.get(t, 0.0) for t in ids]
    accepted = [min(a, b) for a, b in zip(p, q, strict=True)]
    resampled = [max(0.0, a - b) for a, b in zip(p, q, strict=True)]
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=accepted,
        name=w["accepted_route"],
        marker_color=STATUS_COLORS["accepted"],
        hovertemplate="%{x}<br>min(p, q) %{y:.3g}<extra></extra>",
    )
    fig.add_bar(
        x=labels,
        y=resampled,
        name=w["resampled_route"],
        marker_color=RESIDUAL_COLOR,
        hovertemplate="%{x}<br>max(0, p − q) %{y:.3g}<extra></extra>",
    )
    fig.add_scatter(
        x=labels,
        y=p,
        mode="markers",
        marker={"color": P_COLOR, "size": 13, "symbol": "diamond", "line": {"color": "white", "width": 1}},
        name=w["p_stack"],
        hovertemplate="%{x}<br>p %{y:.3g}<extra></extra>",
    )
    fig.update_layout(
        **LAYOUT,
        barmode="stack",
        height=400,
        title=titled(w["composition_title"].format(position=draft["position"])),
        xaxis_title=w["composition_x"],
        yaxis_title=w["composition_y"],
    )
    fig.update_yaxes(rangemode="tozero")
    return fig
