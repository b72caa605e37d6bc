"""Acceptance analytics: acceptance by draft position, tokens per iteration against the
truncated-geometric prediction from alpha, beta along the generated text, and the same numbers
as table rows.

The prediction comes from specviz.labs.theory (Leviathan et al. 2023, section 3): if each draft is
accepted independently with probability alpha, the tokens emitted per iteration are a geometric
variable capped at gamma + 1, with mean (1 - alpha^(gamma+1)) / (1 - alpha).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.labs.theory import expected_tokens_per_iteration, tokens_per_iteration_distribution
from specviz.teaching import glossary
from specviz.teaching.charts.style import PREDICTION_COLOR, STATUS_COLORS, house_figure, titled
from specviz.teaching.charts.tokens import hover_card, token_rows
from specviz.teaching.charts.words import words
from specviz.traces.trace import Trace, acceptance_by_position


def counted_iterations(trace: Trace) -> list[dict[str, Any]]:
    """The iterations the histogram counts: those that drafted at least one token and ended with a
    correction (one with no draft always makes one token; one that ended the text on a draft has none)."""
    return [it for it in trace.iterations if it["drafts"] and it["correction"] is not None]


def full_iterations(trace: Trace) -> list[dict[str, Any]]:
    """Counted iterations that drafted the full gamma (the paper's case)."""
    gamma = trace.config.get("gamma") or 0
    return [it for it in counted_iterations(trace) if len(it["drafts"]) == gamma]


def predicted_lengths(alpha: float, drafts_made: list[int], gamma: int) -> list[float]:
    """P(k tokens) for k = 1..gamma+1: the truncated geometric from alpha for each iteration's own
    number of drafts (theory.tokens_per_iteration_distribution), averaged over the iterations."""
    if not drafts_made:
        return [0.0] * (gamma + 1)
    total = [0.0] * (gamma + 1)
    for g in drafts_made:
        for k, prob in enumerate(tokens_per_iteration_distribution(alpha, g)):
            total[k] += prob / len(drafts_made)
    return total


def predicted_mean_length(alpha: float, drafts_made: list[int]) -> float | None:
    """The mean of predicted_lengths: (1 - alpha^(g+1)) / (1 - alpha) averaged over the iterations' g."""
    if not drafts_made:
        return None
    return sum(expected_tokens_per_iteration(alpha, g) for g in drafts_made) / len(drafts_made)


def position_table(trace: Trace) -> list[dict[str, Any]]:
    """Per draft slot 1..gamma: how often it was reached, accepted, the rate, and the mean beta."""
    return [
        {
            "draft position": row["position"],
            "reached": row["reached"],
            "accepted": row["accepted"],
            glossary.ACCEPTANCE_AT_POSITION.label: row["acceptance"],
            "mean β": row["mean_beta"],
        }
        for row in acceptance_by_position(trace.iterations, trace.config.get("gamma") or 0)
    ]


def length_table(trace: Trace) -> list[dict[str, Any]]:
    """Per tokens-per-iteration value 1..gamma+1: measured count and fraction, and the prediction."""
    gamma = trace.config.get("gamma") or 0
    its = counted_iterations(trace)
    alpha = trace.summary.get("alpha")
    made = [len(it["drafts"]) for it in its]
    predicted = predicted_lengths(alpha, made, gamma) if alpha is not None and gamma else [None] * (gamma + 1)
    lengths = [it["accepted_count"] + 1 for it in its]
    return [
        {
            "tokens per iteration": k,
            "iterations": lengths.count(k),
            "measured fraction": lengths.count(k) / len(lengths) if lengths else None,
            "predicted fraction": predicted[k - 1],
        }
        for k in range(1, gamma + 2)
    ]


def _no_data(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 14})
    return fig


def _add_prediction(fig: go.Figure, x: list, y: list, name: str, hovertemplate: str) -> None:
    """The closed-form prediction over the measured bars: diamonds joined by a dotted line."""
    fig.add_scatter(
        x=x,
        y=y,
        name=name,
        mode="markers+lines",
        marker={"color": PREDICTION_COLOR, "size": 9, "symbol": "diamond"},
        line={"dash": "dot", "color": PREDICTION_COLOR},
        hovertemplate=hovertemplate,
    )


def _fraction_layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> go.Figure:
    """The frame of a bar chart of fractions over whole numbers: x in whole steps, y from 0 to 1."""
    fig.update_layout(height=360, title=titled(title))
    fig.update_xaxes(title=x_title, dtick=1)
    fig.update_yaxes(title=y_title, range=[0, 1.05])
    return fig


