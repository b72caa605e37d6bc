"""Figures only the lesson needs: picking the iterations to teach from a trace, the picture of
why the output is unchanged, min(p, q) + max(0, p - q) = p, at one drafted position, the second
half's measured pictures (the speedup by kind of task, what each iteration keeps and throws away,
the drafters' tokens per target pass), and the restyling of any lesson figure for a projector
(large dark type, titles that fit).

Pure functions of plain trace data: no torch, no streamlit.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import plotly.graph_objects as go

from specviz.config import DRAFTERS
from specviz.labs.workloads import OFFLINE_DRAFTS, WorkloadsResult
from specviz.teaching.charts import theory as theory_charts
from specviz.teaching.charts.inspector import MAX_BARS, add_token_bars
from specviz.teaching.charts.style import P_COLOR, RESIDUAL_COLOR, STATUS_COLORS, house_figure, titled
from specviz.teaching.charts.tokens import label_token, plot_escape, token_text
from specviz.teaching.charts.words import words
from specviz.teaching.charts.workloads import DRAFT_COLORS

PROJECTOR_PX = 20  # the smallest type read from the back of a classroom
PROJECTOR_TITLE_PX = 22
INK = "#1a1a1a"  # near-black: the default mid-grey tick labels fade away on a projector
# The lesson's name for the marker the Theory page calls "your γ" (its slider): here it is the γ the
# lesson's example was recorded with. Lesson-only, so kept beside its one figure rather than in
# specviz.teaching.charts.words, whose keys the shared builders read.
EXAMPLE_GAMMA = {"en": "γ = {gamma}, as in the lesson's example", "zh": "γ = {gamma}，与本课示例相同"}


# What the lesson's rejected iteration must show for its steps 5, 6 and 8 to teach sampling rather
# than greedy decoding: a bar or a route under this share of the axis is too thin to see projected.
VISIBLE_MASS = 0.05
RESIDUAL_TOKENS = 3  # the residual spread over at least this many tokens, each of visible mass
# Every draft step 5 reads aloud ("q = 0.785, p = 0.202, ...": the accepted ones and the rejected one)
# has p and q of at least this, so that to three decimals none reads 0.000. A rejection of a token both
# models gave 0.0004 is true, but its numbers teach a student nothing.
LEGIBLE_PROB = 0.01


def _ratio(draft: dict[str, Any]) -> float:
    return float("inf") if draft["q"] == 0 else draft["p"] / draft["q"]


def _legible(draft: dict[str, Any]) -> bool:
    return min(draft["p"], draft["q"]) >= LEGIBLE_PROB


def sampled_lessons(it: dict[str, Any]) -> dict[str, bool]:
    """Which of the sampled algorithm's lessons one iteration shows, each by its name:

    accepted_by_r: a draft accepted against a drawn r with 0 < p/q < 1 (accepted although the target
        likes it less than the draft did); rejected_by_r: the first rejection, with a drawn r ≥ p/q > 0;
    legible: every checked draft (the accepted ones and the first rejected) has p and q of at least
        LEGIBLE_PROB, so the numbers the lesson reads of them show;
    residual: the residual after it spread over RESIDUAL_TOKENS tokens or more of visible mass;
    both_routes: at that position both routes to the output (accepted: β = Σ min(p, q); resampled:
        1 − β) are visible; spread_draft: the first draft's q is not a certainty (q < 1).
    A greedy iteration (r = None) shows neither of the first two, nor residual and both_routes."""
    drafts, k = it.get("drafts") or [], it.get("accepted_count", 0)
    correction = it.get("correction") or {}
    rejected = drafts[k] if correction.get("kind") == "resample" and k < len(drafts) else None
    residual = (correction.get("residual_top") or []) if rejected is not None else []
    return {
        "accepted_by_r": any(d.get("r") is not None and 0 < _ratio(d) < 1 for d in drafts[:k]),
        "rejected_by_r": rejected is not None
        and rejected.get("r") is not None
        and 0 < _ratio(rejected)
        and rejected["r"] >= min(1.0, _ratio(rejected)),
        "legible": bool(drafts) and all(_legible(d) for d in drafts[: k + 1]),
        "residual": sum(prob >= VISIBLE_MASS for _, prob in residual) >= RESIDUAL_TOKENS,
        "both_routes": rejected is not None and VISIBLE_MASS <= rejected["beta"] <= 1 - VISIBLE_MASS,
        "spread_draft": bool(drafts) and drafts[0]["q"] < 0.999,
    }


def pick_iterations(iterations: list[dict[str, Any]]) -> dict[str, int | None]:
    """Indices (0-based) of the iterations a lesson shows: one that ends with a resample and one that
    ends with a bonus. None when the trace has no such iteration.

    The resample: the first that shows the most of `sampled_lessons` (with an accepted draft before
    the rejection, so every decision appears); the bonus: the one with the most drafts."""

    def kind(it: dict[str, Any]) -> str | None:
        return (it.get("correction") or {}).get("kind")

    def teaches(i: int) -> tuple[int, int]:
        return (iterations[i]["accepted_count"] >= 1, sum(sampled_lessons(iterations[i]).values()))

    resamples = [i for i, it in enumerate(iterations) if kind(it) == "resample"]
    bonuses = [i for i, it in enumerate(iterations) if kind(it) == "bonus"]
    return {
        "resample": max(resamples, key=teaches, default=None),  # max keeps the first of equals
        "bonus": max(bonuses, key=lambda i: len(iterations[i]["drafts"]), default=None),
    }


def composition_figure(draft: dict[str, Any], extra: dict[str, Any], lang: str = "en") -> go.Figure:
    """At one drafted position, P(output = x) stacked from its two routes: accepted as a draft,
    min(p, q), and resampled after a rejection, max(0, p − q). The stack meets p (purple diamonds)
    for every token: the proof that the output follows the target, in one picture.

    Only tokens in the recorded top lists (and the drafted token) are known; others count as 0.
    lang: the language of its words (specviz.teaching.charts.words).
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
        label = plot_escape(label_token(text))
        labels.append(f"{label} (#{t})" if label in labels else label)
    p = [p_of.get(t, 0.0) for t in ids]
    q = [q_of.get(t, 0.0) for t in ids]
    accepted = [min(a, b) for a, b in zip(p, q, strict=True)]
    resampled = [max(0.0, a - b) for a, b in zip(p, q, strict=True)]
    fig = house_figure()
    add_token_bars(fig, labels, accepted, w["accepted_route"], "min(p, q)", marker_color=STATUS_COLORS["accepted"])
    add_token_bars(fig, labels, resampled, w["resampled_route"], "max(0, p − q)", marker_color=RESIDUAL_COLOR)
    fig.add_scatter(
        x=labels,
        y=p,
        mode="markers",
        marker={"color": P_COLOR, "size": 13, "symbol": "diamond", "line": {"color": "white", "width": 1}},
        name=w["p_stack"],
        hovertemplate="%{x}<br>p %{y:.3g}<extra></extra>",
    )
    fig.update_layout(
        barmode="stack",
        height=400,
        title=titled(w["composition_title"].format(position=draft["position"])),
        xaxis_title=w["composition_x"],
        yaxis_title=w["composition_y"],
    )
    fig.update_yaxes(rangemode="tozero")
    return fig


