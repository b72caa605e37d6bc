"""HTML and Streamlit pieces the pages share: the coloured token stream with hover cards, its
legend, the headline numbers, and the notice above every page about which trace is shown.

Every piece of text that came from a user or a model passes through html.escape before it
reaches st.html (hover cards escape their own token text in specviz.charts.tokens).
"""

from __future__ import annotations

import html

import streamlit as st

from specviz import glossary
from specviz.charts.style import STATUS_BACKGROUNDS, STATUS_COLORS, STATUS_LABELS
from specviz.charts.tokens import display_token, hover_card, md_escape, token_rows

_CSS = (
    "<style>"
    ".sv-stream{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:15px;line-height:2.1;"
    "white-space:pre-wrap;word-break:break-word}"
    ".sv-tok{position:relative;padding:1px 1px;border-radius:3px;border-bottom:2px solid;cursor:default}"
    ".sv-tok .sv-card{display:none;position:absolute;z-index:20;left:0;top:1.9em;min-width:340px;"
    "background:#fff;color:#212121;border:1px solid #bbb;border-radius:6px;padding:6px 9px;"
    "box-shadow:0 3px 10px rgba(0,0,0,.18);font:12.5px/1.45 system-ui,sans-serif;white-space:normal}"
    ".sv-tok:hover .sv-card{display:block}"
    ".sv-tok.sv-r .sv-card{left:auto;right:0}"
    ".sv-legend{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:13.5px;margin:4px 0 10px}"
    ".sv-legend span.sv-key{padding:1px 6px;border-radius:3px;border-bottom:2px solid}"
    + "".join(
        f".sv-{s}{{color:{STATUS_COLORS[s]};background:{STATUS_BACKGROUNDS[s]};border-color:{STATUS_COLORS[s]}}}"
        for s in STATUS_COLORS
    )
    + ".sv-rejected,.sv-discarded{text-decoration:line-through}"
    "</style>"
)


REFUSED = ("rejected", "discarded")
# Characters per line we guess the stream wraps at. Cards of tokens in the right half of a line open
# leftwards so they stay on screen; CSS alone cannot know where a token sits, and a wrong guess
# only moves a card, never hides it.
LINE_GUESS = 80


def _token_span(row: dict, extra: dict, column: int) -> str:
    text = html.escape(display_token(row["token"]) if not row["token"].strip() else row["token"])
    text = text.replace("\n", "↵<br>")
    card = hover_card(row, extra)
    side = " sv-r" if column % LINE_GUESS > LINE_GUESS // 2 else ""
    return f'<span class="sv-tok sv-{row["status"]}{side}">{text}<span class="sv-card">{card}</span></span>'


def token_stream_html(iterations: list[dict], extra: dict, show_refused: bool = True) -> str:
    """The generated text, one span per token coloured by status, each with a hover card.

    show_refused=False leaves out rejected and discarded drafts, so the final text reads plainly.
    """
    rows = [r for r in token_rows(iterations) if show_refused or r["status"] not in REFUSED]
    spans, column = [], 0
    for r in rows:
        spans.append(_token_span(r, extra, column))
        token = r["token"]
        column = len(token) - token.rfind("\n") - 1 if "\n" in token else column + len(token)
    spans = "".join(spans)
    return f'{_CSS}<div class="sv-stream">{spans}</div>'


MAIN_STATUSES = ("accepted", "rejected", "discarded", "resampled", "bonus")


def statuses_in(iterations: list[dict]) -> tuple[str, ...]:
    """The main statuses, plus "target" when some iteration had no draft."""
    extra = ("target",) if any(r["status"] == "target" for r in token_rows(iterations)) else ()
    return MAIN_STATUSES + extra


def legend_html(statuses: tuple[str, ...] = MAIN_STATUSES) -> str:
    keys = "".join(
        f'<span><span class="sv-key sv-{s}">{s}</span> {html.escape(STATUS_LABELS[s])}</span>' for s in statuses
    )
    return f'{_CSS}<div class="sv-legend">{keys}</div>'


def escaped_text(text: str) -> str:
    """User text for st.html, line breaks kept."""
    return html.escape(text).replace("\n", "<br>")


