"""Step inspector: one iteration at a time, each draft's q and p, the decision, and the correction."""

import time

import streamlit as st

from specviz.labs.kv_cache import ComparisonError, load_comparison
from specviz.teaching.charts.drafting import first_drafted, iteration_counts, run_summary
from specviz.teaching.charts.kv_cache import cache_caption, cache_figure, comparison_figure
from specviz.teaching.charts.step import step_view
from specviz.teaching.charts.tokens import draft_facts
from specviz_app import keys, language, render

PLAY_SECONDS = 1.5  # pause between iterations while playing


def _step(delta: int, last: int) -> None:
    st.session_state[keys.INSPECT_ITER] = min(max(1, st.session_state.get(keys.INSPECT_ITER, 1) + delta), last)


def _toggle_play() -> None:
    st.session_state[keys.PLAYING] = not st.session_state.get(keys.PLAYING, False)


def _controls(n: int, w: dict[str, str]) -> bool:
    """The iteration slider, Previous, Next and Play/Pause; whether play is on."""
    cols = st.columns([5, 1.3, 1.2, 1.2], vertical_alignment="bottom")
    if n > 1:
        cols[0].slider(w["iteration"], 1, n, key=keys.INSPECT_ITER, help=w["iteration_help"])
    cols[1].button(w["previous"], icon=":material/chevron_left:", on_click=_step, args=(-1, n), width="stretch")
    cols[2].button(w["next"], icon=":material/chevron_right:", on_click=_step, args=(1, n), width="stretch")
    playing = st.session_state.get(keys.PLAYING, False)
    # One button whose label switches. The fixed key keeps it the same element across its two labels:
    # without it "Pause" was a new element, drawn above the greyed "Play" of the run before for as
    # long as play slept, and the controls jumped.
    cols[3].button(
        w["pause"] if playing else w["play"],
        icon=":material/pause:" if playing else ":material/play_arrow:",
        on_click=_toggle_play,
        width="stretch",
        key=keys.INSPECT_PLAY,
    )
    return playing


def _iteration(trace, i: int, w: dict[str, str]) -> None:
    """Iteration i explained: its tokens, each draft's q and p, and the correction."""
    lang = language.current()
    view = step_view(trace, i, lang)
    st.subheader(view.summary)
    st.caption(render.md_escape(view.drafting_note))
    st.html(render.legend_html(render.statuses_in([view.iteration]), lang=lang))
    gamma = trace.config.get("gamma") or None
    st.html(render.token_stream_html([view.iteration], trace.extra, gamma=gamma, lang=lang))
    if view.tree_note:
        st.info(render.md_escape(view.tree_note), icon=":material/account_tree:")
    for panel in view.drafts:
        with st.container(border=True):
            left, right = st.columns([2, 3])
            left.markdown(f"**{render.md_escape(panel.title)}**")
            left.markdown(draft_facts(panel.row, lang=lang))
            right.plotly_chart(panel.figure, key=f"{keys.INSPECT_DRAFT_PREFIX}{i}-{panel.row['slot']}")
    if view.discarded_note:
        st.caption(render.md_escape(view.discarded_note))
    corr = view.correction
    if corr.figure is None:
        st.caption(f"{corr.title} {corr.text}")
    else:
        st.markdown(f"**{corr.title}** {corr.text}")
        st.plotly_chart(corr.figure, key=f"{keys.INSPECT_CORRECTION_PREFIX}{corr.kind}-{i}")
    _kv_cache(trace, i - 1, w)


def _kv_cache(trace, index: int, w: dict[str, str]) -> None:
    """The iteration's KV-cache rows (specviz.teaching.charts.kv_cache), then the measured comparison
    of no cache, the cache and the cache + speculative decoding (a recording: no model needed)."""
    lang = language.current()
    if trace.mode == "speculative":  # the baseline's one-token steps write one row and keep it
        with st.container(border=True):
            st.markdown(w["kv_header"])
            for line in cache_caption(trace, index, lang):
                st.caption(render.md_escape(line))
            st.plotly_chart(cache_figure(trace, index, lang))
    with st.expander(w["kv_expander"]):
        try:
            comparison = load_comparison()
        except ComparisonError as exc:
            st.warning(str(exc))
            return
        st.plotly_chart(comparison_figure(comparison, lang))
        where = comparison.machine.get("recorded_with", "")  # the recording's own words: data, shown as code
        st.caption(w["kv_recorded"].format(target=_code(comparison.target), draft=_code(comparison.draft),
                                           where=_code(where)))  # fmt: skip
        st.caption(w["kv_prompt"])
        st.code(comparison.prompt, language=None, wrap_lines=True)


def _code(text: str) -> str:
    """A recorded name or note as inline code (backticks in it dropped: they would end the code)."""
    return f"`{text.replace('`', '')}`"


def inspector() -> None:
    loaded = render.open_trace_page("inspector")
    if loaded is None:
        return
    w, lang = language.words("inspector"), language.current()
    trace = loaded.trace
    n = len(trace.iterations)
    if n == 0:
        st.info(w["no_iterations"])
        return
    if keys.INSPECT_NEXT in st.session_state:  # set by play at the end of the previous run
        st.session_state[keys.INSPECT_ITER] = st.session_state.pop(keys.INSPECT_NEXT)
    first = first_drafted(trace)  # a new trace opens past the prefill, which drafts nothing to inspect
    st.session_state[keys.INSPECT_ITER] = min(max(1, st.session_state.get(keys.INSPECT_ITER, first)), n)
    if (counts := iteration_counts(trace, lang)) is not None:
        if first > 1:
            counts += w["opens_on"].format(first=first)
        st.caption(render.md_escape(counts))
    if (summary := run_summary(trace, lang)) is not None:
        st.caption(render.md_escape(summary))
    playing = _controls(n, w)
    i = st.session_state[keys.INSPECT_ITER]
    _iteration(trace, i, w)
    if playing:
        if i >= n:
            st.session_state[keys.PLAYING] = False
        else:
            time.sleep(PLAY_SECONDS)
            st.session_state[keys.INSPECT_NEXT] = i + 1
            st.rerun()


inspector()
