"""Timeline: draft and verify phases per iteration beside the target alone, on one time axis."""

import streamlit as st

from specviz import charts
from specviz.charts.timeline import time_to_tokens_ms, tokens_in_common
from specviz_app import state


def timeline() -> None:
    loaded = state.open_trace_page("timeline")
    if loaded is None:
        return
    trace, baseline = loaded.trace, loaded.baseline
    st.plotly_chart(charts.timeline_figure(trace, baseline), key="timeline")
    s = trace.summary
    common = tokens_in_common(trace, baseline)
    cols = st.columns(4)
    cols[0].metric("Drafting", f"{s.get('draft_ms', 0):.0f} ms", help="all draft phases together")
    cols[1].metric("Verifying", f"{s.get('verify_ms', 0):.0f} ms", help="all target passes together")
    cols[2].metric("Target passes", f"{s['target_calls']}", help=f"for {s['new_tokens']} tokens")
    if baseline is not None and baseline is not trace:
        spec_ms, base_ms = time_to_tokens_ms(trace, common), time_to_tokens_ms(baseline, common)
        cols[3].metric(
            f"Time to {common} tokens",
            f"{spec_ms:.0f} vs {base_ms:.0f} ms",
            help="speculative vs the target alone, over the tokens both runs wrote (a fair race)",
        )
        if s["new_tokens"] != baseline.summary["new_tokens"]:
            st.caption(
                f"The two runs wrote {s['new_tokens']} and {baseline.summary['new_tokens']} tokens (one reached the "
                f"end of its answer first), so both are compared over their first {common} tokens."
            )
    else:
        cols[3].metric("Target alone", "n/a", help="no baseline recorded")
        st.info("No baseline in this trace: tick 'Also run the target alone' in the sidebar and press ▶ Run.")
    st.caption(
        "Times are wall-clock on the machine that recorded the trace; on a shared CPU they vary from run to run. "
        "On a GPU a pass over several tokens costs little more than over one, because the weights are read "
        "once; on a CPU the extra tokens cost more, so the saving is smaller."
    )


timeline()
