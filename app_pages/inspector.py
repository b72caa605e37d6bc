"""Step inspector: one iteration at a time, each draft's q and p, the decision, and the correction."""

import time

import streamlit as st

from specviz import charts
from specviz.charts.tokens import draft_facts, iteration_tokens, label_token
from specviz_app import render, state

PLAY_SECONDS = 1.5  # pause between iterations while playing


def _step(delta: int, last: int) -> None:
    st.session_state["inspect_iter"] = min(max(1, st.session_state.get("inspect_iter", 1) + delta), last)


def _toggle_play() -> None:
    st.session_state["playing"] = not st.session_state.get("playing", False)


def inspector() -> None:
    st.title("Step inspector")
    st.caption("Pick an iteration: see what the draft proposed, how the target judged each token, and why.")
    loaded = state.current()
    if not render.trace_notice(loaded, st.session_state["settings"]):
        return
    trace = loaded.trace
    n = len(trace.iterations)
    if n == 0:
        st.info("This trace has no recorded iterations (it was made with tracing off).")
        return
    if "_inspect_next" in st.session_state:  # set by play at the end of the previous run
        st.session_state["inspect_iter"] = st.session_state.pop("_inspect_next")
    st.session_state["inspect_iter"] = min(max(1, st.session_state.get("inspect_iter", 1)), n)

    cols = st.columns([5, 1.3, 1.2, 1.2], vertical_alignment="bottom")
    if n > 1:
        cols[0].slider("Iteration", 1, n, key="inspect_iter", help="one iteration = draft γ, verify once, correct")
    cols[1].button("Previous", icon=":material/chevron_left:", on_click=_step, args=(-1, n), width="stretch")
    cols[2].button("Next", icon=":material/chevron_right:", on_click=_step, args=(1, n), width="stretch")
    playing = st.session_state.get("playing", False)
    cols[3].button(
        "Pause" if playing else "Play",
        icon=":material/pause:" if playing else ":material/play_arrow:",
        on_click=_toggle_play,
        width="stretch",
    )

    i = st.session_state["inspect_iter"]
    it = trace.iterations[i - 1]
    rows = iteration_tokens(it)
    drafts = [r for r in rows if r["is_draft"]]
    corr = next((r for r in rows if not r["is_draft"]), None)
    k = it["accepted_count"]
    if not drafts:
        summary = f"Iteration {i} of {n}: the draft proposed nothing, so the target made one token alone"
    else:
        summary = f"Iteration {i} of {n}: the draft proposed {len(drafts)} tokens, the target accepted {k}"
        if corr is not None:
            summary += f", then {'resampled' if corr['status'] == 'resampled' else 'added a bonus token'}"
    st.subheader(summary + ".")
    st.html(render.legend_html(render.statuses_in([it])))
    st.html(render.token_stream_html([it], trace.extra))

    for row in drafts:
        if row["status"] == "discarded":
            continue
        with st.container(border=True):
            left, right = st.columns([2, 3])
            left.markdown(f"**Draft {row['slot']}: `{label_token(row['token'])}`** ({row['status']})")
            left.markdown(draft_facts(row))
            right.plotly_chart(
                charts.draft_figure(row, row["status"], trace.extra, row["slot"]),
                key=f"draft-{i}-{row['slot']}",
            )
    discarded = [r for r in drafts if r["status"] == "discarded"]
    if discarded:
        st.caption(
            f"{len(discarded)} later draft(s) ("
            + ", ".join(f"`{label_token(r['token'])}`" for r in discarded)
            + ") were discarded unchecked: they continue a prefix the target has just refused."
        )
    if corr is not None and corr["status"] == "resampled":
        rejected = drafts[k]
        st.markdown(
            f"**Correction: resample.** Draft {k + 1} was rejected, so the next token is drawn from the residual "
            "max(0, p − q), normalised: the mass p puts where q put too little. This is what keeps the output "
            "distributed exactly as p."
        )
        st.plotly_chart(charts.residual_figure(rejected, corr, trace.extra), key=f"residual-{i}")
    elif corr is not None and corr["status"] == "bonus":
        st.markdown(
            "**Correction: bonus.** Every draft passed, so the target's pass already holds its next distribution; "
            "one more token is drawn from it for free."
        )
        st.plotly_chart(charts.bonus_figure(corr, trace.extra), key=f"bonus-{i}")
    elif corr is not None:
        st.markdown(
            "**No draft to check.** The draft had nothing to propose here (the n-gram draft found no earlier "
            "match), so the target's pass gives just its own next token, drawn from p."
        )
        st.plotly_chart(charts.bonus_figure(corr, trace.extra, no_draft=True), key=f"target-{i}")
    else:
        st.caption("No correction: the text ended with an end-of-sequence draft.")

    if playing:
        if i >= n:
            st.session_state["playing"] = False
        else:
            time.sleep(PLAY_SECONDS)
            st.session_state["_inspect_next"] = i + 1
            st.rerun()


inspector()
