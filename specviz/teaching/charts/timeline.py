"""The timeline: draft and verify phases of every iteration as a Gantt chart, beside the
target-only baseline's per-token steps on the same millisecond axis, so the saving is visible.

A race is only fair on equal work: when the two runs wrote different numbers of tokens (one met
end-of-sequence earlier), both rows stop where the shorter one ended, and the annotations say
the time each took to write that many tokens.
"""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go

from specviz.teaching.charts.drafting import drafted_line, reads_features, tree_line
from specviz.teaching.charts.style import P_COLOR, Q_COLOR, house_figure, titled
from specviz.teaching.charts.tokens import plot_escape
from specviz.teaching.charts.words import words
from specviz.traces.trace import Trace


def tokens_in_common(trace: Trace, baseline: Trace | None) -> int:
    """How many tokens both runs wrote: the length of the fair race."""
    n = trace.summary["new_tokens"]
    if baseline is None or baseline is trace:
        return n
    return min(n, baseline.summary["new_tokens"])


def iterations_for(trace: Trace, tokens: int) -> list[dict]:
    """The first iterations of `trace` that together wrote at least `tokens` tokens."""
    out, written = [], 0
    for it in trace.iterations:
        if written >= tokens:
            break
        out.append(it)
        written += it["accepted_count"] + (it["correction"] is not None)
    return out


def time_to_tokens_ms(trace: Trace, tokens: int) -> float:
    """Milliseconds from the start of decoding until `tokens` tokens were written.

    All of a run's tokens: its recorded wall time (summary wall_ms), the duration its tokens/s and
    the headline print, so one run never shows two durations (the last iteration's end is a few ms
    earlier: the final bookkeeping and device sync). Fewer: the end of the iteration that wrote the last.
    """
    if tokens >= trace.summary["new_tokens"]:
        return trace.summary["wall_ms"]
    its = iterations_for(trace, tokens)
    return max((it["start_ms"] + it["draft_ms"] + it["verify_ms"] for it in its), default=0.0)


