"""The app's memory: the current trace (and its baseline) in st.session_state, cached models,
the run that replaces them, and opening a trace from a file or the gallery.

Pages only read the stored trace, so moving a slider re-renders from it without touching a model.
A failed run leaves the previous trace in place.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from specviz import config, models, speedup, trace_store
from specviz.errors import SpecvizError, TraceError
from specviz.gate import device_gate, place_words
from specviz.shipped import ASSETS
from specviz.trace import Trace
from specviz_app import background, keys, params, render, shared_runs
from specviz_app.params import Settings

EXAMPLES_DIR = ASSETS / "examples"
# The learned drafts' training records, by the name the Drafters page shows.
TRAINING_RECORDS = {
    "Draft head (reads the target's features)": ASSETS / "head_training.json",
    "Distilled 3-layer draft": ASSETS / "draft_training.json",
}
RACE_RECORD = ASSETS / "race.json"  # the race of drafters recorded with the offline target
# SPECVIZ_THREADS=n sets torch's CPU threads for the app's runs. On a shared CPU, one thread avoids
# intra-op threads spinning against other programs (a verify pass measured ten times slower).
THREADS_ENV = "SPECVIZ_THREADS"
WARM_UP_TOKENS = 8  # the preload's first decode: long enough to reach the verification passes' shapes


@dataclass
class Loaded:
    """The trace on show, where it came from, and the settings that reproduce it."""

    trace: Trace
    baseline: Trace | None
    source: str  # e.g. "run here", "example: ...", "file: ..."
    run_key: tuple | None  # Settings.run_key() of the settings that made it (None: unknown)
    timing: background.TimingPairs | None = None  # its further timed pairs, while they run
    shared: bool = False  # a recording in shared_runs: its timing is the store's to stop (on eviction)
    trace_id: str | None = None  # its id in the replicas' trace store; the URL carries it as ?trace=


def current() -> Loaded | None:
    return st.session_state.get(keys.LOADED)


def _store(loaded: Loaded) -> None:
    previous = current()
    if previous is not None and previous.timing is not None and not previous.shared:
        previous.timing.stop()  # its pairs would time a trace no page shows any more
    st.session_state[keys.LOADED] = loaded
    st.session_state.pop(keys.INSPECT_ITER, None)  # a new trace starts the inspector at iteration 1


# ----- the one error guard of every run a page starts ------------------------------------------


class ErrorGuard:
    """`with ErrorGuard(keys.SWEEP_ERROR, area) as guard: ...`, then `if guard.failed: return`.

    A SpecvizError (the user can fix it) is stored under `key` word for word; anything else is a
    bug, stored as one plain sentence, never a traceback. Either way `area` is cleared and nothing
    already shown is lost."""

    def __init__(self, key: str, area=None):
        self.key, self.area, self.failed = key, area, False

    def __enter__(self) -> ErrorGuard:
        st.session_state.pop(self.key, None)
        background.wait_for_preload()  # a run must not import torch while the preload thread does
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None:
            return False
        if not isinstance(exc, Exception):
            return False  # Streamlit's own control flow (a rerun, a stop) passes through
        self.failed = True
        if self.area is not None:
            self.area.empty()
        if isinstance(exc, SpecvizError):
            st.session_state[self.key] = str(exc)
        else:
            st.session_state[self.key] = (
                f"Something unexpected went wrong ({type(exc).__name__}: {exc}). Try other settings; please report "
                "this if it repeats."
            )
        return True


# ----- models and runs --------------------------------------------------------------------------


# The title and one-line explanation each trace page opens with, by page file name.
PAGE_INTROS = {
    "playground": (
        "Playground",
        "A cheap draft model q proposes γ tokens; the target p checks them all in one pass and keeps a prefix. "
        "The output follows p exactly; the speedup below says whether this draft made it faster. "
        "Hover a token to see why it was kept.",
    ),
    "timeline": (
        "Timeline",
        "Each iteration drafts γ tokens (cheap) and runs the target once over all of them (expensive). "
        "The target alone needs one pass per token: fewer, fuller passes are where the time goes away.",
    ),
    "acceptance": (
        "Acceptance",
        "β is the chance a draft at one position passes: Σ min(p, q). α, its mean, predicts the rest: "
        "if each draft passes with probability α, tokens per iteration follow a truncated geometric law.",
    ),
}


def open_trace_page(page: str):
    """Title, one-line explanation (PAGE_INTROS) and the trace notice every trace page opens with.
    Returns the loaded trace (with its baseline), or None when there is none to show."""
    title, caption = PAGE_INTROS[page]
    st.title(title)
    st.caption(caption)
    loaded = current()
    return loaded if render.trace_notice(loaded, st.session_state[keys.SETTINGS]) else None


def apply_settings(settings: Settings) -> None:
    """Ask the sidebar's next run to put these values into its widgets (they cannot change once drawn)."""
    st.session_state[keys.APPLY_SETTINGS] = settings


