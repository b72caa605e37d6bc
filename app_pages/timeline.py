"""Timeline: draft and verify phases per iteration beside the target alone, on one time axis."""

import streamlit as st

from specviz import charts
from specviz_app import state


def timeline() -> None:
    loaded = state.open_trace_page(
        "Timeline",
        "Each iteration drafts γ tokens (cheap) and runs the target once over all of them (expensive). "
        "The target alone needs one pass per token: fewer, fuller passes are where the time goes away.",
    )
    if loaded is None:
        return
    trace, baseline = loaded.trace, loaded.baseline
    st.plotly_chart(charts.timeline_figure(trace, baseline), key="timeline")
    s = trace.summary
    cols = st.columns(4)
    cols[0].metric("Drafting", f"{s.get('draft_ms', 0):.0f} ms", help="all draft phases together")
    cols[1].metric("Verifying", f"{s.get('verify_ms', 0):.0f} ms", help="all target passes together")
    cols[2].metric("Target passes", f"{s['target_calls']}", help=f"for {s['new_tokens']} tokens")
    if baseline is not None and baseline is not trace:
        b = baseline.summary
        cols[3].metric("Target alone", f"{b['wall_ms']:.0f} ms", help=f"{b['target_calls']} passes, one per token")
    else:
        cols[3].metric("Target alone", "n/a", help="no baseline recorded")
        st.info("No baseline in this trace: tick 'Also run the target alone' in the sidebar and press ▶ Run.")
    st.caption(
        "Times are wall-clock on the machine that recorded the trace; on a shared CPU they vary from run to run. "
        "On a GPU a pass over several tokens costs little more than over one, because the weights are read "
        "once; on a CPU the extra tokens cost more, so the saving is smaller."
    )


timeline()