def timeline_figure(trace: Trace, baseline: Trace | None = None, lang: str = "en") -> go.Figure:
    """One bar per phase and iteration; one Plotly trace per phase kind (not per iteration).
    lang: the language of its words (specviz.teaching.charts.words)."""
    w = words(lang)
    spec_row, base_row = w["row_spec"], w["row_base"]
    fig = house_figure()
    common = tokens_in_common(trace, baseline)
    its = iterations_for(trace, common)
    spec = trace.mode == "speculative"
    row = spec_row if spec else base_row
    if spec:
        _draft_phases(fig, row, its, trace.config, w["draft_bar"], lang)
    # A bar's x is where it ends on the axis (base + length), never its length: hover cards read
    # the durations and start times from customdata, each labelled as what it is.
    _target_passes(
        fig, row, its, w["verify_bar"] if spec else w["target_step"], 1.0,
        text=[_emitted_label(it) for it in its] if spec else None,
        customdata=[
            [it["index"] + 1, it["verify_ms"], it["start_ms"] + it["draft_ms"], _verdict_words(it, trace.config, lang)]
            for it in its
        ],
        hovertemplate=w["hover_verify"],
    )  # fmt: skip
    rows = [row]
    if baseline is not None and baseline.iterations and baseline is not trace:
        b = iterations_for(baseline, common)
        _target_passes(
            fig, base_row, b, w["base_step"], 0.55,
            customdata=[[it["index"] + 1, it["verify_ms"], it["start_ms"] + it["draft_ms"]] for it in b],
            hovertemplate=w["hover_base_step"],
        )  # fmt: skip
        rows.append(base_row)
    _finish_lines(fig, trace, baseline, common, row, w)
    if not its:
        fig.add_annotation(text=w["no_iterations"], showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(
        barmode="overlay",
        bargap=0.35,
        uniformtext={"minsize": 10, "mode": "hide"},  # counts that do not fit a bar are left to the hover
        height=260 + 40 * len(rows),
        title=titled(w["timeline_title"]),
    )
    fig.update_xaxes(title=w["timeline_x"], tickformat=",d")
    fig.update_yaxes(title="", categoryorder="array", categoryarray=list(reversed(rows)))
    return fig


def _draft_phases(fig: go.Figure, row: str, its: list[dict], config: dict, name: str, lang: str) -> None:
    """One horizontal bar per draft phase of `its` on `row`, from the iteration's start."""
    notes = [_iteration_words(it, config, lang) for it in its]
    fig.add_bar(
        y=[row] * len(its),
        x=[it["draft_ms"] for it in its],
        base=[it["start_ms"] for it in its],
        orientation="h",
        name=name,
        marker_color=Q_COLOR,
        customdata=[
            [it["index"] + 1, it["draft_ms"], it["start_ms"], note] for it, note in zip(its, notes, strict=True)
        ],
        hovertemplate=words(lang)["hover_draft"],
    )


def _finish_lines(fig: go.Figure, trace: Trace, baseline: Trace | None, common: int, row: str, w: dict) -> None:
    """At the end of each run's row (`row` for `trace`), the time it took to write the race's `common`
    tokens, and that the row was cut there when the run wrote more. A speculative trace given as its
    own baseline has one row, not two."""
    for name, t in ((row, trace), (w["row_base"], baseline)):
        if t is None or not t.iterations or (name == w["row_base"] and t is trace and trace.mode == "speculative"):
            continue
        end = time_to_tokens_ms(t, common)
        cut = "" if t.summary["new_tokens"] == common else w["cut"].format(total=t.summary["new_tokens"])
        fig.add_annotation(
            x=end,
            y=name,
            text=w["first_tokens"].format(ms=end, n=common, cut=cut),
            showarrow=False,
            xanchor="left",
            font={"size": 12},
        )


def _target_passes(fig: go.Figure, row: str, its: list[dict], name: str, opacity: float, **hover) -> None:
    """One horizontal bar per target pass of `its` on `row`, starting after its draft phase."""
    fig.add_bar(
        y=[row] * len(its),
        x=[it["verify_ms"] for it in its],
        base=[it["start_ms"] + it["draft_ms"] for it in its],
        orientation="h",
        name=name,
        marker_color=P_COLOR,
        opacity=opacity,
        marker_line={"color": "white", "width": 1},
        textposition="inside",
        textangle=0,
        insidetextanchor="middle",
        textfont={"color": "white"},
        **hover,
    )


HOVER_WIDTH = 64  # characters per line of a hover label


def _iteration_words(it: dict, config: dict, lang: str = "en") -> str:
    """What the iteration drafted, for a hover card: how many of γ and why it stopped, and its tree."""
    lines = [drafted_line(it, config.get("gamma") or None, reads_features(config), lang=lang)]
    if (tree := tree_line(it, lang=lang)) is not None:
        lines.append(tree)
    # Wrapped: Plotly draws a hover label on one line per <br>, and a long one ran off the chart.
    return "<br>".join(plot_escape(part) for line in lines for part in textwrap.wrap(line, HOVER_WIDTH))


def _verdict_words(it: dict, config: dict, lang: str = "en") -> str:
    """The verify bar's hover: how many drafts passed, of the drafts made (a target-only step: none)."""
    w, g = words(lang), len(it["drafts"])
    if not config.get("gamma"):
        return w["verdict_alone"]
    if g == 0:
        return w["verdict_no_draft"]
    verdict = w["verdict_accepted_one" if g == 1 else "verdict_accepted"].format(accepted=it["accepted_count"], made=g)
    return verdict + "<br>" + _iteration_words(it, config, lang)


def _emitted_label(it: dict) -> str:
    return f"{it['accepted_count']}/{len(it['drafts'])}" if it["drafts"] else ""  # no drafts: nothing to count