def acceptance_by_position_figure(trace: Trace, lang: str = "en") -> go.Figure:
    """Measured acceptance rate at each draft slot (given the slot was reached) beside the mean beta,
    in `lang` (the catalogue's charts words, "acceptance_*")."""
    w = words(lang)
    rows = position_table(trace)
    fig = house_figure()
    slots = [r["draft position"] for r in rows]
    fig.add_bar(
        x=slots,
        y=[r[glossary.ACCEPTANCE_AT_POSITION.label] for r in rows],
        name=w["acceptance_measured_bar"],
        marker_color=STATUS_COLORS["accepted"],
        customdata=[[r["accepted"], r["reached"]] for r in rows],
        hovertemplate=w["acceptance_position_hover"],
    )
    _add_prediction(
        fig,
        x=slots,
        y=[r["mean β"] for r in rows],
        name=w["acceptance_predicted_beta"],
        hovertemplate=w["acceptance_beta_hover"],
    )
    if not rows:
        _no_data(fig, w["acceptance_no_drafts"])
    return _fraction_layout(
        fig,
        w["acceptance_position_title"],  # fits half of a 1280 px page
        x_title=w["acceptance_position_x"],
        y_title=w["acceptance_position_y"],
    )


def accept_length_figure(trace: Trace, lang: str = "en") -> go.Figure:
    """Histogram of tokens emitted per iteration against the truncated-geometric prediction, in `lang`."""
    w = words(lang)
    rows = length_table(trace)
    gamma = trace.config.get("gamma") or 0
    alpha = trace.summary.get("alpha")
    its = counted_iterations(trace)
    n, full = len(its), len(full_iterations(trace))
    fig = house_figure()
    fig.add_bar(
        x=[r["tokens per iteration"] for r in rows],
        y=[r["measured fraction"] for r in rows],
        name=w["acceptance_measured_lengths"].format(n=n, full=full, gamma=gamma),
        marker_color=STATUS_COLORS["bonus"],
        opacity=0.8,
        customdata=[r["iterations"] for r in rows],
        hovertemplate=w["acceptance_lengths_hover"],
    )
    if alpha is not None and gamma and n:
        mean = predicted_mean_length(alpha, [len(it["drafts"]) for it in its])
        _add_prediction(
            fig,
            x=[r["tokens per iteration"] for r in rows],
            y=[r["predicted fraction"] for r in rows],
            name=w["acceptance_predicted_lengths"].format(alpha=alpha, mean=mean),
            hovertemplate=w["acceptance_predicted_hover"]
            + glossary.term("histogram_prediction", lang).definition.replace("; ", ";<br>").replace("；", "；<br>")
            + "<extra></extra>",
        )
    if not n:
        _no_data(fig, w["acceptance_no_counted"])
    return _fraction_layout(
        fig,
        w["acceptance_lengths_title"],  # the legend names the prediction (α)
        x_title=w["acceptance_lengths_x"],
        y_title=w["acceptance_lengths_y"],
    )


def beta_along_text_figure(trace: Trace, lang: str = "en") -> go.Figure:
    """β at every draft the text reached (accepted ones and first rejections), with α as a line, in `lang`."""
    w = words(lang)
    extra = trace.extra
    fig = house_figure()
    rows = [r for r in token_rows(trace) if r["status"] in ("accepted", "rejected")]
    for status in ("accepted", "rejected"):
        pts = [r for r in rows if r["status"] == status]
        fig.add_scatter(
            x=[r["position"] for r in pts],
            y=[r["beta"] for r in pts],
            mode="markers",
            name=w[f"acceptance_{status}_draft"],
            marker={"color": STATUS_COLORS[status], "size": 9, "symbol": "circle" if status == "accepted" else "x"},
            hovertext=[hover_card(r, extra, lang=lang) + f"<br>β {r['beta']:.3f}" for r in pts],
            hoverinfo="text",
        )
    alpha = trace.summary.get("alpha")
    if alpha is not None:
        # Named in the legend, not by a label on the line: at the line's end a label sat under the
        # first drafts' markers, which start at the same edge and scatter around α.
        line = {"dash": "dot", "color": PREDICTION_COLOR}
        fig.add_hline(y=alpha, line=line)
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="lines",
            line=line,
            name=w["acceptance_alpha_line"].format(alpha=alpha),
            hoverinfo="skip",
        )
    if not rows:
        _no_data(fig, w["acceptance_no_drafts"])
    fig.update_layout(height=360, title=titled(w["acceptance_beta_title"]))
    fig.update_xaxes(title=w["acceptance_beta_x"])
    fig.update_yaxes(title=w["acceptance_beta_y"], range=[-0.03, 1.08])
    return fig
