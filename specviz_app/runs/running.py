"""The Run button's decode: a shared recording when one exists, else the run with its progress
streamed into the page, its baseline, and the further timing pairs started in the background.

One path: run_request reads the settings once and turns them into a RunRequest (the models loaded
through loading.load_pair, the run key, the decode's arguments with γ apart); everything after
(sharing, the decode, its baseline, the timing pairs, the page) takes that request and goes on.
preload_defaults, as the app opens, decodes a short RunRequest of the default settings.

A run waits for the device in specviz.serving.gate's queue (its place and estimate on the status line); a
failed or cancelled run stores nothing, so the previous trace stays on show. The run and its
baseline decode batched (specviz.serving.batching): sessions running at once share their target passes.
The timing pairs decode solo, so the speedup a page shows never comes from a batched timing.

Its words (status lines, progress, the queue's place, Cancel): the catalogue's section "running", in
the language on show. A run's source stays English ("run here": the pages test it; opening.source_words
says it in a language).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from specviz import config
from specviz.config import DecodeOptions
from specviz.engine.models import LoadedModel
from specviz.serving.gate import Admission, device_gate, ordinal
from specviz.serving.hooks import ServingHooks
from specviz.traces import metrics, speedup, trace_store
from specviz_app import keys, language, params, render
from specviz_app.params import Settings
from specviz_app.runs.loading import float32_of, load_pair, target_loaded
from specviz_app.serving import background, shared_runs
from specviz_app.session import ErrorGuard, Loaded, show

WARM_UP_TOKENS = 8  # the preload's first decode: long enough to reach the verification passes' shapes


@dataclass(frozen=True)
class RunRequest:
    """One Run, resolved once: what its run, its baseline and its timing pairs all decode from.

    γ stands apart from `sampling` (temperature, top-k, top-p, seed, max new tokens: what both
    decoders take), since only the speculative decode drafts."""

    prompt: str
    key: tuple  # Settings.run_key(): two requests with the same key give the same trace
    baseline: bool  # whether the target alone decodes beside the run
    target: LoadedModel
    draft: Any  # as the decoder takes it (loading.resolve_draft): a loaded model, or a strategy's name
    options: DecodeOptions  # γ, the sampling, the seed, the length: the same for every decode of the run
    reference: LoadedModel | None  # the target in float32, which the baseline's sameness check reads

    def speculative(self, **extra):
        """The speculative decode of this request (extra: on_iteration, and the hooks of a shared device)."""
        from specviz.decoding.decoder import speculative_generate

        return speculative_generate(self.prompt, target=self.target, draft=self.draft, options=self.options, **extra)

    def target_alone(self, **extra):
        """The baseline: the target decoding alone, with the same sampling and seed."""
        from specviz.decoding.decoder import autoregressive_generate

        return autoregressive_generate(self.prompt, target=self.target, options=self.options, **extra)


def run_request(settings: Settings) -> RunRequest:
    """The settings of one Run as it decodes, each read once: the names, the run key and the decode's
    arguments, then the models loaded (loading.load_pair's rule and message for a missing target),
    with the float32 reference a baseline's sameness check needs."""
    target_name, draft_name = settings.model_names()
    key = settings.run_key()
    target, draft = load_pair(target_name, draft_name, settings.dtype, settings.weights)
    reference = float32_of(target) if settings.baseline else None  # target itself when it is float32
    options = settings.decode_options()  # the target alone reads its sampling, seed and length
    return RunRequest(settings.prompt, key, settings.baseline, target, draft, options, reference)


def preload_defaults() -> None:
    """Load and warm the offline default pair (background.preload runs this as the app opens), and
    decode a few tokens with it: the first decode of a process pays for one-off set-up (the kernels'
    first calls at each shape: docs/benchmarks.md), which the first Run should not."""
    request = run_request(replace(params.DEFAULTS, max_new=WARM_UP_TOKENS))
    request.speculative()
    request.target_alone()


def run(settings: Settings) -> None:
    """Decode with the settings, streaming tokens into the page; keep the old trace on failure."""
    timer = metrics.RunTimer()  # the server's /metrics (specviz_app/serving/server.py)
    area, w = st.empty(), language.words("running")
    with area.container(border=True):
        # First, so the click is answered at once, even while the preload still holds the models.
        status = st.status(w["starting" if target_loaded(settings) else "loading_models"], expanded=True)
        # Clicking it reruns the script, which interrupts this run at its next status update (every
        # poll while it queues, every redraw while it decodes): specviz.serving.gate frees its place and
        # nothing is stored, so the previous trace stays on show.
        st.button(w["cancel"], key=keys.CANCEL_RUN, on_click=_cancelled, icon=":material/close:")
        lead = shared_runs.SOLO
        try:
            with ErrorGuard(keys.RUN_ERROR, area) as guard:
                request = run_request(settings)
                recording, lead = _shared_recording(request, status)
                if recording is None:
                    trace, baseline = _decode_with_progress(request, status, timer)
            if guard.failed:
                return
            area.empty()
            st.session_state.pop(keys.RUN_ERROR, None)
            if recording is None:  # this session's own run: recorded (its timing pairs started) and stored
                recording = _record(request, lead, trace, baseline)
                _show(request, recording, "run here", shared=lead is not shared_runs.SOLO)
                metrics.record_spec_decode(trace.iterations)
            else:  # the same trace object, its timing pairs included
                _show(request, recording, f"run here, {shared_runs.made_words(recording)}", shared=True)
            timer.finished()
            _link_stored(recording.trace_id)
        finally:
            lead.abandon()  # failed, cancelled or a closed tab: a session waiting for this run decodes it


def _record(request: RunRequest, lead, trace, baseline) -> shared_runs.Recording:
    """This session's run as a recording, its further timing pairs started (a baseline to time
    against), handed to the sessions waiting for it (lead) and written for the other replicas."""
    timing = _time_more_pairs(request, trace, baseline) if baseline is not None else None
    recording = shared_runs.Recording(trace, baseline, timing, trace_id=lead.trace_id)
    lead.finish(recording)
    shared_runs.save(trace_store.from_environment(), recording)  # a no-op without replicas' store
    return recording


def _show(request: RunRequest, recording: shared_runs.Recording, source: str, shared: bool) -> None:
    """Put the recording on show in this session (shared: its timing is the store's to stop)."""
    loaded = Loaded(recording.trace, recording.baseline, source, request.key, recording.timing, shared)
    loaded.trace_id = recording.trace_id
    show(loaded)


def _link_stored(trace_id: str | None) -> None:
    """Put the stored run's id into the URL at once (the sidebar keeps it there on later reruns), so
    a student whose replica stops reconnects to another one with a link that reopens this run."""
    if trace_id:
        st.query_params["trace"] = trace_id


def _shared_recording(request: RunRequest, status):
    """(recording, lead) from shared_runs: a recording of these exact settings and models (made
    earlier, or by another session decoding them now, which this waits for), or (None, lead): decode."""
    key = shared_runs.run_key(request.key, request.baseline, request.target, request.draft)
    waiting = language.words("running")["waiting_for_recording"]

    def on_wait() -> None:  # every poll: a closed tab or Cancel raises out of status.update here
        status.update(label=waiting)

    recording, lead = shared_runs.RUNS.claim(key, on_wait)
    if lead is None:
        return recording, shared_runs.SOLO
    store = trace_store.from_environment()  # replicas: another one may have recorded these settings
    if store:
        lead.trace_id = shared_runs.disk_id(request.key, request.baseline, request.target, request.draft)
    if (recording := shared_runs.from_store(store, lead.trace_id)) is not None:
        lead.finish(recording)
        return recording, shared_runs.SOLO
    return None, lead


def _cancelled() -> None:
    st.session_state[keys.RUN_ERROR] = language.words("running")[
        "cancelled"
    ]  # app.py says it once, with "nothing was lost"


def _place(ahead: int, estimate_s: float | None, w: dict[str, str]) -> str:
    """A waiting run's place in the queue: "3rd in line, about 8 s" (as specviz.serving.gate.place_words
    says it in English), in the language on show."""
    nth = ordinal(ahead) if language.current() == "en" else str(ahead)
    if estimate_s is None:
        return w["place_no_estimate"].format(nth=nth)
    return w["place_estimate"].format(nth=nth, s=max(1, round(estimate_s)))


def _deferred(place: int, estimate_s: float | None, next_try_s: float, w: dict[str, str]) -> str:
    """A deferred run's status: its place in the room and its next try, with the queue's estimated
    wait while that is past the bound (else the runs deferred before it are what it waits for)."""
    nth = ordinal(place) if language.current() == "en" else str(place)
    nxt = max(1, round(next_try_s))
    if estimate_s is None or estimate_s <= config.MAX_WAIT_S:
        return w["deferred_behind"].format(nth=nth, next=nxt)
    return w["deferred"].format(s=max(1, round(estimate_s)), bound=round(config.MAX_WAIT_S), nth=nth, next=nxt)


def _decode_with_progress(request: RunRequest, status, timer: metrics.RunTimer | None = None):
    """The run itself (and its baseline), streaming into the page: (trace, baseline or None)."""
    gate = device_gate(str(request.target.device))
    w = language.words("running")

    def on_deferred(place: int, estimate_s: float | None, next_try_s: float) -> None:
        # Its wait is past the bound: it waits in the gate's room and joins the queue by itself.
        # Called every poll; a closed tab or Cancel raises out of status.update here, freeing its place.
        status.update(label=_deferred(place, estimate_s, next_try_s, w))

    # Admitted by its wait (specviz.serving.gate); past the hard bound refused at once (QueueFullError).
    admission = Admission(config.MAX_WAIT_S, on_deferred)
    status.update(label=w["decoding"])
    bar = st.progress(0.0, text=w["decoding_starting"])
    stream = st.empty()
    records: list[dict] = []
    redraw = _Redraw()

    def on_spec(pr) -> None:
        records.append(pr.record)
        if not redraw.due(pr):
            return
        bar.progress(
            pr.new_tokens / pr.max_new_tokens,
            text=w["decoding_progress"].format(new=pr.new_tokens, most=pr.max_new_tokens, iteration=pr.iteration),
        )
        stream.html(render.token_stream_html(records, {"token_text": pr.token_text}, gamma=request.options.gamma))
        if timer is not None:
            timer.first_token()

    def on_wait(ahead: int) -> None:  # one decode per device at a time (specviz.serving.gate)
        # Called every poll while queued; a closed tab or Cancel raises out of status.update here.
        status.update(label=w["waiting"].format(place=_place(ahead, gate.estimate_s(ahead), w)))

    # Batched: when other sessions decode this target too, their target passes run as one forward
    # (specviz.serving.batching), the tokens unchanged; a target that cannot batch decodes alone. Its timing
    # is then no solo run's, so the speedup comes from the solo pairs timed after (_time_more_pairs).
    hooks = ServingHooks(on_wait=on_wait, batched=True, admission=admission)
    trace = request.speculative(on_iteration=on_spec, hooks=hooks)
    baseline = _baseline_with_progress(request, trace, status, bar, on_wait) if request.baseline else None
    status.update(label=w["done"], state="complete")
    return trace, baseline


def _baseline_with_progress(request: RunRequest, trace, status, bar, on_wait):
    """The target alone on the run's settings, batched and queued as the run was, its progress on the
    run's bar; the run's trace records whether its tokens are the float32 target's (sameness)."""
    from specviz.traces.sameness import compare_runs

    w = language.words("running")
    status.update(label=w["baseline"])
    redraw = _Redraw()

    def on_base(pr) -> None:
        if not redraw.due(pr):
            return
        bar.progress(
            pr.new_tokens / pr.max_new_tokens,
            text=w["baseline_progress"].format(new=pr.new_tokens, most=pr.max_new_tokens),
        )

    # Behind: other sessions' runs pass the baseline at the gate, so their first tokens never wait for it.
    shared = ServingHooks(on_wait=on_wait, batched=True, behind=True)  # every first run passes it in the queue
    baseline = request.target_alone(on_iteration=on_base, hooks=shared)
    trace.extra["sameness"] = compare_runs(trace, baseline, request.reference).to_dict()
    return baseline


class _Redraw:
    """Whether a decode's page is due a redraw after an iteration: the first, the last one of
    max_new_tokens, and otherwise at most every render.STREAM_REDRAW_S (a run ending early at the end
    of text is drawn whole by the page that follows)."""

    def __init__(self, clock=time.monotonic) -> None:
        self.clock, self.last = clock, float("-inf")

    def due(self, progress) -> bool:
        now = self.clock()
        if progress.new_tokens < progress.max_new_tokens and now - self.last < render.STREAM_REDRAW_S:
            return False
        self.last = now
        return True


def _time_more_pairs(request: RunRequest, trace, baseline) -> background.TimingPairs | None:
    """The run is the first timed pair (specviz.traces.speedup); the others run in the background on the
    same request, traced as the first was, so every pair is timed alike. They decode solo (no
    batched=True): when the run was batched, its pair is marked so and these alone give the speedup.
    None when the run's own pair is all it wants (a server with SPECVIZ_TIMING_SECONDS=0)."""
    # streamed: the page drew its tokens as they came
    timing = speedup.start_timing(trace, baseline, streamed=True, timed_seconds=background.timing_seconds())
    if len(speedup.counted_pairs(timing["pairs"])) >= timing["wanted"]:
        return None
    return background.TimingPairs(
        trace, str(request.target.device), request.speculative, request.target_alone, wanted=background.session_alive()
    ).start()
