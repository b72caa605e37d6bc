"""One decode at a time per device, first come first served, with the queue visible and bounded.

The app serves several browser sessions from one process and one set of cached models. Runs
never share caches or generators, but two decodes at once on one device only halve each
other's speed (and make timings meaningless), and tokenizers are not safe to use from two
threads at once. So each decode takes its device's gate.

Batched decodes are the exception (specviz.serving.batching): decodes of one target that ask to share
(`turn(share=batcher)`) hold the gate together, up to config.BATCH_MAX_SESSIONS, their target
passes run as one forward and their other work in turn under the batcher's compute lock (the
tokenizer included). A decode that does not ask still gets the device to itself.

A caller may wait `behind` (the app's target-alone baselines): every caller that is not behind
passes it while it waits, so a class's first tokens never wait for anyone's baseline.

A waiting caller is told how many decodes are ahead of it (`on_wait(ahead)`, called again every
poll while it waits), and can ask the gate for an estimate of its wait (`estimate_s`), made from
the durations of the last decodes it let through. A caller leaves the queue by raising from
`on_wait` (Streamlit does that to a session whose tab closed or whose user pressed Cancel): its
place is freed at once.

Admission is by the wait, not by a count (`turn(admission=Admission(...))`, a new run's): a run joins the
queue while its estimated wait is within a bound (the app's `config.MAX_WAIT_S`). A run that would
wait longer is deferred: it waits in the gate's waiting room, first come first served, is told its
place, the estimate and when it tries again, and joins the queue by itself as soon as its wait is
within the bound (no one presses Run again). Nobody already deferred is passed by a newcomer, and
the check and the queueing are one step, so a room never joins against one estimate. The hard bound
is a count of sessions, queued and deferred together (`config.GATE_QUEUE_MAX`): past it a new run is
refused at once with `QueueFullError`; a caller without admission (a run's baseline, once the run was
admitted) only past twice that, a safety net. A caller `behind` is passed only while it is
younger than `config.BEHIND_PATIENCE_S`, so a baseline is never passed indefinitely.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from specviz import config
from specviz.errors import SpecvizError

_gates: dict[str, DeviceGate] = {}
_gates_lock = threading.Lock()
# Called with the seconds each turn waited, as it starts (the app's /metrics: specviz_app/serving/server.py).
_wait_observers: list[Callable[[float], None]] = []
# Called with "deferred", "retry" or "refused" as admission decides (the same /metrics).
_admission_observers: list[Callable[[str], None]] = []


# How every refusal of a full queue begins, so a client (scripts/ws_load.py) tells a refusal from a failure.
BUSY = "The model is busy:"


class QueueFullError(SpecvizError):
    """Too many decodes already wait for the device; the caller was refused rather than queued."""


class DeviceGate:
    def __init__(self, limit: int = config.GATE_QUEUE_MAX, history: int = config.GATE_HISTORY) -> None:
        if limit < 1:
            raise ValueError(f"a gate must let at least one decode queue; got limit={limit!r}")
        self.limit = limit
        self._cond = threading.Condition()
        self._queue: deque[_Ticket] = deque()  # in arrival order (a caller behind may be passed: see turn)
        self._durations: deque[float] = deque(maxlen=history)  # seconds each recent turn was held
        self._room: deque[_Ticket] = deque()  # deferred runs, in arrival order (_admit)

    def waiting(self) -> int:
        """Decodes holding or waiting for this gate (the deferred ones not counted)."""
        with self._cond:
            return len(self._queue)

    def counts(self) -> tuple[int, int]:
        """(decodes holding the gate, decodes waiting for it), as the app's /metrics reports them."""
        with self._cond:
            holding = sum(t.started is not None for t in self._queue)
            return holding, len(self._queue) - holding

    def deferred(self) -> int:
        """Runs in the waiting room: their wait was past the bound, and they join the queue by themselves."""
        with self._cond:
            return len(self._room)

    def _admit(self, ticket: _Ticket, admission: Admission, poll_s: float) -> None:
        """Put a new run's ticket in the queue once its estimated wait is within the bound: at once
        when no run is deferred before it, else after waiting in the room (admission.on_deferred told
        every poll; it leaves by raising from it). The check and the queueing are one step under the
        lock, so a whole room never joins against one estimate. Past the hard bound: QueueFullError."""
        with self._cond:
            self._refuse_past_the_bound()
            if not self._room and self._fits(ticket, admission.max_wait_s):
                self._queue.append(ticket)
                return
            self._room.append(ticket)
        retry_s = config.ADMISSION_RETRY_S
        next_try = time.monotonic() + retry_s
        try:
            _tell(_admission_observers, "deferred")
            while True:
                with self._cond:  # checked at every wake: a place freeing wakes it at once
                    place, estimate = self._room.index(ticket) + 1, self._newcomer_estimate_s(ticket)
                    if place == 1 and self._fits(ticket, admission.max_wait_s):
                        self._room.remove(ticket)
                        self._queue.append(ticket)
                        self._cond.notify_all()  # the next deferred run is first now
                        return
                if admission.on_deferred is not None:
                    admission.on_deferred(place, estimate, max(0.0, next_try - time.monotonic()))
                if time.monotonic() >= next_try:  # the periodic try the run is told of, counted
                    next_try = time.monotonic() + retry_s
                    _tell(_admission_observers, "retry")
                with self._cond:
                    self._cond.wait(timeout=min(poll_s, max(0.01, next_try - time.monotonic())))
        except BaseException:  # left the room (a closed tab, Cancel) or an observer failed: its place freed
            with self._cond:
                if ticket in self._room:
                    self._room.remove(ticket)
                self._cond.notify_all()
            raise

    def _refuse_past_the_bound(self) -> None:
        """QueueFullError for a new run when the hard bound of sessions, queued and deferred, is
        reached (under the lock)."""
        held = len(self._queue) + len(self._room)
        if held >= self.limit:
            _tell(_admission_observers, "refused")
            raise QueueFullError(
                f"{BUSY} {held} runs are already queued or waiting, the most this server holds. Nothing "
                "was started. Try Run again in a few minutes, or open an example on the Traces page "
                "(examples need no model)."
            )

    def _fits(self, ticket: _Ticket, max_wait_s: float) -> bool:
        """Whether the ticket's estimated wait, were it queued now, is within max_wait_s (under the
        lock; no estimate before the first turn ended: it fits, and the hard bound still holds)."""
        estimate = self._newcomer_estimate_s(ticket)
        return estimate is None or estimate <= max_wait_s

    def _newcomer_estimate_s(self, ticket: _Ticket) -> float | None:
        """The estimated wait of `ticket` were it queued now (under the lock): it joins the holders
        when it shares their batch and a seat is free, else it waits behind every waiting caller it
        may not pass (a baseline past its patience included)."""
        holders = [t for t in self._queue if t.started is not None]
        waiting = sum(1 for t in self._queue if t.started is None and (not t.behind or t.out_of_patience()))
        joins = (
            waiting == 0
            and (not holders or (ticket.share is not None and all(t.share is ticket.share for t in holders)))
            and len(holders) < config.BATCH_MAX_SESSIONS
        )
        return self._estimate_locked(0 if joins else waiting + (1 if holders else 0))

    def typical_s(self) -> float | None:
        """The median duration of the recent turns, in seconds (None before the first one ended)."""
        with self._cond:
            return statistics.median(self._durations) if self._durations else None

    def estimate_s(self, ahead: int) -> float | None:
        """About how long a caller with `ahead` decodes before it waits: what the longest-held
        holder likely still needs, plus a typical turn for each round of the others. None without
        a history.

        A round is as wide as the holders now: one for a solo decode, several when batched decodes
        hold the gate together (a place frees as each of them ends, and the next in line takes
        it), so a queue behind a full batch moves that many at a time, not one. A typical turn is
        one decode's, measured as it ran (batched ones share the device, so theirs are longer)."""
        with self._cond:
            return self._estimate_locked(ahead)

    def _estimate_locked(self, ahead: int) -> float | None:
        typical = statistics.median(self._durations) if self._durations else None
        if typical is None or ahead <= 0:
            return None if typical is None else 0.0
        starts = [t.started for t in self._queue if t.started is not None]
        held = time.monotonic() - min(starts) if starts else 0.0
        width = max(1, len(starts))
        return max(0.0, typical - held) + ((ahead - 1) // width) * typical

    @contextmanager
    def turn(
        self,
        on_wait: Callable[[int], None] | None = None,
        poll_s: float = 0.5,
        share: object | None = None,
        behind: bool = False,
        admission: Admission | None = None,
    ) -> Iterator[None]:
        """Hold the gate for the body. on_wait(ahead) is called (outside the lock) while queued,
        at least every poll_s seconds, so a caller that wants to leave gets a chance to raise.
        share: None holds the gate alone; callers passing the same object (a batcher,
        specviz.serving.batching) may hold it together, up to config.BATCH_MAX_SESSIONS, still first come
        first served (a caller never passes one queued before it). behind: this caller lets every
        caller that is not behind pass it while it waits, even one that came later (the app's
        target-alone baselines, so no student's first tokens wait for another's baseline).
        admission: a new run's, admitted by its wait (see Admission); without it a caller is queued at
        once (a run's baseline, a timing pair), refused only past twice the hard bound, a safety net
        that admitted runs keep far below (each holds one place at a time)."""
        ticket = _Ticket(share, behind)
        if admission is not None:
            self._admit(ticket, admission, poll_s)
        else:
            with self._cond:
                if len(self._queue) >= 2 * self.limit:
                    raise QueueFullError(
                        f"{BUSY} {len(self._queue)} decodes are already queued for it, the most it takes. "
                        "Nothing was started; try again in a few minutes."
                    )
                self._queue.append(ticket)
        try:
            while True:
                with self._cond:
                    ahead = self._ahead(ticket)
                    if ahead == 0:
                        ticket.started = time.monotonic()
                        # A sharer queued behind this ticket may now join it: wake it now rather
                        # than at its next poll (half a second in the app, longer than a short run).
                        self._cond.notify_all()
                        break
                if on_wait is not None:
                    on_wait(ahead)
                with self._cond:
                    if self._ahead(ticket):
                        self._cond.wait(timeout=poll_s)
            for observe in _wait_observers:
                observe(ticket.started - ticket.queued)
            yield
        finally:
            # Also runs when a waiting caller is interrupted (a closed tab, Cancel): its place is freed.
            with self._cond:
                self._queue.remove(ticket)
                if ticket.started is not None:
                    self._durations.append(time.monotonic() - ticket.started)
                self._cond.notify_all()

    def _ahead(self, ticket: _Ticket) -> int:
        """0 when `ticket` may hold the gate now; else how many decodes are before it, the holders
        counting as one (so "1st in line" means next)."""
        queue = list(self._queue)
        index = queue.index(ticket)
        holders = [t for t in queue if t.started is not None and t is not ticket]  # behind ones can be passed
        # Waiting callers that go first: those queued before it (a caller not behind passes those
        # that are), and for a caller behind, those not behind queued after it too.
        behind = ticket.behind and not ticket.out_of_patience()
        waiting_before = sum(
            1 for t in queue[:index] if t.started is None and (behind or not t.behind or t.out_of_patience())
        )
        if behind:
            waiting_before += sum(1 for t in queue[index + 1 :] if t.started is None and not t.behind)
        if waiting_before == 0 and (
            not holders
            or (
                ticket.share is not None
                and all(t.share is ticket.share for t in holders)
                and len(holders) < config.BATCH_MAX_SESSIONS
            )
        ):
            return 0
        return waiting_before + (1 if holders else 0)


@dataclass(frozen=True)
class Admission:
    """How a new run is admitted (DeviceGate.turn's admission): it joins the queue while its estimated
    wait is within max_wait_s; else it is deferred, and on_deferred(place, estimate_s, next_try_s) is
    called every poll while it waits in the room (place 1 = the next to join; raise to leave)."""

    max_wait_s: float
    on_deferred: Callable[[int, float | None, float], None] | None = None


class _Ticket:
    """A place in a gate's queue."""

    def __init__(self, share: object | None, behind: bool = False):
        self.share = share  # None: holds the gate alone
        self.behind = behind  # lets callers that are not behind pass it while it waits
        self.queued = time.monotonic()  # when it joined the queue
        self.started: float | None = None  # when it got the gate

    def out_of_patience(self) -> bool:
        """A caller behind that has waited config.BEHIND_PATIENCE_S is passed no more (no starving)."""
        return self.behind and time.monotonic() - self.queued >= config.BEHIND_PATIENCE_S


def device_gate(device: str) -> DeviceGate:
    with _gates_lock:
        return _gates.setdefault(str(device), DeviceGate())


def all_gates() -> list[DeviceGate]:
    """Every device's gate made so far."""
    with _gates_lock:
        return list(_gates.values())


def observe_waits(observer: Callable[[float], None]) -> None:
    """Have observer(seconds) called with each turn's wait for its gate, as the turn starts (once for
    an observer added twice)."""
    with _gates_lock:
        if observer not in _wait_observers:
            _wait_observers.append(observer)


def observe_admission(observer: Callable[[str], None]) -> None:
    """Have observer(event) called as a run is deferred ("deferred"), tries again ("retry") or is
    refused at the hard bound ("refused"), once for an observer added twice."""
    with _gates_lock:
        if observer not in _admission_observers:
            _admission_observers.append(observer)


def _tell(observers: list, event: object) -> None:
    for observe in list(observers):
        observe(event)


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 3 -> "3rd", 11 -> "11th", 22 -> "22nd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def place_words(ahead: int, estimate_s: float | None) -> str:
    """What a waiting caller is told: "3rd in line, about 8 s" (ahead = decodes before it, the
    running one included, so "1st in line" means next)."""
    if estimate_s is None:
        return f"{ordinal(ahead)} in line (no estimate yet: no run has finished here)"
    return f"{ordinal(ahead)} in line, about {max(1, round(estimate_s))} s"
