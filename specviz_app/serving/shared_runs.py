"""One run, many viewers: sessions asking for identical settings share one decode and its recording.

A class opening the teacher's link would otherwise run the same decode thirty times, one after the
other (specviz.serving.gate). Here the first session to ask for a key leads: it decodes. Sessions asking
for the same key meanwhile follow: they wait for the leader's recording instead of queueing a decode
of their own, and sessions asking later get the recording at once. A recording is the run's trace
and baseline, and the TimingPairs that keep timing that same trace (so a viewer sees the pairs come
in, and nobody starts a second timing thread for it), stamped with when it was made.

The key is everything a trace depends on: the settings' run_key, whether a baseline is run, and the
loaded models themselves (the object, so its dtype and the kernels chosen at load), so a reloaded
model never serves a recording made with the one it replaced; recordings of a replaced model are
dropped. Memory is bounded: at most MAX_RECORDINGS are kept, the oldest evicted first. A recording's
timing pairs run until it leaves the store (not until its first viewer moves on, as a session's
own run's did before: others may still be watching them come in).

With several replicas (specviz_app/serving/replicas.py) the finished recordings are also written to the
trace store they share (specviz.traces.trace_store, under `disk_id`), so a replica reuses what another
recorded, and a reconnecting student's `?trace=<id>` link opens it on any of them.

No streamlit here: the app's running.run drives it, the tests drive it from threads.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from specviz.errors import TraceError
from specviz.traces import trace_store

# Recordings kept for reuse. A long app run's trace and baseline are at most a few megabytes, so this
# bounds the store in the worst case, and a class's short runs take far less (docs/benchmarks.md,
# "Figures once kept in code comments", "Memory bounds").
MAX_RECORDINGS = 32


@dataclass
class Recording:
    """A finished run that other sessions may show: the same objects, never a copy."""

    trace: Any
    baseline: Any
    timing: Any = None  # the background.TimingPairs timing this trace, or None
    made_at: float = field(default_factory=time.time)  # seconds since the epoch, when it finished
    trace_id: str | None = None  # its id in the replicas' trace store (specviz.traces.trace_store), if any


def model_stamp(model) -> tuple:
    """What identifies a loaded model for sharing: its name, dtype and the object itself (whose
    kernels were chosen when it loaded). A draft given by name (n-gram, head) is its name."""
    if isinstance(model, str) or model is None:
        return ("by-name", model)
    return (model.name, model.dtype, id(model.model))


def run_key(settings_key: tuple, baseline: bool, target, draft) -> tuple:
    return (settings_key, bool(baseline), model_stamp(target), model_stamp(draft))


class _Flight:
    """A decode in progress that followers wait for."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.recording: Recording | None = None  # None once done: the leader failed or was cancelled


class SharedRuns:
    def __init__(self, max_recordings: int = MAX_RECORDINGS) -> None:
        if max_recordings < 1:
            raise ValueError(f"keep at least one recording; got max_recordings={max_recordings!r}")
        self.max_recordings = max_recordings
        self._lock = threading.Lock()
        self._recordings: OrderedDict[Hashable, Recording] = OrderedDict()  # oldest first
        self._flights: dict[Hashable, _Flight] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._recordings)

    def get(self, key: Hashable) -> Recording | None:
        with self._lock:
            return self._recordings.get(key)

    def claim(self, key: Hashable, on_wait: Callable[[], None] | None = None, poll_s: float = 0.5):
        """(recording, None) when the key was recorded (at once, or after waiting for the session
        decoding it; on_wait() is called every poll_s meanwhile, so a closed tab can raise out of
        it), else (None, lead): the caller decodes, then calls lead.finish(recording) or, on any
        failure, lead.abandon() (then a follower takes over the lead)."""
        while True:
            with self._lock:
                if key in self._recordings:
                    return self._recordings[key], None
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = _Flight()
                    return None, _Lead(self, key, flight)
            while not flight.done.wait(poll_s):
                if on_wait is not None:
                    on_wait()
            if flight.recording is not None:
                return flight.recording, None
            # The leader failed or was cancelled: loop, and lead (or follow a new leader).

    def _finish(self, key: Hashable, flight: _Flight, recording: Recording | None) -> None:
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if recording is not None:
                self._drop_replaced_models(key)
                self._recordings[key] = recording
                self._recordings.move_to_end(key)
                while len(self._recordings) > self.max_recordings:
                    _retire(self._recordings.popitem(last=False)[1])  # the oldest first
            flight.recording = recording
            flight.done.set()

    def _drop_replaced_models(self, key: Hashable) -> None:
        """Recordings made with an earlier load of one of this key's models (same name and dtype,
        another object: the model cache reloaded it) can no longer be asked for: free them."""
        fresh = {stamp[:2]: stamp for stamp in key[2:] if stamp[0] != "by-name"}
        for old in list(self._recordings):
            for stamp in old[2:]:
                if stamp[0] != "by-name" and stamp[:2] in fresh and fresh[stamp[:2]] != stamp:
                    _retire(self._recordings.pop(old))
                    break

    def clear(self) -> None:
        """Forget every recording (decodes in flight still finish for their followers)."""
        with self._lock:
            for recording in self._recordings.values():
                _retire(recording)
            self._recordings.clear()


