"""Opening a trace instead of running one: from uploaded files, from the gallery, from a
`?trace=<id>` link (the replicas' trace store), and what a session shows on its first visit.

Each sets the sidebar to the settings that re-run what it opened.
"""

from __future__ import annotations

import csv
import io
import time

import streamlit as st

from specviz.errors import TraceError
from specviz.traces import trace_store
from specviz.traces.trace import CSV_COLUMNS, Trace, parse_json
from specviz_app import gallery, keys, params
from specviz_app.params import Settings
from specviz_app.session import Loaded, apply_settings, current, show


def open_trace(trace: Trace, baseline: Trace | None, source: str) -> list[str]:
    """Show a trace from a file or the gallery and set the sidebar to the settings that re-run it."""
    settings, messages = params.from_trace_config(trace.config, trace.prompt, baseline is not None)
    show(Loaded(trace, baseline, source, settings.run_key() if not messages else None))
    apply_settings(settings)
    return messages


# The Traces page's download buttons: the labels the page shows, named here because the upload's
# messages send the user back to them.
TRACE_DOWNLOAD = "Trace (JSON)"
CSV_DOWNLOAD = "Per-token CSV"
LENGTHS_DOWNLOAD = "accept_lengths"
BASELINE_DOWNLOAD = "Baseline (JSON)"
# What the uploader takes: a trace is JSON, but the page's own CSV is taken too, so that a user
# who uploads it hears what it is instead of the browser's bare "text/csv files are not allowed".
UPLOAD_TYPES = ["json", "csv"]


def _reopen(name: str) -> str:
    """What to upload instead of `name`, one of the page's other downloads: the trace it came with."""
    stem = name
    for ending in (f".{LENGTHS_DOWNLOAD}.json", ".csv", ".json"):
        if stem.lower().endswith(ending.lower()):
            stem = stem[: -len(ending)]
            break
    if not stem.startswith("specviz-"):  # not named as the page names its downloads: name no file
        return (
            f'upload the file the "{TRACE_DOWNLOAD}" button saved for that run, and, if the run had a baseline, '
            f'the "{BASELINE_DOWNLOAD}" file with it for the speedup'
        )
    return (
        f'upload the file the "{TRACE_DOWNLOAD}" button saves ({stem}.json, if it was downloaded with this one), '
        f'and, if the run had a baseline, the "{BASELINE_DOWNLOAD}" file ({stem}.baseline.json) for the speedup'
    )


