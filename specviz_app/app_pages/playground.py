"""Playground: run speculative decoding and the target alone on the same settings; see every token."""

import streamlit as st

from specviz_app import language, render


def playground() -> None:
    loaded = render.open_trace_page("playground", timing_line=False)  # the timing line sits above the headline
    if loaded is None:
        return
    w, lang = language.words("playground"), language.current()
    trace, baseline = loaded.trace, loaded.baseline
    render.speed_numbers(loaded, lambda spread: render.headline(trace, baseline, spread))
    st.caption(w["timed_as_pairs"])

    st.subheader(w["stream_header"])
    show_refused = st.toggle(w["show_refused"], value=True, help=w["show_refused_help"])
    st.html(render.legend_html(render.statuses_in(trace.iterations), lang=lang))
    gamma = trace.config.get("gamma")
    st.html(render.token_stream_html(trace.iterations, trace.extra, show_refused, gamma=gamma, lang=lang))
    if not trace.iterations:
        st.text(trace.output_text)
    st.caption(w["struck_through"])
    st.subheader(w["unchanged_header"])
    render.side_by_side(trace, baseline)
    with st.expander(w["prompt_and_output"]):
        st.markdown(w["prompt_label"])
        st.html(f"<blockquote>{render.escaped_text(trace.prompt)}</blockquote>")
        st.markdown(w["output_label"])
        st.text(trace.output_text)


playground()