def headline(trace, baseline) -> None:
    """Speedup, tokens/s of both runs, target calls saved, acceptance rate, mean accepted length, α."""
    s = trace.summary
    spec = trace.mode == "speculative"
    # Units sit in the labels and values are a little smaller than Streamlit's default, so four
    # numbers fit side by side on a laptop screen without being cut to "11.4 to…".
    st.html("<style>[data-testid=stMetricValue]{font-size:1.9rem}</style>")
    cols = st.columns(4)
    if baseline is not None and baseline is not trace and baseline.summary["tokens_per_s"] > 0:
        b = baseline.summary
        speedup = s["tokens_per_s"] / b["tokens_per_s"]
        cols[0].metric(
            "Speedup", f"{speedup:.2f}×", help="tokens/s of speculative decoding ÷ tokens/s of the target alone"
        )
        cols[1].metric(
            "Speculative tok/s",
            f"{s['tokens_per_s']:.1f}",
            help=f"tokens per second: {s['new_tokens']} tokens in {s['wall_ms']:.0f} ms",
        )
        cols[2].metric(
            "Target-only tok/s",
            f"{b['tokens_per_s']:.1f}",
            help=f"tokens per second: {b['new_tokens']} tokens in {b['wall_ms']:.0f} ms",
        )
        cols[3].metric(
            "Target calls saved",
            f"{s['new_tokens'] - s['target_calls']} of {s['new_tokens']}",
            help=f"the target alone needs one pass per token; speculative decoding needed {s['target_calls']} "
            f"passes for {s['new_tokens']} tokens",
        )
    else:
        cols[0].metric("Speedup", "n/a", help="no baseline recorded: tick 'Also run the target alone' and Run")
        cols[1].metric(f"{'Speculative' if spec else 'Target-only'} tok/s", f"{s['tokens_per_s']:.1f}")
        cols[2].metric("Target calls", f"{s['target_calls']}", help=f"for {s['new_tokens']} tokens")
        cols[3].metric("Wall time (ms)", f"{s['wall_ms']:.0f}")
    cols = st.columns(4)
    rate = s.get("acceptance_rate")
    cols[0].metric(
        glossary.ACCEPTANCE_RATE.label,
        "n/a" if rate is None else f"{rate:.0%}",
        help=f"{glossary.ACCEPTANCE_RATE.definition} ({s['accepted']} of {s['drafted']}). "
        f"{glossary.WHY_RATE_AND_ALPHA_DIFFER}",
    )
    cols[1].metric(
        glossary.MEAN_ACCEPTED_LENGTH.label,
        f"{s['mean_accepted_length']:.2f}",
        help=glossary.MEAN_ACCEPTED_LENGTH.definition,
    )
    alpha = s.get("alpha")
    cols[2].metric(
        glossary.ALPHA.label,
        "n/a" if alpha is None else f"{alpha:.3f}",
        help=f"{glossary.ALPHA.definition}. {glossary.WHY_RATE_AND_ALPHA_DIFFER}",
    )
    cols[3].metric("Iterations", f"{s['iterations']}", help="one target pass each")


def sameness_of(trace, baseline):
    """The Sameness of a run and its baseline: measured at run time, else compared without the gap."""
    from specviz.sameness import Sameness, compare_runs

    if "sameness" in trace.extra:
        return Sameness(**trace.extra["sameness"])
    return compare_runs(trace, baseline)


def side_by_side(trace, baseline) -> None:
    """Speculative text beside the target-alone text, with the verdict on sameness above them."""
    if baseline is None or baseline is trace:
        st.info("No target-alone run recorded: tick 'Also run the target alone' in the sidebar and Run.")
        return
    verdict = sameness_of(trace, baseline)

    def text(token_id: int) -> str:
        return trace.extra.get("token_text", {}).get(str(token_id), f"#{token_id}")

    sentence = verdict.sentence(text)
    if verdict.verdict == "identical":
        st.success(sentence, icon=":material/check_circle:")
    elif verdict.verdict in ("near_tie", "different_samples"):
        st.info(sentence, icon=":material/info:")
        if verdict.verdict == "different_samples":
            st.page_link("app_pages/lab.py", label="Open the Distribution lab", icon=":material/science:")
    else:
        st.warning(sentence, icon=":material/warning:")
    left, right = st.columns(2)
    left.markdown(f"**Speculative** ({trace.summary['new_tokens']} tokens)")
    left.html(f"<div class='sv-plain'>{escaped_text(trace.output_text)}</div>")
    right.markdown(f"**Target alone** ({baseline.summary['new_tokens']} tokens)")
    right.html(f"<div class='sv-plain'>{escaped_text(baseline.output_text)}</div>")


def trace_notice(loaded, settings) -> bool:
    """The line above every page: which trace is shown and whether the sidebar asks for a new run.

    Returns False when there is no trace to show.
    """
    if loaded is None:
        st.info("No trace yet. Press **▶ Run** in the sidebar, or open an example on the **Traces** page.")
        return False
    cfg = loaded.trace.config
    st.caption(
        md_escape(
            f"Showing: {loaded.source} · target {cfg['target']} · draft {cfg.get('draft')} · "
            f"γ {cfg.get('gamma')} · temperature {cfg['temperature']} · seed {cfg['seed']}"
        )
    )
    if loaded.run_key is None or loaded.run_key != settings.run_key():
        st.warning(
            "The sidebar settings differ from the ones that made this trace. "
            "Press **▶ Run** in the sidebar to decode with them; until then the pages show the trace above."
        )
    return True
