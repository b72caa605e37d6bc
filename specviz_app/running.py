"""The Run button's decode: a shared recording when one exists, else the run with its progress
streamed into the page, its baseline, and the further timing pairs started in the background.

A run waits for the device in specviz.engine.gate's queue (its place and estimate on the status line); a
failed or cancelled run stores nothing, so the previous trace stays on show. The run and its
baseline decode batched (specviz.engine.batching): sessions running at once share their target passes.
The timing pairs decode solo, so the speedup a page shows never comes from a batched timing.
"""

from __future__ import annotations

import time

import streamlit as st

from specviz import config
from specviz.engine.gate import device_gate, place_words
from specviz.traces import speedup, trace_store
from specviz_app import background, keys, render, shared_runs
from specviz_app.loading import get_model, resolve_draft, sidebar_pair
from specviz_app.params import Settings
from specviz_app.session import ErrorGuard, Loaded, show


def run(settings: Settings) -> None:
    """Decode with the settings, streaming tokens into the page; keep the old trace on failure."""
    area = st.empty()
    with area.container(border=True):
        # First, so the click is answered at once, even while the preload still holds the models.
        status = st.status("Loading the models…", expanded=True)
        # Clicking it reruns the script, which interrupts this run at its next status update (every
        # poll while it queues, every redraw while it decodes): specviz.engine.gate frees its place and
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
                show(loaded)
                _link_stored(loaded)
                return
            loaded = Loaded(trace, baseline, "run here", settings.run_key(), shared=lead is not shared_runs.SOLO)
            if baseline is not None:
                loaded.timing = _time_more_pairs(settings, target, draft, trace, baseline)
            recording = shared_runs.Recording(trace, baseline, loaded.timing, trace_id=lead.trace_id)
            lead.finish(recording)
            loaded.trace_id = recording.trace_id
            show(loaded)
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
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.traces.sameness import compare_runs

    target, draft = sidebar_pair(settings)
    gate = device_gate(str(target.device))
    gate.check_room(config.MAX_QUEUED_RUNS)  # a full queue refuses at once, never a long wait
    status.update(label="Decoding speculatively…")
    bar = st.progress(0.0, text="speculative decoding: starting")
    stream = st.empty()
    records: list[dict] = []

    spec_redraw, base_redraw = _Redraw(), _Redraw()

    def on_spec(pr) -> None:
        records.append(pr.record)
        if not spec_redraw.due(pr):
            return
        bar.progress(
            pr.new_tokens / pr.max_new_tokens,
            text=f"speculative decoding: {pr.new_tokens}/{pr.max_new_tokens} tokens, iteration {pr.iteration}",
        )
        stream.html(render.token_stream_html(records, {"token_text": pr.token_text}, gamma=settings.gamma))

    def on_wait(ahead: int) -> None:  # one decode per device at a time (specviz.engine.gate)
        # Called every poll while queued; a closed tab or Cancel raises out of status.update here.
        words = place_words(ahead, gate.estimate_s(ahead))
        status.update(label=f"Waiting for the model: {words} behind other sessions' runs. Cancel frees your place.")

    kwargs = settings.decode_kwargs()
    kwargs["on_wait"] = on_wait
    # Batched: when other sessions decode this target too, their target passes run as one forward
    # (specviz.engine.batching), the tokens unchanged; a target that cannot batch decodes alone. Its timing
    # is then no solo run's, so the speedup comes from the solo pairs timed after (_time_more_pairs).
    kwargs["batched"] = True
    trace = speculative_generate(settings.prompt, target=target, draft=draft, on_iteration=on_spec, **kwargs)
    baseline = None
    if settings.baseline:
        status.update(label="Decoding with the target alone (baseline)…")

        def on_base(pr) -> None:
            if not base_redraw.due(pr):
                return
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


def _time_more_pairs(settings: Settings, target, draft, trace, baseline) -> background.TimingPairs:
    """The run is the first timed pair (specviz.traces.speedup); the others run in the background on the
    same settings, traced as the first was, so every pair is timed alike. They decode solo (no
    batched=True): when the run was batched, its pair is marked so and these alone give the speedup."""
    # streamed: the page drew its tokens as they came
    speedup.start_timing(trace, baseline, streamed=True, timed_seconds=background.timing_seconds())
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate

    kwargs = settings.decode_kwargs()
    gamma = kwargs.pop("gamma")

    def run_speculative():
        return speculative_generate(settings.prompt, target=target, draft=draft, gamma=gamma, **kwargs)

    def run_target_alone():
        return autoregressive_generate(settings.prompt, target=target, **kwargs)

    return background.TimingPairs(
        trace, str(target.device), run_speculative, run_target_alone, wanted=background.session_alive()
    ).start()