def _latest_of_each_name(files: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """A file added again under the same name replaces the earlier one: the uploader keeps every
    file it was given, so a re-added trace would otherwise count twice."""
    latest = {name: data for name, data in files}  # later entries overwrite earlier ones
    return list(latest.items())


def _csv_header(data: bytes) -> tuple[str, ...] | None:
    try:
        first = data[:4096].decode("utf-8-sig").splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return None
    return tuple(cell.strip() for cell in next(csv.reader(io.StringIO(first)), []))


def _other_export(name: str, data: bytes) -> str | None:
    """What a file that is not a trace is, when it is one of the page's other downloads (or any CSV),
    said with what to upload instead; None when it is none of them (the trace reader's error stands)."""
    if _csv_header(data) == CSV_COLUMNS:
        return (
            f'{name} is the "{CSV_DOWNLOAD}" download: one row per token, for a spreadsheet. It holds no prompt, '
            "settings, timings or alternatives, so no page can be drawn from it. "
            f"To open this run again, {_reopen(name)}."
        )
    if name.lower().endswith(".csv"):
        return f"{name} is a CSV file, and a trace is JSON: {_reopen(name)}."
    try:
        value = parse_json(data)
    except TraceError:
        return None
    if isinstance(value, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        return (
            f'{name} is a list of {len(value)} numbers, like the "{LENGTHS_DOWNLOAD}" download (tokens per '
            f"iteration, for Spec-Bench): it holds no tokens, so no page can be drawn from it. To open a run "
            f"again, {_reopen(name)}."
        )
    return None


def _read_one(name: str, data: bytes) -> Trace:
    if name.lower().endswith(".csv") and (what := _other_export(name, data)):
        raise TraceError(what)  # a CSV is never a trace: say what it is before the JSON reader fails on it
    try:
        return Trace.from_json(data)
    except TraceError as exc:
        raise TraceError(_other_export(name, data) or f"{name}: {exc}") from None


def read_uploads(files: list[tuple[str, bytes]]) -> tuple[Trace, Trace | None]:
    """One or two uploaded files -> (trace, baseline). Raises TraceError with a clear message."""
    files = _latest_of_each_name(files)
    if not files:
        raise TraceError("No file was uploaded.")
    if len(files) > 2:
        names = ", ".join(name for name, _ in files)
        raise TraceError(
            f"The uploader holds {len(files)} files ({names}): keep one trace, or a speculative trace and its "
            "baseline, and remove the others with their ×."
        )
    traces = [_read_one(name, data) for name, data in files]
    spec = [t for t in traces if t.mode == "speculative"]
    base = [t for t in traces if t.mode == "autoregressive"]
    if len(traces) == 2 and (len(spec) != 1 or len(base) != 1):
        raise TraceError("With two files, one must be a speculative trace and the other its target-only baseline.")
    if spec:
        return spec[0], base[0] if base else None
    return base[0], base[0]  # a baseline alone: show it as the trace and as its own baseline


def open_example(example: gallery.Example) -> list[str]:
    trace, baseline = gallery.example_traces(example)
    return open_trace(trace, baseline, f"example: {example.title}")


def _open_stored(trace_id: str) -> bool:
    """Open the run a `?trace=<id>` link names from the replicas' trace store (a reconnecting
    student's link carries it). False, with the reason said once above the page, when it cannot."""
    store = trace_store.from_environment()
    try:
        if store is None:
            raise TraceError(
                "This link names a stored trace, but this server keeps no trace store (it runs as one "
                "replica, without SPECVIZ_TRACE_STORE). Press Run to decode the link's settings."
            )
        trace, baseline, written = store.get(trace_store.check_id(trace_id))
    except TraceError as exc:
        st.session_state[keys.RUN_ERROR] = f"From the link: {exc}"
        return False
    made = time.strftime("%H:%M:%S UTC", time.gmtime(written))
    open_trace(trace, baseline, f"stored run {trace_id}, recorded at {made}")
    current().trace_id = trace_id
    st.rerun()  # draw the sidebar again, now with the stored run's settings


def open_first_visit(settings: Settings, may_decode: bool = True) -> None:
    """First visit of a session: show the gallery example the settings describe, else run them
    (unless may_decode is False: a lesson link opens its step at once, whatever settings it holds)."""
    if st.session_state.get(keys.FIRST_VISIT_DONE):
        return
    st.session_state[keys.FIRST_VISIT_DONE] = True
    stored = (st.session_state.get(keys.URL_QUERY) or {}).get("trace")  # a list: every value the link gave
    if stored and _open_stored(str(stored[-1] if isinstance(stored, list) else stored).strip()):
        return
    key = settings.run_key()
    for ex in gallery.examples():
        meta = gallery.example_dict(ex.path)
        cfg = meta["config"]
        ex_settings, _ = params.from_trace_config(cfg, meta["prompt"], ex.baseline_path is not None)
        if ex_settings.run_key() == key:
            try:
                open_example(ex)
                st.session_state.pop(keys.APPLY_SETTINGS, None)  # the sidebar already shows these settings
            except TraceError:
                break
            return
    if st.session_state.get(keys.URL_GIVEN) and may_decode:
        st.session_state[keys.RUN_REQUESTED] = True  # a shared link: reproduce its demo
    elif gallery.examples():
        try:
            open_example(gallery.examples()[0])  # settings moved on since the examples were recorded: show the first
        except TraceError:
            return
        st.rerun()  # draw the sidebar again, now with the example's settings
