"""Timeline: draft and verify phases per iteration beside the target alone, on one time axis."""

import streamlit as st

from specviz import charts
from specviz.charts.headline import range_note
from specviz.charts.timeline import time_to_tokens_ms, tokens_in_common
from specviz.speedup import speedup_spread
from specviz_app import keys, render


def timeline() -> None:
    loaded = render.open_trace_page("timeline")
    if loaded is None:
        return
    trace, baseline = loaded.trace, loaded.baseline
    st.plotly_chart(charts.timeline_figure(trace, baseline), key=keys.TIMELINE_CHART)
    s = trace.summary
    common = tokens_in_common(trace, baseline)
    cols = st.columns(4)
    cols[0].metric("Drafting", f"{s.get('draft_ms', 0):.0f} ms", help="all draft phases together")
    cols[1].metric("Verifying", f"{s.get('verify_ms', 0):.0f} ms", help="all target passes together")
    cols[2].metric("Target passes", f"{s['target_calls']}", help=f"for {s['new_tokens']} tokens")
    spread = speedup_spread(trace, baseline)
    if spread is not None:
        # The same number as the Playground's headline (specviz.speedup), not one of this chart's own.
        cols[3].metric(
            "Speedup", f"{spread.median:.2f}×", range_note(spread), delta_color="off", delta_arrow="off",
            help="tokens/s of speculative decoding ÷ tokens/s of the target alone: the median of the timed pairs",
        )  # fmt: skip
        spec_ms, base_ms = time_to_tokens_ms(trace, common), time_to_tokens_ms(baseline, common)
        lengths = (
            f"The two runs wrote {s['new_tokens']} and {baseline.summary['new_tokens']} tokens (one reached the end "
            f"of its answer first); over the first {common}, which both wrote, "
            if s["new_tokens"] != baseline.summary["new_tokens"]
            else f"Over its {common} tokens "
        )
        st.caption(
            f"{lengths}this chart's pair took {spec_ms:.0f} ms against {base_ms:.0f} ms. The chart shows the first "
            f"timed pair; the speedup is the median of all {spread.pairs}."
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