def pays_figure(alpha: float, c: float, gamma: int, lang: str = "en") -> go.Figure:
    """The walltime improvement curve (Thm 3.8) of a draft with `alpha` and `c`, its γ marker at
    `gamma` (the lesson's example) and named so."""
    fig = theory_charts.walltime_curve_figure(alpha, c, gamma, lang=lang)
    yours = words(lang)["your_gamma"].format(gamma=gamma)
    for t in fig.data:
        if t.name == yours:
            t.name = EXAMPLE_GAMMA.get(lang, EXAMPLE_GAMMA["en"]).format(gamma=gamma)
    return fig


# The drafters' names on the second half's charts (words.py), each in the Workloads page's colour.
# Keys: "drafter_<key>" (its name) and "family_<key>" (its name as a member of the family), for the
# registered kinds (specviz.config.DRAFTERS) the lesson's words name.
DRAFTER_WORDS = {k.name: k.key for k in DRAFTERS.values() if f"family_{k.key}" in words("en")}


def drafter_color(draft: str) -> str:
    """The colour the Workloads page gives `draft`, so the lesson's charts and the page agree."""
    order = OFFLINE_DRAFTS.index(draft) if draft in OFFLINE_DRAFTS else len(OFFLINE_DRAFTS)
    return DRAFT_COLORS[order % len(DRAFT_COLORS)]


