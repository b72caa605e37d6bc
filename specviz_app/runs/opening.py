"""Opening a trace instead of running one: from uploaded files, from the gallery, from a
`?trace=<id>` link (the replicas' trace store), and what a session shows on its first visit.

Each sets the sidebar to the settings that re-run what it opened. Its words: the catalogue's section
"opening", in the language given (the trace reader's own errors stay the library's English, framed).
A trace's source (Loaded.source) stays English, as the pages test it; source_words says it in a language.
"""

from __future__ import annotations

import csv
import io
import re
import time

import streamlit as st

from specviz.errors import TraceError
from specviz.teaching import catalogue
from specviz.traces import trace_store
from specviz.traces.trace import CSV_COLUMNS, Trace, parse_json
from specviz_app import keys, language, params
from specviz_app.params import Settings
from specviz_app.runs import gallery
from specviz_app.session import Loaded, apply_settings, current, show


def open_trace(trace: Trace, baseline: Trace | None, source: str, lang: str = "en") -> list[str]:
    """Show a trace from a file or the gallery and set the sidebar to the settings that re-run it;
    -> what does not fit the sidebar, in `lang`."""
    settings, messages = params.from_trace_config(trace.config, trace.prompt, baseline is not None, lang)
    show(Loaded(trace, baseline, source, settings.run_key() if not messages else None))
    apply_settings(settings)
    return messages


# The Traces page's download buttons: the labels the page shows (in English here; `downloads(lang)`
# in a language), named here because the upload's messages send the user back to them.
TRACE_DOWNLOAD = "Trace (JSON)"
CSV_DOWNLOAD = "Per-token CSV"
LENGTHS_DOWNLOAD = "accept_lengths"
BASELINE_DOWNLOAD = "Baseline (JSON)"


def downloads(lang: str = "en") -> dict[str, str]:
    """The download buttons' labels in `lang`: "trace", "csv", "lengths", "baseline"."""
    w = catalogue.words("opening", lang)
    return {name: w[f"download_{name}"] for name in ("trace", "csv", "lengths", "baseline")}


# What the uploader takes: a trace is JSON, but the page's own CSV is taken too, so that a user
# who uploads it hears what it is instead of the browser's bare "text/csv files are not allowed".
UPLOAD_TYPES = ["json", "csv"]


def _reopen(name: str, w: dict[str, str]) -> str:
    """What to upload instead of `name`, one of the page's other downloads: the trace it came with."""
    stem = name
    for ending in (f".{LENGTHS_DOWNLOAD}.json", ".csv", ".json"):
        if stem.lower().endswith(ending.lower()):
            stem = stem[: -len(ending)]
            break
    labels = {"trace": w["download_trace"], "baseline": w["download_baseline"]}
    if not stem.startswith("specviz-"):  # not named as the page names its downloads: name no file
        return w["reopen_unnamed"].format(**labels)
    return w["reopen_named"].format(stem=stem, **labels)


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


def _other_export(name: str, data: bytes, w: dict[str, str]) -> str | None:
    """What a file that is not a trace is, when it is one of the page's other downloads (or any CSV),
    said with what to upload instead; None when it is none of them (the trace reader's error stands)."""
    if _csv_header(data) == CSV_COLUMNS:
        return w["is_csv_download"].format(name=name, csv=w["download_csv"], reopen=_reopen(name, w))
    if name.lower().endswith(".csv"):
        return w["is_csv"].format(name=name, reopen=_reopen(name, w))
    try:
        value = parse_json(data)
    except TraceError:
        return None
    if isinstance(value, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        return w["is_lengths"].format(name=name, n=len(value), lengths=w["download_lengths"], reopen=_reopen(name, w))
    return None


def _read_one(name: str, data: bytes, w: dict[str, str]) -> Trace:
    if name.lower().endswith(".csv") and (what := _other_export(name, data, w)):
        raise TraceError(what)  # a CSV is never a trace: say what it is before the JSON reader fails on it
    try:
        return Trace.from_json(data)
    except TraceError as exc:  # the reader's own words (English), after the file's name
        raise TraceError(_other_export(name, data, w) or f"{name}: {exc}") from None


def read_uploads(files: list[tuple[str, bytes]], lang: str = "en") -> tuple[Trace, Trace | None]:
    """One or two uploaded files -> (trace, baseline). Raises TraceError with a clear message in `lang`."""
    w = catalogue.words("opening", lang)
    files = _latest_of_each_name(files)
    if not files:
        raise TraceError(w["no_file"])
    if len(files) > 2:
        names = ", ".join(name for name, _ in files)
        raise TraceError(w["too_many"].format(n=len(files), names=names))
    traces = [_read_one(name, data, w) for name, data in files]
    spec = [t for t in traces if t.mode == "speculative"]
    base = [t for t in traces if t.mode == "autoregressive"]
    if len(traces) == 2 and (len(spec) != 1 or len(base) != 1):
        raise TraceError(w["two_files"])
    if spec:
        try:
            trace, carried = spec[0].carried_baseline()  # the app's Trace (JSON) carries its baseline
        except TraceError as exc:
            name = next(n for (n, _), t in zip(files, traces, strict=True) if t is spec[0])
            raise TraceError(f"{name}: {exc}") from None
        return trace, base[0] if base else carried
    return base[0], base[0]  # a baseline alone: show it as the trace and as its own baseline


def open_example(example: gallery.Example, lang: str = "en") -> list[str]:
    trace, baseline = gallery.example_traces(example)
    return open_trace(trace, baseline, f"example: {example.title}", lang)


# The forms of Loaded.source (English: the pages test them, e.g. "run here"), each with its words'
# key in the catalogue's "opening": the sources opening and running give.
_SOURCES = (
    (re.compile(r"run here, shared recording made at (?P<time>.+)"), "source_shared"),
    (re.compile(r"run here"), "source_run_here"),
    (re.compile(r"example: (?P<title>.+)"), "source_example"),
    (re.compile(r"file: (?P<name>.+)"), "source_file"),
    (re.compile(r"stored run (?P<id>\S+), recorded at (?P<time>.+)"), "source_stored"),
)


def source_words(source: str, lang: str) -> str:
    """A trace's source (Loaded.source) as `lang` says it, for a page's "Showing:" line; a source of
    another form is shown as it is."""
    if catalogue.language_or_default(lang) == catalogue.DEFAULT:
        return source
    for pattern, key in _SOURCES:
        if found := pattern.fullmatch(source):
            fields = found.groupdict()
            if "title" in fields:
                fields["title"] = gallery.title_in(fields["title"], lang)
            return catalogue.words("opening", lang)[key].format(**fields)
    return source


def _open_stored(trace_id: str) -> bool:
    """Open the run a `?trace=<id>` link names from the replicas' trace store (a reconnecting
    student's link carries it). False, with the reason said once above the page, when it cannot."""
    store = trace_store.from_environment()
    w = language.words("opening")
    try:
        if store is None:
            raise TraceError(w["no_store"])
        trace, baseline, written = store.get(trace_store.check_id(trace_id))
    except TraceError as exc:  # the store's own words (English) inside
        st.session_state[keys.RUN_ERROR] = w["from_link"].format(error=exc)
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
