"""Figures for the step inspector: q and p over the top tokens of one draft position, the residual
after a rejection, and the target's distribution for a bonus token.

The trace keeps each model's top 10 per position; a token outside a list has an unrecorded
probability, drawn as 0. "other" holds the rest of the mass (1 minus the bars shown).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.teaching.charts.style import (
    ACCEPTED_MASS_COLOR,
    P_COLOR,
    Q_COLOR,
    RESIDUAL_COLOR,
    RESIDUAL_LIGHT_COLOR,
    STATUS_COLORS,
    house_figure,
    titled,
)
from specviz.teaching.charts.tokens import label_token, plot_escape, token_text
from specviz.teaching.charts.words import words

MAX_BARS = 8  # top tokens shown before the "other" bucket
PROBABILITY_TICKS = [0, 0.2, 0.4, 0.6, 0.8, 1]  # the axis runs to 1.25 to leave room for labels


def _categories(extra: dict, ids: list[int], chosen_text: str, other: str = "other") -> list[str]:
    """Axis labels (HTML-escaped: Plotly reads tags in labels) for token ids, the chosen one first.

    The same text twice gets its id so the categories stay distinct.
    """
    texts = [chosen_text] + [token_text(extra, t) for t in ids[1:]]
    labels = [plot_escape(label_token(t)) for t in texts]
    return [f"{lab} (#{t})" if labels.count(lab) > 1 else lab for lab, t in zip(labels, ids, strict=True)] + [other]


def _esc(text: str) -> str:
    return plot_escape(label_token(text))


def _pick_ids(chosen: int, *tops: list[list]) -> list[int]:
    """The chosen token first, then the most likely tokens of the given top lists, up to MAX_BARS."""
    best: dict[int, float] = {}
    for top in tops:
        for tid, prob in top:
            best[tid] = max(best.get(tid, 0.0), prob)
    ranked = [t for t, _ in sorted(best.items(), key=lambda kv: -kv[1]) if t != chosen]
    return [chosen, *ranked][:MAX_BARS]


def _values(ids: list[int], top: list[list], known: dict[int, float] | None = None) -> list[float]:
    lookup = dict((tid, prob) for tid, prob in top)
    lookup.update(known or {})
    vals = [lookup.get(t, 0.0) for t in ids]
    return [*vals, max(0.0, 1.0 - sum(vals))]


def _legend_swatch(fig: go.Figure, name: str, color: str, group: str) -> None:
    """A legend entry alone for the bars of offset group `group`: Plotly draws a bar trace's swatch
    with its first bar's outline, and the first bar is the outlined chosen token, so the legend
    would show a black-edged box no other bar has. Empty and in the same slot, it draws nothing."""
    fig.add_bar(x=[None], y=[None], name=name, marker_color=color, offsetgroup=group, legendgroup=group,
                hoverinfo="skip")  # fmt: skip


def add_token_bars(fig: go.Figure, labels: list[str], values: list[float], name: str, what: str, **style: Any) -> None:
    """One bar per token category, its hover "<token><br><what> <value>"; `style` is the rest of the
    bar trace (colour, offsets, legend group)."""
    fig.add_bar(x=labels, y=values, name=name, hovertemplate=f"%{{x}}<br>{what} %{{y:.3g}}<extra></extra>", **style)


def _outlined(color: str, labels: list[str]) -> dict[str, Any]:
    """A bar marker in `color` with the chosen token's bar (the first) outlined in black."""
    return {"color": color, "line": {"width": [3 if i == 0 else 0 for i in range(len(labels))], "color": "#000"}}


def _mark_chosen(fig: go.Figure, label: str, y: float, text: str, color: str) -> None:
    """An arrow down onto the chosen token's bars at height `y`, saying `text` in its status colour."""
    # On a white ground: the label often reaches over a neighbour's taller bar, where it was unreadable
    # ("drafted · accepte" ran into the next token's p bar).
    fig.add_annotation(
        x=label, y=y, text=text, showarrow=True, arrowhead=2, ax=0, ay=-28, font={"color": color},
        bgcolor="rgba(255,255,255,0.9)", borderpad=2,
    )  # fmt: skip


def _probability_layout(fig: go.Figure, w: dict[str, str], title: str, x_title: str, **layout: Any) -> go.Figure:
    """The frame of the step inspector's figures: probability from 0 to 1 (room above for the arrow)."""
    fig.update_layout(height=390, title=titled(title), **layout)
    fig.update_yaxes(title=w["probability"], range=[0, 1.25], tickvals=PROBABILITY_TICKS)
    fig.update_xaxes(title=x_title)
    return fig