@st.cache_resource(max_entries=4, show_spinner=False)
def get_model(name: str, dtype: str | None = None) -> models.LoadedModel:
    """Load a model once per server process (bounded: at most four stay in memory)."""
    background.wait_for_preload()
    _apply_thread_setting()
    loaded = models.load_model(name, dtype=dtype)
    _warm_up(loaded)
    return loaded


def _apply_thread_setting() -> None:
    value = os.environ.get(THREADS_ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        import torch

        torch.set_num_threads(int(value))


def _warm_up(loaded: models.LoadedModel) -> None:
    """One tiny forward pass, so one-off start-up costs do not land in the first run's timings."""
    import torch

    with torch.inference_mode():
        loaded.model(torch.tensor([[0, 1, 2]], device=loaded.model.device))


_head_lock = threading.Lock()  # the preload thread and a first Run may ask for the head at once
_warm_heads: set[tuple[str, int]] = set()  # (head name, id of its target) run once already


def _warm_up_head(target: models.LoadedModel, name: str) -> None:
    """Load the draft head (cached per target) and run it once, so one-off start-up costs stay
    out of the first run's timings, as _warm_up does for models."""
    import torch

    from specviz.drafters import load_draft_head
    from specviz.head import HeadCache

    with _head_lock:
        head = load_draft_head(name, target)
        if (name, id(target.model)) in _warm_heads:
            return
        with torch.inference_mode():
            dim = head.cfg.hidden
            device = head.embed.device
            head.step(torch.zeros(3, dim, device=device), torch.tensor([0, 1, 2], device=device), 1, HeadCache())
        _warm_heads.add((name, id(target.model)))


def preload_defaults() -> None:
    """Load and warm the offline default pair (background.preload runs this as the app opens), and
    decode a few tokens with it: the first decode of a process pays for one-off set-up (the kernels'
    first calls at each shape took 3 s of a 14-token run), which the first Run should not."""
    from specviz.decoder import autoregressive_generate, speculative_generate

    target_name, draft_name = params.DEFAULTS.model_names()
    target = get_model(target_name or models.DEFAULT_TARGET, params.DEFAULTS.dtype)
    draft = resolve_draft(target, draft_name)
    kwargs = {**params.DEFAULTS.decode_kwargs(), "max_new_tokens": WARM_UP_TOKENS}
    speculative_generate(params.DEFAULTS.prompt, target=target, draft=draft, trace=True, **kwargs)
    kwargs.pop("gamma")
    autoregressive_generate(params.DEFAULTS.prompt, target=target, trace=True, **kwargs)


def sidebar_pair(settings: Settings) -> tuple[models.LoadedModel, object]:
    """The sidebar's pair, loaded: (target, the draft as the decoder takes it). Every page that runs
    the sidebar's models gets them here, with one message for a custom pair left without a target."""
    target_name, draft_name = settings.model_names()
    if not target_name:
        raise SpecvizError("Name a target model in the sidebar (custom pair), or pick another pair.")
    target = get_model(target_name, settings.dtype)
    return target, resolve_draft(target, draft_name)


def resolve_draft(target: models.LoadedModel, draft: str | None):
    """The draft to hand the decoder: a strategy or head name as it is, a model draft loaded
    (once, cached) and checked against the target's vocabulary."""
    from specviz.drafters import head_of, needs_no_model

    if draft is None:
        draft = models.default_draft(target.name)
    if (head := head_of(draft)) is not None:
        _warm_up_head(target, head)
    if needs_no_model(draft):
        return draft
    loaded = get_model(draft, target.dtype)
    models.check_vocabulary(target, loaded)  # fail before decoding, with the library's message
    return loaded


def run(settings: Settings) -> None:
    """Decode with the settings, streaming tokens into the page; keep the old trace on failure."""
    area = st.empty()
    with area.container(border=True):
        # First, so the click is answered at once, even while the preload still holds the models.
        status = st.status("Loading the models…", expanded=True)
        # Clicking it reruns the script, which interrupts this run at its next status update (every
        # poll while it queues, every iteration while it decodes): specviz.gate frees its place and
        # nothing is stored, so the previous trace stays on show.
        st.button("Cancel this run", key=keys.CANCEL_RUN, on_click=_cancelled, icon=":material/close:")
        lead = shared_runs.SOLO
        try:
            with ErrorGuard(keys.RUN_ERROR, area) as guard:
                recording, lead = _shared_recording(settings, status)
                if recording is None:
                    trace, baseline, target, draft = _decode_with_progress(settings, status)
            if guard.failed:
                return
            area.empty()
            st.session_state.pop(keys.RUN_ERROR, None)
            if recording is not None:  # the same trace object, its timing pairs included
                source = f"run here, {shared_runs.made_words(recording)}"
                loaded = Loaded(recording.trace, recording.baseline, source, settings.run_key(), recording.timing, True)
                loaded.trace_id = recording.trace_id
                _store(loaded)
                _link_stored(loaded)
                return
            loaded = Loaded(trace, baseline, "run here", settings.run_key(), shared=lead is not shared_runs.SOLO)
            if baseline is not None:
                loaded.timing = _time_more_pairs(settings, target, draft, trace, baseline)
            recording = shared_runs.Recording(trace, baseline, loaded.timing, trace_id=lead.trace_id)
            lead.finish(recording)
            loaded.trace_id = recording.trace_id
            _store(loaded)
            shared_runs.save(trace_store.from_environment(), recording)  # for the other replicas, if any
            _link_stored(loaded)
        finally:
            lead.abandon()  # failed, cancelled or a closed tab: a session waiting for this run decodes it


def _link_stored(loaded: Loaded) -> None:
    """Put the stored run's id into the URL at once (the sidebar keeps it there on later reruns), so
    a student whose replica stops reconnects to another one with a link that reopens this run."""
    if loaded.trace_id:
        st.query_params["trace"] = loaded.trace_id


def _shared_recording(settings: Settings, status):
    """(recording, lead) from shared_runs: a recording of these exact settings and models (made
    earlier, or by another session decoding them now, which this waits for), or (None, lead): decode."""
    target_name, draft_name = settings.model_names()
    if not target_name:
        return None, shared_runs.SOLO  # _decode_with_progress says what is missing
    target = get_model(target_name, settings.dtype)
    draft = resolve_draft(target, draft_name)
    key = shared_runs.run_key(settings.run_key(), settings.baseline, target, draft)

    def on_wait() -> None:  # every poll: a closed tab or Cancel raises out of status.update here
        status.update(label="Another session is decoding these same settings: waiting for its recording…")

    recording, lead = shared_runs.RUNS.claim(key, on_wait)
    if lead is None:
        return recording, shared_runs.SOLO
    store = trace_store.from_environment()  # replicas: another one may have recorded these settings
    lead.trace_id = shared_runs.disk_id(settings.run_key(), settings.baseline, target, draft) if store else None
    if (recording := shared_runs.from_store(store, lead.trace_id)) is not None:
        lead.finish(recording)
        return recording, shared_runs.SOLO
    return None, lead


CANCELLED = "Run cancelled: it left the queue (or stopped decoding) and its place went to the next session."


def _cancelled() -> None:
    st.session_state[keys.RUN_ERROR] = CANCELLED  # app.py says it once, with "nothing was lost"


def _decode_with_progress(settings: Settings, status):
    """The run itself (and its baseline), streaming into the page: (trace, baseline, target, draft)."""
    from specviz.decoder import autoregressive_generate, speculative_generate
    from specviz.sameness import compare_runs

    target, draft = sidebar_pair(settings)
    gate = device_gate(str(target.device))
    gate.check_room(config.MAX_QUEUED_RUNS)  # a full queue refuses at once, never a long wait
    status.update(label="Decoding speculatively…")
    bar = st.progress(0.0, text="speculative decoding: starting")
    stream = st.empty()
    records: list[dict] = []

    def on_spec(pr) -> None:
        records.append(pr.record)
        bar.progress(
            pr.new_tokens / pr.max_new_tokens,
            text=f"speculative decoding: {pr.new_tokens}/{pr.max_new_tokens} tokens, iteration {pr.iteration}",
        )
        stream.html(render.token_stream_html(records, {"token_text": pr.token_text}))

    def on_wait(ahead: int) -> None:  # one decode per device at a time (specviz.gate)
        # Called every poll while queued; a closed tab or Cancel raises out of status.update here.
        words = place_words(ahead, gate.estimate_s(ahead))
        status.update(label=f"Waiting for the model: {words} behind other sessions' runs. Cancel frees your place.")

    kwargs = settings.decode_kwargs()
    kwargs["on_wait"] = on_wait
    trace = speculative_generate(settings.prompt, target=target, draft=draft, on_iteration=on_spec, **kwargs)
    baseline = None
    if settings.baseline:
        status.update(label="Decoding with the target alone (baseline)…")

        def on_base(pr) -> None:
            bar.progress(
                pr.new_tokens / pr.max_new_tokens,
                text=f"target alone (baseline): {pr.new_tokens}/{pr.max_new_tokens} tokens",
            )

        kwargs.pop("gamma")
        baseline = autoregressive_generate(settings.prompt, target=target, on_iteration=on_base, **kwargs)
        exact = target if target.dtype == "float32" else get_model(target.name, "float32")
        trace.extra["sameness"] = compare_runs(trace, baseline, exact).to_dict()
    status.update(label="Done", state="complete")
    return trace, baseline, target, draft


def _time_more_pairs(settings: Settings, target, draft, trace, baseline) -> background.TimingPairs:
    """The run is the first timed pair (specviz.speedup); the others run in the background on the
    same settings, traced as the first was, so every pair is timed alike."""
    speedup.start_timing(trace, baseline, streamed=True)  # the page drew its tokens as they came
    from specviz.decoder import autoregressive_generate, speculative_generate

    kwargs = settings.decode_kwargs()
    gamma = kwargs.pop("gamma")

    def run_speculative():
        return speculative_generate(settings.prompt, target=target, draft=draft, gamma=gamma, **kwargs)

    def run_target_alone():
        return autoregressive_generate(settings.prompt, target=target, **kwargs)

    return background.TimingPairs(
        trace, str(target.device), run_speculative, run_target_alone, wanted=background.session_alive()
    ).start()


def shipped_race() -> dict | None:
    """The recorded race of drafters, or None when this copy has none (or it cannot be read)."""
    try:
        data = json.loads(RACE_RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == "specviz.race/1" else None


# ----- opening traces ---------------------------------------------------------------------------


def open_trace(trace: Trace, baseline: Trace | None, source: str) -> list[str]:
    """Show a trace from a file or the gallery and set the sidebar to the settings that re-run it."""
    settings, messages = params.from_trace_config(trace.config, trace.prompt, baseline is not None)
    _store(Loaded(trace, baseline, source, settings.run_key() if not messages else None))
    apply_settings(settings)
    return messages


def read_uploads(files: list[tuple[str, bytes]]) -> tuple[Trace, Trace | None]:
    """One or two uploaded files -> (trace, baseline). Raises TraceError with a clear message."""
    if not files:
        raise TraceError("No file was uploaded.")
    if len(files) > 2:
        raise TraceError("Upload one trace, or a speculative trace and its baseline (two files).")
    traces = []
    for name, data in files:
        try:
            traces.append(Trace.from_json(data))
        except TraceError as exc:
            raise TraceError(f"{name}: {exc}") from None
    spec = [t for t in traces if t.mode == "speculative"]
    base = [t for t in traces if t.mode == "autoregressive"]
    if len(traces) == 2 and (len(spec) != 1 or len(base) != 1):
        raise TraceError("With two files, one must be a speculative trace and the other its target-only baseline.")
    if spec:
        return spec[0], base[0] if base else None
    return base[0], base[0]  # a baseline alone: show it as the trace and as its own baseline


@dataclass
class Example:
    name: str
    title: str
    note: str
    path: Path
    baseline_path: Path | None
    recorded_with: str = ""


def examples() -> list[Example]:
    """The gallery: assets/examples/<name>.json (+ <name>.baseline.json), titled in extra.example."""
    out = []
    for path in sorted(EXAMPLES_DIR.glob("*.json")):
        if path.name.endswith(".baseline.json"):
            continue
        meta = _example_meta(path, path.stat().st_mtime)
        base = path.with_name(path.stem + ".baseline.json")
        out.append(
            Example(
                path.stem,
                meta.get("title", path.stem),
                meta.get("note", ""),
                path,
                base if base.is_file() else None,
                meta.get("recorded_with", ""),
            )
        )
    return out


@st.cache_data(show_spinner=False)
def _example_meta(path: Path, mtime: float) -> dict:  # mtime: a re-recorded file is read again
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("extra", {}).get("example", {})
    except (OSError, ValueError):
        return {}


@st.cache_data(show_spinner=False, max_entries=32)
def _read_example(path: Path, mtime: float) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def open_example(example: Example) -> list[str]:
    trace = Trace.from_dict(_read_example(example.path, example.path.stat().st_mtime))
    baseline = None
    if example.baseline_path is not None:
        p = example.baseline_path
        baseline = Trace.from_dict(_read_example(p, p.stat().st_mtime))
    return open_trace(trace, baseline, f"example: {example.title}")


def _open_stored(trace_id: str) -> bool:
    """Open the run a `?trace=<id>` link names from the replicas' trace store (a reconnecting
    student's link carries it). False, with the reason said once above the page, when it cannot."""
    import time

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
    for ex in examples():
        meta = _read_example(ex.path, ex.path.stat().st_mtime)
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
    elif examples():
        try:
            open_example(examples()[0])  # settings moved on since the examples were recorded: show the first
        except TraceError:
            return
        st.rerun()  # draw the sidebar again, now with the example's settings
