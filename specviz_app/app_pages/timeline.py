"""Timeline: draft and verify phases per iteration beside the target alone, on one time axis."""

import streamlit as st

from specviz.teaching import charts
from specviz.teaching.charts.headline import no_speedup_words, range_note, speedup_help, sureness
from specviz.teaching.charts.timeline import time_to_tokens_ms, tokens_in_common
from specviz.traces import speedup
from specviz_app import keys, language, render


def timeline() -> None:
    loaded = render.open_trace_page("timeline", timing_line=False)  # the timing line sits above the numbers
    if loaded is None:
        return
    trace, baseline = loaded.trace, loaded.baseline
    st.plotly_chart(charts.timeline_figure(trace, baseline, language.current()), key=keys.TIMELINE_CHART)
    render.speed_numbers(loaded, lambda spread: _numbers(trace, baseline, spread))
    st.caption(language.words("timeline")["wall_clock"])


def _numbers(trace, baseline, spread) -> None:
    """The phases' totals and the run's speedup, from `spread` (render.speed_numbers: the same reading
    as the timing line above them while pairs still come in)."""
    w, lang = language.words("timeline"), language.current()
    s = trace.summary
    common = tokens_in_common(trace, baseline)
    cols = st.columns(4)
    cols[0].metric(w["drafting"], w["ms"].format(ms=s.get("draft_ms", 0)), help=w["drafting_help"])
    cols[1].metric(w["verifying"], w["ms"].format(ms=s.get("verify_ms", 0)), help=w["verifying_help"])
    cols[2].metric(w["passes"], f"{s['target_calls']}", help=w["passes_help"].format(n=s["new_tokens"]))
    if spread is None:
        cols[3].metric(w["alone"], w["na"], help=no_speedup_words(trace, baseline, lang))
        if baseline is None or baseline is trace:
            st.info(w["no_baseline"])
        return
    # The same number as the Playground's headline (specviz.traces.speedup), not one of this chart's own.
    cols[3].metric(
        w["speedup"], f"{spread.median:.2f}×", range_note(spread, lang), delta_color="off", delta_arrow="off",
        help=speedup_help(lang),
    )  # fmt: skip
    spec_ms, base_ms = time_to_tokens_ms(trace, common), time_to_tokens_ms(baseline, common)
    lengths = (
        w["lengths_differ"].format(spec=s["new_tokens"], alone=baseline.summary["new_tokens"], common=common)
        if s["new_tokens"] != baseline.summary["new_tokens"]
        else w["lengths_same"].format(common=common)
    )
    which = _which_pair(speedup.timed_pairs(trace, baseline)[0], spread, w)
    st.caption(w["pair_took"].format(lengths=lengths, spec_ms=spec_ms, base_ms=base_ms, which=which))
    if words := sureness(spread, lang):
        st.caption(":material/straighten: " + words)


def _which_pair(first: dict, spread, w: dict[str, str]) -> str:
    """Which pair the chart shows (the run's own: its first pair), said against `spread`, the reading
    the numbers beside it come from, never a second reading of the pairs. Whether that pair is among
    them is the figures' own rule (speedup.figure_pairs) applied to the pair's flags, set when it was
    recorded: it counts, or none counts (`spread.timed` 0) and the figures fall back on every solo
    pair. Only the pair's own `batched` flag makes it one decoded together with other sessions' runs."""
    solo = not first.get("batched")
    among = bool(speedup.counted_pairs([first])) or (solo and spread.timed == 0)
    if among and spread.pairs > 1:
        return w["first_of_pairs"].format(pairs=spread.pairs, low=spread.low, high=spread.high)
    if among:
        return w["one_pair"]
    why = w["why_batched"] if not solo else w["why_disturbed"]
    return w["own_pair"].format(why=why, pairs=spread.pairs)


timeline()
