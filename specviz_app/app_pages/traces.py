"""Traces: download the current trace, upload one to explore without a model, or open an example."""

import json

import streamlit as st

from specviz.config import slug
from specviz.errors import TraceError
from specviz_app import gallery, keys, opening, session


def _file_stem(trace) -> str:
    words = slug(trace.prompt, 32) or "trace"
    return f"specviz-{words}-seed{trace.config['seed']}"


def _opened(messages: list[str], what: str) -> None:
    st.session_state[keys.TRACES_NOTICE] = (what, messages)
    st.rerun()  # redraw the sidebar with the trace's settings


def _notice() -> None:
    """What the last upload or example opening did, said once."""
    if notice := st.session_state.pop(keys.TRACES_NOTICE, None):
        what, messages = notice
        st.success(f"Opened {what}. The sidebar now holds its settings; every page shows it.")
        for msg in messages:
            st.warning(f"Its settings do not fit the sidebar exactly: {msg}")


def _downloads(loaded) -> None:
    st.subheader("Download the current trace")
    if loaded is None:
        st.info("No trace yet: run one or open an example below.")
        return
    trace, stem = loaded.trace, _file_stem(loaded.trace)
    st.caption(f"Showing: {loaded.source}")
    cols = st.columns(4)
    cols[0].download_button(
        opening.TRACE_DOWNLOAD,
        trace.to_json(indent=1),
        f"{stem}.json",
        "application/json",
        help="the full trace, its timed pairs included; upload it here later to explore it again",
    )
    cols[1].download_button(
        opening.CSV_DOWNLOAD,
        trace.to_csv(),
        f"{stem}.csv",
        "text/csv",
        help=(
            "one row per token, as the pages show them: iteration (from 1), status (accepted, rejected, "
            "discarded, resampled, bonus, target), q, p, accept prob, r, β; empty where a token was never checked"
        ),
    )
    cols[2].download_button(
        opening.LENGTHS_DOWNLOAD,
        json.dumps(trace.accept_lengths()),
        f"{stem}.accept_lengths.json",
        "application/json",
        help="tokens per iteration, as Spec-Bench reports them",
    )
    if loaded.baseline is not None and loaded.baseline is not trace:
        cols[3].download_button(
            opening.BASELINE_DOWNLOAD,
            loaded.baseline.to_json(indent=1),
            f"{stem}.baseline.json",
            "application/json",
            help="the target-only run on the same settings",
        )


def _upload() -> None:
    st.subheader("Upload a trace")
    # The uploader keeps every file it is given until each is removed by hand; a fresh key (one per
    # opening) empties it once its files were opened or refused, so a file added again replaces the
    # earlier one instead of joining it (opening.read_uploads also keeps one file per name).
    round_ = st.session_state.get(keys.TRACES_UPLOAD_ROUND, 0)
    files = st.file_uploader(
        f'A trace JSON, optionally with its baseline (the "{opening.TRACE_DOWNLOAD}" and '
        f'"{opening.BASELINE_DOWNLOAD}" downloads above, or `python -m specviz generate --out`)',
        type=opening.UPLOAD_TYPES,
        accept_multiple_files=True,
        max_upload_size=20,  # MB: the trace reader refuses anything larger anyway
        key=f"{keys.TRACES_UPLOAD}-{round_}" if round_ else keys.TRACES_UPLOAD,
        help=f'The "{opening.CSV_DOWNLOAD}" and "{opening.LENGTHS_DOWNLOAD}" downloads are summaries for '
        "other tools: they hold too little to draw the pages from.",
    )
    if error := st.session_state.pop(keys.TRACES_UPLOAD_ERROR, None):  # said once, under the emptied uploader
        st.error(f"Could not open the upload: {error}\n\nThe trace on show is unchanged.")
    if files and st.button("Open the uploaded trace", type="primary"):
        st.session_state[keys.TRACES_UPLOAD_ROUND] = round_ + 1
        try:
            trace, baseline = opening.read_uploads([(f.name, f.getvalue()) for f in files])
        except TraceError as exc:
            st.session_state[keys.TRACES_UPLOAD_ERROR] = str(exc)
            st.rerun()  # draw the emptied uploader, the reason under it
        _opened(opening.open_trace(trace, baseline, f"file: {files[0].name}"), f"the uploaded {files[0].name}")


def _examples() -> None:
    st.subheader("Examples")
    st.caption("Recorded with the offline pair by scripts/record_examples.py; they open instantly.")
    examples = gallery.examples()
    if not examples:
        st.info("No example traces found in assets/examples/.")
    for ex in examples:
        with st.container(border=True):
            left, right = st.columns([5, 1], vertical_alignment="center")
            left.markdown(f"**{ex.title}**  \n{ex.note}")
            if ex.recorded_with:
                left.caption(f"Recorded on {ex.recorded_with}.")
            if right.button("Open", key=f"{keys.EXAMPLE_OPEN_PREFIX}{ex.name}", width="stretch"):
                try:
                    messages = opening.open_example(ex)
                except TraceError as exc:
                    st.error(f"The example {ex.name} is damaged: {exc}")
                else:
                    _opened(messages, f"the example '{ex.title}'")


def traces() -> None:
    st.title("Traces")
    st.caption(
        "A trace is the whole run as plain JSON: every draft, p, q, r and decision. "
        "Every page works from a trace alone, so an uploaded file needs no model."
    )
    _notice()
    _downloads(session.current())
    _upload()
    _examples()


traces()
