"""Playground: run speculative decoding and the target alone on the same settings; see every token."""

import streamlit as st

from specviz_app import render


def playground() -> None:
    loaded = render.open_trace_page("playground", timing_line=False)  # the timing line sits above the headline
    if loaded is None:
        return
    trace, baseline = loaded.trace, loaded.baseline
    render.speed_numbers(loaded, lambda spread: render.headline(trace, baseline, spread))
    st.caption(
        "The speedup is timed as pairs: the same settings decoded speculatively and by the target alone, back to "
        "back, in alternating order, this run being the first pair. The speedup and both tok/s are the median "
        "pair's (so the speedup is their ratio), with the range of all the pairs and their count; the target "
        "passes do not depend on the hardware. The target alone is the fastest specviz knows: it runs the kernels "
        "measured fastest for one-token steps on this machine (`python -m specviz bench` also compares both with "
        "transformers' generate() on the same model)."
    )

    st.subheader("The generated text, token by token")
    show_refused = st.toggle(
        "Show refused drafts", value=True, help="off: only the tokens that made it into the text, still coloured"
    )
    st.html(render.legend_html(render.statuses_in(trace.iterations)))
    st.html(render.token_stream_html(trace.iterations, trace.extra, show_refused, gamma=trace.config.get("gamma")))
    if not trace.iterations:
        st.text(trace.output_text)
    st.caption(
        "Struck-through drafts are not part of the text: the target refused them (red) or never looked at them "
        "because an earlier draft was refused (grey). Every iteration ends with one token from the target "
        "(orange, blue or dark grey), so each target pass yields at least one token."
    )
    st.subheader("Is the output unchanged?")
    render.side_by_side(trace, baseline)
    with st.expander("Prompt and plain output"):
        st.markdown("**Prompt** (sent as a chat message)")
        st.html(f"<blockquote>{render.escaped_text(trace.prompt)}</blockquote>")
        st.markdown("**Output**")
        st.text(trace.output_text)


playground()
