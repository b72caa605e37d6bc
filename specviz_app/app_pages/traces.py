"""Traces: download the current trace, upload one to explore without a model, or open an example.
Words: the catalogue's section "traces" (the download labels and upload messages: "opening")."""

import json
import math

import streamlit as st

from specviz.config import slug
from specviz.errors import TraceError
from specviz.traces.validation import MAX_TRACE_BYTES
from specviz_app import keys, language, render, session
from specviz_app.runs import gallery, opening

# The uploader takes what the server takes (server.maxUploadSize, more than a trace may be), so that a
# file too large to open reaches the page and hears why, with the limit and what to do, instead of the
# uploader's bare red "!" and "File must be 20.0MB or smaller." (issue 48, E3). MB as Streamlit counts them.
UPLOAD_MB = int(st.get_option("server.maxUploadSize"))  # as the server runs (specviz_app/serving/launch.py sets it)
TRACE_MB = MAX_TRACE_BYTES // 2**20  # the most the trace reader opens (specviz.traces.validation)


def _file_stem(trace) -> str:
    words = slug(trace.prompt, 32) or "trace"
    return f"specviz-{words}-seed{trace.config['seed']}"


def _opened(messages: list[str], what: str) -> None:
    st.session_state[keys.TRACES_NOTICE] = (what, messages)
    st.rerun()  # redraw the sidebar with the trace's settings


def _notice(w: dict[str, str]) -> None:
    """What the last upload or example opening did, said once."""
    if notice := st.session_state.pop(keys.TRACES_NOTICE, None):
        what, messages = notice
        st.success(w["opened"].format(what=what))
        for msg in messages:
            st.warning(w["not_fit"].format(message=msg))


def _downloads(loaded, w: dict[str, str]) -> None:
    st.subheader(w["download_header"])
    if loaded is None:
        st.info(w["no_trace"])
        return
    trace, stem, label = loaded.trace, _file_stem(loaded.trace), opening.downloads(language.current())
    st.caption(w["showing"].format(source=opening.source_words(loaded.source, language.current())))
    cols = st.columns(4)
    cols[0].download_button(
        label["trace"],
        trace.with_baseline_json(loaded.baseline, indent=1),
        f"{stem}.json",
        "application/json",
        help=w["help_trace"],
    )
    cols[1].download_button(label["csv"], trace.to_csv(), f"{stem}.csv", "text/csv", help=w["help_csv"])
    cols[2].download_button(
        label["lengths"], json.dumps(trace.accept_lengths()), f"{stem}.accept_lengths.json", "application/json",
        help=w["help_lengths"],
    )  # fmt: skip
    if loaded.baseline is not None and loaded.baseline is not trace:
        cols[3].download_button(
            label["baseline"], loaded.baseline.to_json(indent=1), f"{stem}.baseline.json", "application/json",
            help=w["help_baseline"],
        )  # fmt: skip


def _upload(w: dict[str, str]) -> None:
    st.subheader(w["upload_header"])
    # The uploader keeps every file it is given until each is removed by hand; a fresh key (one per
    # opening) empties it once its files were opened or refused, so a file added again replaces the
    # earlier one instead of joining it (opening.read_uploads also keeps one file per name).
    round_, lang = st.session_state.get(keys.TRACES_UPLOAD_ROUND, 0), language.current()
    label = opening.downloads(lang)
    files = st.file_uploader(
        w["uploader"].format(trace=label["trace"], baseline=label["baseline"], limit=TRACE_MB),  # the box: UPLOAD_MB
        type=opening.UPLOAD_TYPES,
        accept_multiple_files=True,
        max_upload_size=UPLOAD_MB,  # MB: larger than a trace may be, so that TRACE_MB is said below
        key=f"{keys.TRACES_UPLOAD}-{round_}" if round_ else keys.TRACES_UPLOAD,
        help=w["uploader_help"].format(csv=label["csv"], lengths=label["lengths"]),
    )
    if too_large := [f for f in files or [] if f.size > MAX_TRACE_BYTES]:  # said at once, no Open button
        for f in too_large:
            size = math.ceil(f.size / 2**20 * 10) / 10  # rounded up: a byte over 20 MB reads 20.1, not 20.0
            st.error(w["too_large"].format(name=render.md_escape(f.name), size=size, limit=TRACE_MB))
        return
    if error := st.session_state.pop(keys.TRACES_UPLOAD_ERROR, None):  # said once, under the emptied uploader
        st.error(w["upload_failed"].format(error=error))
    if files and st.button(w["open_upload"], type="primary"):
        st.session_state[keys.TRACES_UPLOAD_ROUND] = round_ + 1
        try:
            trace, baseline = opening.read_uploads([(f.name, f.getvalue()) for f in files], lang)
        except TraceError as exc:
            st.session_state[keys.TRACES_UPLOAD_ERROR] = str(exc)
            st.rerun()  # draw the emptied uploader, the reason under it
        messages = opening.open_trace(trace, baseline, f"file: {files[0].name}", lang)
        _opened(messages, w["what_upload"].format(name=files[0].name))


def _examples(w: dict[str, str]) -> None:
    st.subheader(w["examples_header"])
    st.caption(w["examples_caption"])
    examples, lang = gallery.examples(), language.current()
    if not examples:
        st.info(w["no_examples"])
    for ex in examples:
        title, note, recorded_with = gallery.said(ex, lang)
        with st.container(border=True):
            left, right = st.columns([5, 1], vertical_alignment="center")
            left.markdown(f"**{title}**  \n{note}")
            if recorded_with:
                left.caption(w["recorded_on"].format(where=recorded_with))
            if right.button(w["open"], key=f"{keys.EXAMPLE_OPEN_PREFIX}{ex.name}", width="stretch"):
                try:
                    messages = opening.open_example(ex, lang)
                except TraceError as exc:
                    st.error(w["example_damaged"].format(name=ex.name, error=exc))
                else:
                    _opened(messages, w["what_example"].format(title=title))


def traces() -> None:
    w = language.words("traces")
    st.title(language.words("app")["page_traces"])
    st.caption(w["page_caption"])
    _notice(w)
    _downloads(session.current(), w)
    _upload(w)
    _examples(w)


traces()