def draft_figure(
    draft: dict[str, Any], status: str, extra: dict[str, Any], slot: int | None = None, lang: str = "en"
) -> go.Figure:
    """q and p over the top tokens at one draft position, the drafted token outlined, min(p, q) shaded.
    lang: the language of its words (specviz.teaching.charts.words)."""
    w = words(lang)
    tid = draft["token_id"]
    ids = _pick_ids(tid, draft["q_top"], draft["p_top"])
    labels = _categories(extra, ids, draft["token"], w["other"])
    q_vals = _values(ids, draft["q_top"], {tid: draft["q"]})
    p_vals = _values(ids, draft["p_top"], {tid: draft["p"]})
    overlap = [min(a, b) for a, b in zip(q_vals[:-1], p_vals[:-1], strict=True)] + [0.0]
    fig = house_figure()
    add_token_bars(
        fig, labels, overlap, w["min_pq"], "min(p, q)", marker_color=ACCEPTED_MASS_COLOR, offset=-0.43, width=0.86
    )
    # q to the left of each token, p to the right, the drafted token's two bars outlined.
    for vals, name, color, offset in ((q_vals, w["q_draft"], Q_COLOR, -0.4), (p_vals, w["p_target"], P_COLOR, 0.0)):
        add_token_bars(fig, labels, vals, name, name, marker=_outlined(color, labels), offset=offset, width=0.4)
    mark = w["drafted_mark"].format(status=w.get(f"status_{status}", status))
    _mark_chosen(fig, labels[0], max(q_vals[0], p_vals[0]), mark, STATUS_COLORS.get(status, "#000"))
    where = w["draft_n"].format(slot=slot) if slot else w["draft"]
    title = w["draft_title"].format(where=where, token=_esc(draft["token"]), position=draft["position"])
    return _probability_layout(fig, w, title, w["draft_x"], barmode="overlay")


def residual_figure(
    rejected: dict[str, Any], correction: dict[str, Any], extra: dict[str, Any], lang: str = "en"
) -> go.Figure:
    """After the first rejection: max(0, p - q), its normalised form, and the resampled token.
    lang: the language of its words (specviz.teaching.charts.words).

    The residual's mass is sum max(0, p - q) = 1 - beta, so the unnormalised bars are the stored
    normalised top list times (1 - beta): exact, with no tokenizer or full distribution needed. A
    block-verified correction (its `block`: weight w and mass) draws max(0, w p - q) with its own mass.
    """
    w = words(lang)
    top = correction.get("residual_top") or []
    block = correction.get("block")
    mass = block["mass"] if block else max(0.0, 1.0 - rejected["beta"])
    tid = correction["token_id"]
    ids = _pick_ids(tid, top)
    labels = _categories(extra, ids, correction["token"], w["other"])
    normalised = _values(ids, top)
    raw = [v * mass for v in normalised[:-1]]
    raw.append(max(0.0, mass - sum(raw)))
    fig = house_figure()
    formula = "max(0, w · p − q)" if block else "max(0, p − q)"
    raw_name = w["residual_block_raw" if block else "residual_raw"]
    add_token_bars(fig, labels, raw, raw_name, formula, marker_color=RESIDUAL_LIGHT_COLOR, offsetgroup="raw")
    name = w["residual_block_norm" if block else "residual_norm"]
    add_token_bars(
        fig,
        labels,
        normalised,
        name,
        w["inspector_norm_hover"],
        marker=_outlined(RESIDUAL_COLOR, labels),
        offsetgroup="normalised",
        legendgroup="normalised",
        showlegend=False,
    )
    _legend_swatch(fig, name, RESIDUAL_COLOR, "normalised")
    _mark_chosen(fig, labels[0], normalised[0], w["resampled_mark"], STATUS_COLORS["resampled"])
    title = w["residual_block_title" if block else "residual_title"].format(
        position=correction["position"], mass=mass, token=_esc(correction["token"]), weight=(block or {}).get("weight")
    )
    return _probability_layout(fig, w, title, w["residual_x"], barmode="group")


def bonus_figure(
    correction: dict[str, Any], extra: dict[str, Any], no_draft: bool = False, lang: str = "en"
) -> go.Figure:
    """When every draft passed (or there was none): the target's next distribution p and the token drawn.
    lang: the language of its words (specviz.teaching.charts.words)."""
    w = words(lang)
    top = correction.get("p_top") or []
    tid = correction["token_id"]
    ids = _pick_ids(tid, top)
    labels = _categories(extra, ids, correction["token"], w["other"])
    values = _values(ids, top, {tid: correction.get("p", 0.0)})
    fig = house_figure()
    add_token_bars(fig, labels, values, w["p_target"], w["p_target"], marker=_outlined(P_COLOR, labels))
    mark = w["drawn_mark" if no_draft else "bonus_mark"]
    _mark_chosen(fig, labels[0], values[0], mark, STATUS_COLORS["target" if no_draft else "bonus"])
    title = w["alone_title" if no_draft else "bonus_title"].format(
        position=correction["position"], token=_esc(correction["token"])
    )
    return _probability_layout(fig, w, title, w["bonus_x"], showlegend=True)
