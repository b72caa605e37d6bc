"""Timeline: draft and verify phases per iteration beside the target alone, on one time axis."""

import streamlit as st

from specviz.teaching import charts
from specviz.teaching.charts.headline import SPEEDUP_HELP, range_note, sureness
from specviz.teaching.charts.timeline import time_to_tokens_ms, tokens_in_common
from specviz.traces import speedup
from specviz.traces.speedup import NO_BASELINE, why_no_speedup
from specviz_app import keys, render


def timeline() -> None:
    loaded = render.open_trace_page("timeline", timing_line=False)  # the timing line sits above the numbers
    if loaded is None:
        return
    trace, baseline = loaded.trace, loaded.baseline
    st.plotly_chart(charts.timeline_figure(trace, baseline), key=keys.TIMELINE_CHART)
    render.speed_numbers(loaded, lambda spread: _numbers(trace, baseline, spread))
    st.caption(
        "Times are wall-clock on the machine that recorded the trace; on a shared CPU they vary from run to run. "
        "On a GPU a pass over several tokens costs little more than over one, because the weights are read "
        "once; on a CPU the extra tokens cost more, so the saving is smaller."
    )


def _numbers(trace, baseline, spread) -> None:
    """The phases' totals and the run's speedup, from `spread` (render.speed_numbers: the same reading
    as the timing line above them while pairs still come in)."""
    s = trace.summary
    common = tokens_in_common(trace, baseline)
    cols = st.columns(4)
    cols[0].metric("Drafting", f"{s.get('draft_ms', 0):.0f} ms", help="all draft phases together")
    cols[1].metric("Verifying", f"{s.get('verify_ms', 0):.0f} ms", help="all target passes together")
    cols[2].metric("Target passes", f"{s['target_calls']}", help=f"for {s['new_tokens']} tokens")
    if spread is None:
        cols[3].metric("Target alone", "n/a", help=why_no_speedup(trace, baseline) or NO_BASELINE)
        if baseline is None or baseline is trace:
            st.info("No baseline in this trace: tick 'Also run the target alone' in the sidebar and press ▶ Run.")
        return
    # The same number as the Playground's headline (specviz.traces.speedup), not one of this chart's own.
    cols[3].metric(
        "Speedup", f"{spread.median:.2f}×", range_note(spread), delta_color="off", delta_arrow="off", help=SPEEDUP_HELP
    )
    spec_ms, base_ms = time_to_tokens_ms(trace, common), time_to_tokens_ms(baseline, common)
    lengths = (
        f"The two runs wrote {s['new_tokens']} and {baseline.summary['new_tokens']} tokens (one reached the end "
        f"of its answer first); over the first {common}, which both wrote, "
        if s["new_tokens"] != baseline.summary["new_tokens"]
        else f"Over its {common} tokens "
    )
    which = _which_pair(speedup.timed_pairs(trace, baseline)[0], spread)
    st.caption(f"{lengths}this chart's pair took {spec_ms:.0f} ms against {base_ms:.0f} ms. The chart shows {which}.")
    if words := sureness(spread):
        st.caption(":material/straighten: " + words)


def _which_pair(first: dict, spread) -> str:
    """Which pair the chart shows (the run's own: its first pair), said against `spread`, the reading
    the numbers beside it come from, never a second reading of the pairs. Whether that pair is among
    them is the figures' own rule (speedup.figure_pairs) applied to the pair's flags, set when it was
    recorded: it counts, or none counts (`spread.timed` 0) and the figures fall back on every solo
    pair. Only the pair's own `batched` flag makes it one decoded together with other sessions' runs."""
    solo = not first.get("batched")
    among = bool(speedup.counted_pairs([first])) or (solo and spread.timed == 0)
    if among and spread.pairs > 1:
        return (
            f"the first of the {spread.pairs} timed pairs the speedup comes from (their median pair's ratio; their "
            f"range {spread.low:.2f}–{spread.high:.2f}×)"
        )
    if among:
        return "the one timed pair"
    why = (
        "decoded together with other sessions' runs"
        if not solo
        else "timed while a page was drawn in the same process, which slowed its two runs unevenly"
    )
    return f"the run's own pair, {why}, so it is none of the {spread.pairs} pairs the speedup comes from"


timeline()
