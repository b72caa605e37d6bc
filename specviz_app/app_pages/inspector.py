"""Step inspector: one iteration at a time, each draft's q and p, the decision, and the correction."""

import time

import streamlit as st

from specviz.labs.kv_cache import ComparisonError, load_comparison
from specviz.teaching.charts.drafting import first_drafted, iteration_counts, run_summary
from specviz.teaching.charts.kv_cache import cache_caption, cache_figure, comparison_figure
from specviz.teaching.charts.step import step_view
from specviz.teaching.charts.tokens import draft_facts
from specviz_app import keys, render

PLAY_SECONDS = 1.5  # pause between iterations while playing


def _step(delta: int, last: int) -> None:
    st.session_state[keys.INSPECT_ITER] = min(max(1, st.session_state.get(keys.INSPECT_ITER, 1) + delta), last)


def _toggle_play() -> None:
    st.session_state[keys.PLAYING] = not st.session_state.get(keys.PLAYING, False)


def _controls(n: int) -> bool:
    """The iteration slider, Previous, Next and Play/Pause; whether play is on."""
    cols = st.columns([5, 1.3, 1.2, 1.2], vertical_alignment="bottom")
    if n > 1:
        cols[0].slider(
            "Iteration",
            1,
            n,
            key=keys.INSPECT_ITER,
            help="one iteration = draft up to γ tokens, verify them in one target pass, correct",
        )
    cols[1].button("Previous", icon=":material/chevron_left:", on_click=_step, args=(-1, n), width="stretch")
    cols[2].button("Next", icon=":material/chevron_right:", on_click=_step, args=(1, n), width="stretch")
    playing = st.session_state.get(keys.PLAYING, False)
    # One button whose label switches. The fixed key keeps it the same element across its two labels:
    # without it "Pause" was a new element, drawn above the greyed "Play" of the run before for as
    # long as play slept, and the controls jumped.
    cols[3].button(
        "Pause" if playing else "Play",
        icon=":material/pause:" if playing else ":material/play_arrow:",
        on_click=_toggle_play,
        width="stretch",
        key=keys.INSPECT_PLAY,
    )
    return playing


def _iteration(trace, i: int) -> None:
    """Iteration i explained: its tokens, each draft's q and p, and the correction."""
    view = step_view(trace, i)
    st.subheader(view.summary)
    st.caption(render.md_escape(view.drafting_note))
    st.html(render.legend_html(render.statuses_in([view.iteration])))
    st.html(render.token_stream_html([view.iteration], trace.extra, gamma=trace.config.get("gamma") or None))
    if view.tree_note:
        st.info(render.md_escape(view.tree_note), icon=":material/account_tree:")
    for panel in view.drafts:
        with st.container(border=True):
            left, right = st.columns([2, 3])
            left.markdown(f"**{render.md_escape(panel.title)}**")
            left.markdown(draft_facts(panel.row))
            right.plotly_chart(panel.figure, key=f"{keys.INSPECT_DRAFT_PREFIX}{i}-{panel.row['slot']}")
    if view.discarded_note:
        st.caption(render.md_escape(view.discarded_note))
    corr = view.correction
    if corr.figure is None:
        st.caption(f"{corr.title} {corr.text}")
    else:
        st.markdown(f"**{corr.title}** {corr.text}")
        st.plotly_chart(corr.figure, key=f"{keys.INSPECT_CORRECTION_PREFIX}{corr.kind}-{i}")
    _kv_cache(trace, i - 1)


def _kv_cache(trace, index: int) -> None:
    """The iteration's KV-cache rows (specviz.teaching.charts.kv_cache), then the measured comparison
    of no cache, the cache and the cache + speculative decoding (a recording: no model needed)."""
    if trace.mode == "speculative":  # the baseline's one-token steps write one row and keep it
        with st.container(border=True):
            st.markdown("**The KV caches in this iteration**")
            for line in cache_caption(trace, index):
                st.caption(render.md_escape(line))
            st.plotly_chart(cache_figure(trace, index))
    with st.expander("No KV cache, KV cache, KV cache + speculative decoding: measured on one prompt"):
        try:
            comparison = load_comparison()
        except ComparisonError as exc:
            st.warning(str(exc))
            return
        st.plotly_chart(comparison_figure(comparison))
        where = comparison.machine.get("recorded_with", "")
        st.caption(
            render.md_escape(
                f"Prompt: {comparison.prompt!r}. Target {comparison.target}, draft {comparison.draft}, greedy. "
                f"No cache runs the same forward over the whole text at every step. Recorded with {where}."
            )
        )


def inspector() -> None:
    loaded = render.open_trace_page("inspector")
    if loaded is None:
        return
    trace = loaded.trace
    n = len(trace.iterations)
    if n == 0:
        st.info("This trace has no recorded iterations (it was made with tracing off).")
        return
    if keys.INSPECT_NEXT in st.session_state:  # set by play at the end of the previous run
        st.session_state[keys.INSPECT_ITER] = st.session_state.pop(keys.INSPECT_NEXT)
    first = first_drafted(trace)  # a new trace opens past the prefill, which drafts nothing to inspect
    st.session_state[keys.INSPECT_ITER] = min(max(1, st.session_state.get(keys.INSPECT_ITER, first)), n)
    if (counts := iteration_counts(trace)) is not None:
        if first > 1:
            counts += f" It opens on iteration {first}, the first that drafted; Previous goes back to iteration 1."
        st.caption(render.md_escape(counts))
    if (summary := run_summary(trace)) is not None:
        st.caption(render.md_escape(summary))
    playing = _controls(n)
    i = st.session_state[keys.INSPECT_ITER]
    _iteration(trace, i)
    if playing:
        if i >= n:
            st.session_state[keys.PLAYING] = False
        else:
            time.sleep(PLAY_SECONDS)
            st.session_state[keys.INSPECT_NEXT] = i + 1
            st.rerun()


inspector()