def drafter_name(draft: str, lang: str = "en") -> str:
    """A drafter's name in `lang` (words.py), its own name for one the lesson does not name."""
    short = DRAFTER_WORDS.get(draft)
    return words(lang)[f"drafter_{short}"] if short else draft


def task_figure(result: WorkloadsResult, drafts: tuple[str, ...], lang: str = "en") -> go.Figure:
    """The measured speedup over the target alone per kind of task (a recorded Workloads run), one
    bar per drafter in `drafts`, with the 1× line: where drafting pays depends on the task and the draft."""
    w = words(lang)
    kinds = result.kinds()
    x = [w.get(f"kind_{k}", k) for k in kinds]
    fig = house_figure()
    for draft in drafts:
        speedups = [(result.cell(k, draft) or {}).get("speedup") for k in kinds]
        fig.add_bar(
            x=x, y=speedups, name=drafter_name(draft, lang), marker_color=drafter_color(draft),
            hovertemplate="%{x}: %{y:.2f}×<extra></extra>",
        )  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dash", line_color="#424242")
    fig.update_layout(barmode="group", height=400, title=titled(w["task_title"]))
    fig.update_yaxes(title=w["task_y"], rangemode="tozero")
    fig.update_xaxes(title=w["task_x"], tickangle=0)
    return fig


def kept_and_dropped(it: dict[str, Any]) -> tuple[int, int]:
    """One iteration's tokens written (its accepted drafts and the target's own token, if any) and
    its drafts thrown away (rejected or never checked: their cache rows are rolled back). A tree's
    other branches are thrown away too; only the kept branch is counted here."""
    accepted = it["accepted_count"]
    return accepted + (1 if it.get("correction") else 0), len(it["drafts"]) - accepted


