"""Work the app does off the script thread, so no page waits for it.

- `preload()`: the offline default models start loading when the server's first page opens, so
  the first Run finds them ready instead of spending its first seconds loading.
- `TimingPairs`: after a run, the same settings are timed again as interleaved pairs
  (specviz.traces.speedup) while the student reads, by one worker thread for all runs; the pairs are
  written into the run's trace as they come, and the page's timing line (render._timing_status)
  shows how many are in. It counts the pairs that count (speedup.counted_pairs, the run's own
  first pair among them), and when the timing ends, `wanted` becomes what came in: the count the
  speed numbers show (speedup.figure_pairs), so the line's "k of N" ends at the result's N.

A page drawn in this server while a pair runs stalls it (the script run takes Python's lock and a
core from the decode being timed), so `page_drawing` marks every script run, the timing worker
starts a pair when none is running, and a pair that met one is marked disturbed and timed again
(specviz.traces.speedup), at most as many times as the run wants pairs; then the disturbed ones count
(speedup.keep_disturbed), so the run ends with the pairs its timing line counted towards.

The extra pairs are low priority: each waits until no other session's decode is queued at the
device gate (specviz.serving.gate), so a class's first runs are never held up by anyone's timing. Batched
runs holding the gate together count as queued, so the pairs wait for the last of them. And the
pairs decode solo, never batched: a run's own decode is batched with other sessions' (so its
first pair never counts, specviz.traces.speedup), and these are the pairs its speedup comes from.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import math
import os
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from specviz.config import SPEEDUP_TIMED_SECONDS
from specviz.serving.gate import device_gate
from specviz.traces import speedup

_preload_lock = threading.Lock()
_preload_thread: threading.Thread | None = None
# SPECVIZ_TIMING_SECONDS=s: about how many seconds of timing pairs a run gets (speedup.pairs_wanted,
# config.SPEEDUP_TIMED_SECONDS by default; any s > 0 gives at least SPEEDUP_MIN_PAIRS; 0 times no pair
# beyond the run's own, or one solo pair when the run's own was batched). For a server whose CPU is
# wanted elsewhere: the tests use 0 (tests/conftest.py), and 1 (the fewest pairs) where they check
# the pairs themselves (tests/browser/test_trust.py).
TIMING_SECONDS_ENV = "SPECVIZ_TIMING_SECONDS"
IDLE_POLL_S = 0.2  # how often a waiting timing pair looks at the gate again
SETTLE_S = 1.0  # the pause before a run's further pairs, while its page is drawn
# Imported on the page's own thread before the preload starts: both the pages (Streamlit's tables,
# Plotly) and torch import them, and two threads importing one module at once can see it half
# initialised ("partially initialized module 'numpy'").
SHARED_IMPORTS = ("numpy", "pandas", "pyarrow", "plotly.graph_objects")


def preload(load: Callable[[], None]) -> None:
    """Run `load` (the default models into the cache) once per server process, in a thread."""
    global _preload_thread
    with _preload_lock:
        if _preload_thread is not None:
            return
        for name in SHARED_IMPORTS:
            importlib.import_module(name)
        # Not a daemon: Python waits for it before exiting, instead of killing it inside a torch call
        # (which aborts the process: "terminate called without an active exception"). It is short.
        _preload_thread = threading.Thread(target=_quietly(load), name="specviz-preload", daemon=False)
        # The opening session's context, so Streamlit's model cache works from this thread as from a page.
        add_script_run_ctx(_preload_thread, get_script_run_ctx())
        _preload_thread.start()


def timing_seconds() -> float:
    """The seconds of timing a run gets: SPECVIZ_TIMING_SECONDS when set, else the default."""
    return _timing_seconds_from(os.environ.get(TIMING_SECONDS_ENV, "").strip())


@functools.lru_cache(maxsize=4)  # the server's log says once what is wrong with a value
def _timing_seconds_from(value: str) -> float:
    try:
        seconds = float(value) if value else SPEEDUP_TIMED_SECONDS
    except ValueError:
        seconds = -1.0
    if math.isfinite(seconds) and seconds >= 0:
        return seconds
    print(
        f"{TIMING_SECONDS_ENV}={value!r} is not a number of seconds >= 0: the app times "
        f"{SPEEDUP_TIMED_SECONDS:g} s of pairs per run. Unset it, or set it to e.g. 1 (the fewest pairs) "
        "or 0 (no pair beyond the run's own).",
        file=sys.stderr,
    )
    return SPEEDUP_TIMED_SECONDS


def session_alive() -> Callable[[], bool]:
    """A check that the calling browser session is still open (always True outside a server)."""
    from streamlit.runtime import Runtime

    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return lambda: True
    session_id = ctx.session_id
    return lambda: Runtime.exists() and Runtime.instance().is_active_session(session_id)


def preload_running() -> bool:
    """Whether the default models are being loaded now (the server's /healthz: specviz_app/serving/health.py)."""
    thread = _preload_thread
    return thread is not None and thread.is_alive()


def wait_for_preload() -> None:
    """Block until the preload is done (at once if it is, or never started). Every run waits here
    first: it needs those models anyway, and it must not import torch while the preload does."""
    thread = _preload_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def _quietly(load: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            load()
        except Exception:  # noqa: BLE001 - the first Run loads again and shows the error in words
            pass

    return run


class PageActivity:
    """The script runs (pages and fragments) in progress in this server, and how many have begun."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self._begun = 0

    @contextmanager
    def drawing(self) -> Iterator[None]:
        with self._changed:
            self._running += 1
            self._begun += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def wait_until_idle(self, timeout: float) -> int:
        """Wait (at most `timeout` s) until no script runs; return the count begun, for `quiet_since`."""
        with self._changed:
            self._changed.wait_for(lambda: self._running == 0, timeout)
            return self._begun

    def quiet_since(self, begun: int) -> bool:
        """Whether no script ran since wait_until_idle returned `begun`."""
        with self._changed:
            return self._running == 0 and self._begun == begun


PAGE_ACTIVITY = PageActivity()
QUIET_WAIT_S = 5.0  # the longest a timing pair waits for the pages' script runs to end


def page_drawing(draw: Callable) -> Callable:
    """Mark a fragment's reruns as script runs (the main script uses PAGE_ACTIVITY.drawing)."""

    @functools.wraps(draw)
    def marked(*args, **kwargs):
        with PAGE_ACTIVITY.drawing():
            return draw(*args, **kwargs)

    return marked


_live: weakref.WeakSet[TimingPairs] = weakref.WeakSet()
_exit_hook = False  # stop_all is registered with atexit
_jobs: queue.Queue[TimingPairs] = queue.Queue()
_worker: threading.Thread | None = None
_worker_lock = threading.Lock()


def stop_all() -> None:
    """Stop every run's timing and let the decode in progress finish, and wait for the preload: a
    thread killed inside a torch call at exit aborts the whole process ("terminate called without an
    active exception"). atexit runs it, registered at the first start, after torch and its libraries
    registered their own exit handlers, so that it runs before them (the last registered runs first)."""
    for timing in list(_live):
        timing.stop()
    for timing in list(_live):
        timing.join(EXIT_JOIN_S)
    wait_for_preload()


EXIT_JOIN_S = 60.0  # the longest the decode in progress may take to finish at exit


def _work() -> None:
    """The one thread that times every run's further pairs, one run after another. One thread for
    all: torch's CPU thread team belongs to the thread that calls it, and a new thread per run gave
    each run's pairs its own systematic offset (identical runs read far apart: docs/benchmarks.md,
    "Figures once kept in code comments", "The speedup's pairs")."""
    while True:
        _jobs.get().run_here()


class TimingPairs:
    """The further timed pairs of one run, appended to `trace.extra["timing"]["pairs"]`.

    `run_speculative` and `run_target_alone` decode the run's settings once each and return their
    Trace. Stops early on `stop()` (a new run replaced this one), when `wanted()` turns False (the
    browser session that asked for it has closed: nobody is left to read the pairs), or on an error
    (the pairs already in stay; the page shows them)."""

    def __init__(
        self,
        trace,
        device: str,
        run_speculative: Callable,
        run_target_alone: Callable,
        wanted: Callable[[], bool] = lambda: True,
    ):
        self.trace, self.device = trace, device
        self.run_speculative, self.run_target_alone = run_speculative, run_target_alone
        self.wanted = wanted
        self._stop = threading.Event()
        self._done = threading.Event()

    def start(self) -> TimingPairs:
        global _exit_hook, _worker
        with _worker_lock:
            if not _exit_hook:
                atexit.register(stop_all)
                _exit_hook = True
            if _worker is None:
                _worker = threading.Thread(target=_work, name="specviz-timing", daemon=True)
                _worker.start()
        _live.add(self)
        _jobs.put(self)
        return self

    def join(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    def stop(self) -> None:
        self._stop.set()

    def running(self) -> bool:
        """Queued or timing: its pairs are still to come."""
        return not self._done.is_set()

    def run_here(self) -> None:
        timing = self.trace.extra["timing"]
        try:
            self._stop.wait(SETTLE_S)  # the page draws the finished run first; timing beside it is noise
            # "wanted" counts solo, undisturbed pairs: a batched first pair (the app's run decodes
            # batched) or a disturbed one takes no place, so the run still gets its full count of
            # pairs a speedup may come from; it stops after `wanted` disturbed ones, so a busy server ends.
            disturbed, most_disturbed = 0, timing["wanted"]
            while len(speedup.counted_pairs(timing["pairs"])) < timing["wanted"] and not self._stop.is_set():
                self._wait_for_idle_gate()
                if self._stop.is_set() or not self.wanted():
                    return
                begun = PAGE_ACTIVITY.wait_until_idle(QUIET_WAIT_S)
                pair = speedup.time_pair(
                    self.run_speculative,
                    self.run_target_alone,
                    len(timing["pairs"]),
                    traced=True,
                    disturbed=lambda begun=begun: not PAGE_ACTIVITY.quiet_since(begun),
                )
                if self._stop.is_set():
                    return
                timing["pairs"].append(pair)
                disturbed += pair["disturbed"]
                if disturbed >= most_disturbed:
                    # A busy machine: pairs longer than the pages' poll always meet one. Count the
                    # disturbed ones rather than end with fewer pairs than the page said it would.
                    speedup.keep_disturbed(timing)
                    return
        except Exception as exc:  # noqa: BLE001 - a failed extra pair must not cost the run on show
            timing["stopped"] = f"{type(exc).__name__}: {exc}"
        finally:
            # What is in is the run's timing now (normally all it wanted).
            timing["wanted"] = len(speedup.counted_pairs(timing["pairs"]))
            self._done.set()

    def _wait_for_idle_gate(self) -> None:
        gate = device_gate(self.device)
        while gate.waiting() > 0 and not self._stop.is_set():
            time.sleep(IDLE_POLL_S)
