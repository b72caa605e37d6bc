"""Batched verification across sessions: several decodes' target passes run as one forward.

On the CPU a target pass is memory-bound: each linear streams its weights for one row or for
twenty at nearly the same cost. So when several sessions decode the same target at once, their
passes run together, as vLLM's continuous batching does: one `LeanLlama.forward_many` over every
waiting decode's new tokens, each with its own KV cache, draft length and tree mask.

Who runs what. Each decode runs in its own thread and joins the target's `VerifyBatcher` for its
run (`seat`). It drafts, verifies and records as a solo run does, with its own generator, caches
and drafter, so its random draws are a solo run's draws. Only its target pass goes through the
batcher (`Seat.forward`): it submits the request and waits; the pass runs as soon as every
joined decode has submitted, as vLLM's scheduler steps every running sequence at once. The waiting
decode that finds the pass due runs it, holding the compute lock, over every request pending by
then (no driver thread to start and stop), and hands each its results. The decodes that have not
submitted yet are drafting, one after another under the compute lock, or waiting for it: each
submission is progress, so the pass waits while they keep coming. Only when none has come for
config.BATCH_WINDOW_S (a decode stalled outside the lock) does the pass run without the stragglers.
The window once counted from the oldest request instead: thirty decodes drafting in turn, a few ms
each, then cut every pass down to the two or three that had submitted within it.

One compute lock per batcher: torch runs in one decode's thread at a time. On a small CPU,
several threads each running torch's intra-op threads only fight over the cores (OpenMP
oversubscription), so a decode holds the lock for all its work and lets go of it only while it
waits for a pass.

What stays exact. A decode's tokens and every recorded decision (drafts, r, accept/reject,
corrections) are what its solo run with the same seed gives: the same draws in the same order
from its own generator, on p that differs from the solo p at most in the last bits a linear's
kernel rounds differently for another number of rows (none with specviz.engine.packing's packed or
native kernels, nor with the native step that runs the default target's layers, specviz.engine.native_step;
eager float32 matmuls may, and so may a measured choice of packed1 for one row beside
packed for several, specviz.engine.kernels: at a float32 near-tie a greedy token could then differ, as
between any two kernels). Its timings are not a solo run's: a verify phase includes
waiting for the others. A batched trace says so (config.batched, extra.batch) and
specviz.traces.speedup never figures a speedup from it.

`timed()` collects every pass run while its body runs (requests, rows, seconds, whether a prompt's
first pass was among them): the Serving lab's measure of what a pass costs per row
(specviz.labs.serving); nothing is kept outside it, so a long-running server grows no log.

Only targets with the lean forward (a Llama-family target on the CPU: `LoadedModel.lean`) batch;
`batcher_for` gives None for any other, and its decodes take the device gate one at a time.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from specviz import config
from specviz.engine.lean_llama import LeanLlama, LeanRequest

_batchers: weakref.WeakKeyDictionary[LeanLlama, VerifyBatcher] = weakref.WeakKeyDictionary()
_batchers_lock = threading.Lock()


def batcher_for(target) -> VerifyBatcher | None:
    """The one batcher of a loaded target (specviz.engine.models.LoadedModel), or None when it has no
    lean forward to batch."""
    if target.lean is None:
        return None
    with _batchers_lock:
        if target.lean not in _batchers:
            _batchers[target.lean] = VerifyBatcher(target.lean)
        return _batchers[target.lean]


@dataclass(frozen=True)
class PassTiming:
    """One pass, as `VerifyBatcher.timed` records it."""

    requests: int  # decodes served
    rows: int  # token rows through the linears (every request's new tokens)
    seconds: float  # forward_many alone, no waiting
    prefill: bool  # some request's cache was empty: a prompt's first pass, its rows the prompt's


@dataclass
class _Slot:
    """One submitted request and, once its pass ran, its result."""

    request: LeanRequest
    submitted: float  # time.monotonic() when submitted
    result: tuple[torch.Tensor, torch.Tensor | None] | None = None
    error: BaseException | None = None
    sessions: int = 0  # requests in the pass that served it
    done: bool = False


class VerifyBatcher:
    """Runs the target passes of the decodes joined to it, several in one forward."""

    def __init__(
        self, lean: LeanLlama, window_s: float = config.BATCH_WINDOW_S, max_sessions: int = config.BATCH_MAX_SESSIONS
    ):
        self.lean = lean
        self.window_s, self.max_sessions = window_s, max_sessions
        self.compute = threading.Lock()  # held by the one thread running torch (see the module docstring)
        self._cond = threading.Condition()
        self._joined = 0  # decodes seated
        self._pending: list[_Slot] = []  # submitted, not yet in a pass (oldest first)
        self._in_flight = 0  # requests in the pass now running
        self._progress = time.monotonic()  # the last submission, pass, or decode seated or leaving
        self.pass_sizes: list[int] = []  # requests per pass, for the tests and the curious
        self._timed: list[list[PassTiming]] = []  # the open timed() logs

    @contextmanager
    def seat(self) -> Iterator[Seat]:
        """Join for one decode: the body holds the compute lock, except while it waits for a pass."""
        with self._cond:
            if self._joined >= self.max_sessions:
                raise RuntimeError(f"a batcher seats at most {self.max_sessions} decodes (the gate bounds them)")
            self._joined += 1
            self._progress = time.monotonic()
        try:
            self.compute.acquire()
        except BaseException:  # interrupted while waiting for the lock: a seat left taken would
            self._leave()  # make every later pass wait out the window for it
            raise
        try:
            yield Seat(self)
        finally:
            # Leave before letting go of the lock: a waiter that takes the lock next must not count
            # this decode as one still drafting, nor find the last progress stale.
            self._leave()
            self.compute.release()

    def _leave(self) -> None:
        with self._cond:
            self._joined -= 1
            self._progress = time.monotonic()
            self._cond.notify_all()  # the others may now all have submitted

    @contextmanager
    def timed(self) -> Iterator[list[PassTiming]]:
        """A list that gets every pass run while the body runs (see PassTiming)."""
        log: list[PassTiming] = []
        with self._cond:
            self._timed.append(log)
        try:
            yield log
        finally:
            with self._cond:
                self._timed = [other for other in self._timed if other is not log]  # by identity: logs may be equal

    def run(self, request: LeanRequest) -> _Slot:
        """Submit one request (holding the compute lock) and return once a pass has served it,
        holding the lock again."""
        slot = _Slot(request, time.monotonic())
        with self._cond:
            self._pending.append(slot)
            self._progress = slot.submitted
            self._cond.notify_all()
        try:
            while not slot.done:
                if self._due():
                    self._run_pass()
                    continue
                self.compute.release()  # let the others draft while this one waits
                try:
                    with self._cond:
                        self._cond.wait_for(lambda: slot.done or self._due(), timeout=self._time_left())
                finally:
                    self.compute.acquire()
        except BaseException:  # interrupted: a request left pending would count as submitted for ever
            with self._cond:
                self._pending = [other for other in self._pending if other is not slot]  # by identity
            raise
        if slot.error is not None:
            raise slot.error
        return slot

    def _due(self) -> bool:
        """Whether the pending requests should run now: every seated decode has submitted (or is in
        the pass running), the batch is full, or nothing has moved for the window (a stalled decode)."""
        with self._cond:
            if not self._pending:
                return False
            waiting = len(self._pending) + self._in_flight
            full = len(self._pending) >= self.max_sessions
            stalled = time.monotonic() - self._progress >= self.window_s
            return waiting >= self._joined or full or stalled

    def _time_left(self) -> float:
        """Seconds until the window since the last progress ends (a poll when nothing is pending)."""
        with self._cond:
            if not self._pending:
                return 0.1
            return max(0.0, self._progress + self.window_s - time.monotonic())

    def _run_pass(self) -> None:
        """One forward over the oldest pending requests; called holding the compute lock."""
        with self._cond:
            batch, self._pending = self._pending[: self.max_sessions], self._pending[self.max_sessions :]
            self._in_flight += len(batch)
        prefill = any(slot.request.cache.length == 0 for slot in batch)
        started = time.perf_counter()
        try:
            # Prompts' shared beginnings computed once (a class's prefill): in passes shared by several
            # decodes only, whose timings no speedup reads (speedup.was_batched), so a timed pair never
            # reuses the prompt its partner just computed, even where a lone session goes through here.
            requests = [slot.request for slot in batch]
            results = self.lean.forward_many(requests, reuse_prefixes=len(requests) > 1)
        except BaseException as exc:  # every decode of the pass sees the failure, not only this one
            results, error = [None] * len(batch), exc
        else:
            error = None
        seconds = time.perf_counter() - started
        with self._cond:
            for slot, result in zip(batch, results, strict=True):
                slot.result, slot.error, slot.sessions, slot.done = result, error, len(batch), True
            self._in_flight -= len(batch)
            self._progress = time.monotonic()
            self.pass_sizes.append(len(batch))
            if self._timed:
                rows = sum(int(slot.request.input_ids.shape[0]) for slot in batch)
                timing = PassTiming(len(batch), rows, seconds, prefill)
                for log in self._timed:
                    log.append(timing)
            self._cond.notify_all()


class Seat:
    """One decode's place at a batcher: its target passes, and the most sessions any of them shared."""

    def __init__(self, batcher: VerifyBatcher):
        self.batcher = batcher
        self.most_sessions = 0

    def forward(self, request: LeanRequest) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What LeanLlama.forward gives for this request, from a pass shared with the others."""
        slot = self.batcher.run(request)
        self.most_sessions = max(self.most_sessions, slot.sessions)
        return slot.result