def _retire(recording: Recording) -> None:
    """A recording leaves the store: its further timing pairs stop (the pairs already in stay), as a
    session's own run's did when it showed another trace; a page still showing it keeps what is in."""
    if recording.timing is not None:
        recording.timing.stop()


class _Lead:
    """The leader's duty: finish(recording) when its decode is done, else abandon()."""

    def __init__(self, runs: SharedRuns | None, key: Hashable, flight: _Flight | None) -> None:
        self._runs, self._key, self._flight = runs, key, flight
        self.trace_id: str | None = None  # where the run goes in the replicas' trace store

    def finish(self, recording: Recording) -> None:
        if self._runs is not None:
            self._runs._finish(self._key, self._flight, recording)

    def abandon(self) -> None:
        if self._runs is not None and not self._flight.done.is_set():
            self._runs._finish(self._key, self._flight, None)


def disk_id(settings_key: tuple, baseline: bool, target, draft) -> str:
    """The run's id in the trace store: like run_key, but the same in every replica, so models are
    named by name, dtype and chosen kernels (one machine's replicas choose alike) instead of object."""

    def named(model):
        if isinstance(model, str) or model is None:
            return model
        return [model.name, model.dtype, getattr(model, "kernels", None)]

    return trace_store.run_id([list(settings_key), bool(baseline), named(target), named(draft)])


def from_store(store, trace_id: str) -> Recording | None:
    """The recording another replica (or this one, before a restart) wrote, or None."""
    if store is None or not store.has(trace_id):
        return None
    try:
        trace, baseline, written = store.get(trace_id)
    except TraceError:
        return None  # a damaged file: decode again, and the new run overwrites it
    return Recording(trace, baseline, None, written, trace_id)


def save(store, recording: Recording) -> None:
    """Write the recording to the store now and, once its timing pairs are all in, once more (a
    reconnecting student then gets the run's full timing)."""
    if store is None or recording.trace_id is None:
        return
    store.put(recording.trace_id, recording.trace, recording.baseline)
    timing = recording.timing
    if timing is not None and timing.running():

        def rewrite() -> None:
            timing.join()
            try:
                store.put(recording.trace_id, recording.trace, recording.baseline)
            except OSError:
                pass  # the first write stands; the pairs it lacks are only more timing

        threading.Thread(target=rewrite, name="specviz-store-timing", daemon=True).start()


SOLO = _Lead(None, None, None)  # a lead that shares nothing (a run whose models could not be named)
RUNS = SharedRuns()  # the server process's one store (every session of this replica shares it)


def made_words(recording: Recording) -> str:
    """'shared recording made at 14:05:09 UTC' for the page's 'Showing:' line."""
    return "shared recording made at " + time.strftime("%H:%M:%S UTC", time.gmtime(recording.made_at))