def system_figure(iterations: list[dict[str, Any]], lang: str = "en") -> go.Figure:
    """Per iteration of a trace, stacked: the tokens it kept and the drafts it threw away, so the
    uneven step of each iteration (and the cache roll-back behind it) shows at a glance."""
    w = words(lang)
    counts = [kept_and_dropped(it) for it in iterations]
    x = [it["index"] + 1 for it in iterations]
    fig = house_figure()
    fig.add_bar(x=x, y=[k for k, _ in counts], name=w["system_kept"], marker_color=STATUS_COLORS["accepted"],
                hovertemplate="%{x}: %{y}<extra></extra>")  # fmt: skip
    fig.add_bar(x=x, y=[d for _, d in counts], name=w["system_dropped"], marker_color=STATUS_COLORS["rejected"],
                hovertemplate="%{x}: %{y}<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="stack", height=400, title=titled(w["system_title"]), legend_traceorder="normal")
    fig.update_yaxes(title=w["system_y"], dtick=1)
    fig.update_xaxes(title=w["system_x"])
    return fig


def family_figure(race: dict[str, Any], lang: str = "en") -> go.Figure:
    """Tokens per target pass of each drafter of DRAFTER_WORDS in a recorded race, each bar labelled
    with its value. Left out: the target drafting for itself (no member of the family), the staged
    draft (the distilled draft's own drafts, so its bar would repeat that one: it changes the cost of
    drafting, which this chart does not show) and the hybrid with suffix trees (a variant of the hybrid)."""
    w = words(lang)
    rows = [r for r in race["rows"] if r["draft"] in DRAFTER_WORDS]
    names = [w[f"family_{DRAFTER_WORDS[r['draft']]}"] for r in rows]
    values = [r["tokens_per_iteration"] for r in rows]
    fig = house_figure()
    fig.add_bar(
        x=names, y=values, text=[f"{v:.2f}" for v in values], textposition="outside", cliponaxis=False,
        marker_color=[drafter_color(r["draft"]) for r in rows], showlegend=False,
        hovertemplate="%{x}: %{y:.2f}<extra></extra>",
    )  # fmt: skip
    fig.update_layout(height=400, title=titled(w["family_title"].format(**race["config"])))
    fig.update_yaxes(title=w["family_y"], rangemode="tozero", range=[0, max(values, default=1) * 1.2])
    fig.update_xaxes(title=w["family_x"], tickangle=0)
    return fig


def compact_comparison(fig: go.Figure, comparison: Any, lang: str = "en") -> go.Figure:
    """The KV-cache comparison (charts.kv_cache.comparison_figure of `comparison`) made to fit beside
    the lesson's takeaway: each way named without its explanation (the step's text gives it), each
    bar labelled only with how many times faster than no cache it ran, and the axis with its own
    title only (the notes beside it say where it was measured and that the tokens agree). In place."""
    bars = fig.data[0]
    bars.y = [re.split(r": |：", str(name))[0].replace(" + ", " +<br>") for name in bars.y]
    no_cache = comparison.run("no_cache").ms_per_token
    bars.text = [f"{no_cache / run.ms_per_token:.1f}×" for run in comparison.runs]
    fig.update_xaxes(title=words(lang)["kv_x"])
    return fig


def text_px(text: str, px: int) -> float:
    """Rough rendered width: CJK characters are one em wide, others about half an em."""
    return sum(px * (1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.5) for ch in text)


def _split_long(word: str, max_px: float, px: int) -> list[str]:
    """A word wider than max_px: Chinese may break between any two characters, so cut it into the
    fewest equal pieces that fit; any other word stays whole."""
    width = text_px(word, px)
    if width <= max_px or not any(unicodedata.east_asian_width(ch) in "WF" for ch in word):
        return [word]
    size = -(-len(word) // -(-int(width) // int(max_px)))  # ceil(len / ceil(width / max_px))
    return [word[i : i + size] for i in range(0, len(word), size)]


def wrap_title(text: str, max_px: float, px: int = PROJECTOR_PX) -> str:
    """`text` broken into lines (Plotly's <br>) of at most about max_px: first before an opening
    bracket, then, where a part is still too long, at spaces (Chinese between characters)."""
    if text_px(text, px) <= max_px:
        return text
    lines: list[str] = []
    for part in re.split(r" (?=\()|(?=（)", text):
        line = ""
        for word in (piece for w in part.split(" ") for piece in _split_long(w, max_px, px)):
            if line and text_px(f"{line} {word}", px) > max_px:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "<br>".join(lines)


def projector_figure(fig: go.Figure, height: int) -> go.Figure:
    """`fig` restyled in place for a projector: every text at least PROJECTOR_PX in dark ink (an
    annotation's arrow keeps its status colour), hidden traces out of the legend, `height` px tall,
    and a y-axis title wrapped so it stays beside the plot instead of running up into the chart's
    title. Returns `fig`."""
    ink = {"size": PROJECTOR_PX, "color": INK}
    fig.update_layout(
        height=height,
        font=ink,
        title_font={"size": PROJECTOR_TITLE_PX, "color": INK},
        legend_font=ink,
        uniformtext_minsize=PROJECTOR_PX,  # a bar label that would shrink below it is left to the hover
    )
    fig.update_xaxes(tickfont=ink, title_font=ink, automargin=True)
    fig.update_yaxes(tickfont=ink, title_font=ink, automargin=True)
    for t in fig.data:  # nobody clicks a projected legend: a hidden trace's greyed entry is only noise
        if t.visible == "legendonly":
            t.showlegend = False
    for a in fig.layout.annotations:  # status-coloured words (orange, red) are too pale to read
        a.arrowcolor = a.arrowcolor or a.font.color  # from afar: the arrow keeps the status colour
        a.font.size = max(a.font.size or 0, PROJECTOR_PX)
        a.font.color = INK
    # A vertical title is centred on the plot area; longer than about 40% of the figure it would
    # reach past the plot's top (the title, the x axis and a legend of up to four rows take the rest).
    for axis in fig.select_yaxes():
        if axis.title.text:
            axis.title.text = wrap_title(axis.title.text, height * 0.4)
    return fig
