"""Admission by the wait (specviz.serving.gate.DeviceGate.admit): a run joins the queue while its
estimated wait is within the bound; past it the run is deferred, told its place, and joins by itself
in arrival order; past the hard bound it is refused at once; a baseline is not passed for ever."""

from __future__ import annotations

import threading

import pytest

from conftest import wait_for
from specviz import config
from specviz.serving import gate as gate_module
from specviz.serving.gate import DeviceGate, QueueFullError

pytestmark = pytest.mark.quick


def _hold(gate: DeviceGate, share: object | None = None):
    """A thread holding a turn at the gate until the returned event is set."""
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gate.turn(share=share):
            holding.set()
            release.wait(120)  # bounds a hang only: the test releases it

    th = threading.Thread(target=holder)
    th.start()
    assert holding.wait(10)
    return release, th


def _with_history(gate: DeviceGate, turn_s: float) -> None:
    """Give the gate a history of turns of turn_s seconds (what its estimates are made from)."""
    for _ in range(3):
        gate._durations.append(turn_s)


class _Admitting(threading.Thread):
    """A run asking to be admitted in a thread; `told` keeps each report of its deferral."""

    def __init__(self, gate: DeviceGate, max_wait_s: float, name: str, order: list[str]) -> None:
        super().__init__()
        self.gate, self.max_wait_s, self.run_name, self.order = gate, max_wait_s, name, order
        self.told: list[tuple[int, float | None, float]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.gate.admit(self.max_wait_s, lambda *report: self.told.append(report), retry_s=0.2, poll_s=0.05)
            self.order.append(self.run_name)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc


def test_a_run_within_the_bound_joins_at_once_and_one_past_it_is_deferred_then_joins_by_itself():
    gate = DeviceGate()
    events: list[str] = []
    gate_module.observe_admission(events.append)
    try:
        gate.admit(1.0)  # no history yet: no estimate, so it fits (the hard bound still holds)
        _with_history(gate, 30.0)
        release, holder = _hold(gate)  # a solo turn: a newcomer waits for it, about 30 s
        order: list[str] = []
        run = _Admitting(gate, 10.0, "late", order)
        run.start()
        assert wait_for(lambda: run.told)
        place, estimate, next_try = run.told[0]
        assert place == 1 and estimate is not None and estimate > 10.0 and 0 <= next_try <= 0.2
        assert gate.deferred() == 1 and order == []
        assert wait_for(lambda: "retry" in events)  # it keeps trying by itself
        release.set()  # the holder leaves: the newcomer's wait is now none
        run.join(10)
        assert order == ["late"] and run.error is None and gate.deferred() == 0
        assert events[0] == "deferred"
        holder.join(10)
    finally:
        gate_module._admission_observers.remove(events.append)


def test_deferred_runs_join_in_arrival_order_and_a_newcomer_never_passes_them():
    gate = DeviceGate()
    _with_history(gate, 30.0)
    release, holder = _hold(gate)
    order: list[str] = []
    first, second = _Admitting(gate, 10.0, "first", order), _Admitting(gate, 10.0, "second", order)
    first.start()
    assert wait_for(lambda: first.told)
    second.start()
    assert wait_for(lambda: second.told)
    assert second.told[-1][0] == 2  # second in the waiting room
    # A newcomer who would fit now (a generous bound) still goes behind the deferred runs.
    newcomer = _Admitting(gate, 1e9, "newcomer", order)
    newcomer.start()
    assert wait_for(lambda: newcomer.told)
    assert newcomer.told[-1][0] == 3 and order == []
    release.set()
    for run in (first, second, newcomer):
        run.join(10)
    assert order == ["first", "second", "newcomer"]
    holder.join(10)


def test_a_deferred_run_that_leaves_frees_its_place():
    gate = DeviceGate()
    _with_history(gate, 30.0)
    release, holder = _hold(gate)

    def leave(*_report) -> None:
        raise KeyboardInterrupt  # as Streamlit stops a closed tab's or a cancelled run's script

    with pytest.raises(KeyboardInterrupt):
        gate.admit(10.0, leave, poll_s=0.05)
    assert gate.deferred() == 0
    release.set()
    holder.join(10)


def test_past_the_hard_bound_a_run_is_refused_at_once_with_what_to_do():
    gate = DeviceGate(limit=2)
    _with_history(gate, 30.0)
    events: list[str] = []
    gate_module.observe_admission(events.append)
    release, holder = _hold(gate)
    order: list[str] = []
    deferred = _Admitting(gate, 10.0, "deferred", order)
    deferred.start()
    assert wait_for(lambda: deferred.told)
    try:
        with pytest.raises(QueueFullError) as info:  # one holding, one deferred: the bound of 2
            gate.admit(10.0)
        assert str(info.value).startswith(gate_module.BUSY) and "Try Run again" in str(info.value)
        assert "refused" in events
        with pytest.raises(QueueFullError):  # any caller, a baseline's turn included
            with gate.turn():
                pass
    finally:
        gate_module._admission_observers.remove(events.append)
        release.set()
        deferred.join(10)
        holder.join(10)
    assert order == ["deferred"]


def test_a_newcomer_is_estimated_to_share_a_batch_with_a_free_seat(monkeypatch):
    gate = DeviceGate()
    _with_history(gate, 30.0)
    batch = object()
    monkeypatch.setattr(config, "BATCH_MAX_SESSIONS", 2)
    release, holder = _hold(gate, share=batch)
    assert gate._newcomer_estimate_s() == 0.0  # a seat is free: it joins the batch now
    release2, holder2 = _hold(gate, share=batch)
    assert gate._newcomer_estimate_s() > 0  # the batch is full: it waits for a place
    for ev, th in ((release, holder), (release2, holder2)):
        ev.set()
        th.join(10)


def test_a_baseline_is_passed_only_until_its_patience_runs_out(monkeypatch):
    release, holder = None, None
    gate = DeviceGate()
    release, holder = _hold(gate)
    order: list[str] = []

    def take(name: str, behind: bool) -> None:
        with gate.turn(poll_s=0.05, behind=behind):
            order.append(name)

    baseline = threading.Thread(target=take, args=("baseline", True))
    baseline.start()
    assert wait_for(lambda: gate.waiting() == 2)
    monkeypatch.setattr(config, "BEHIND_PATIENCE_S", 0.0)  # it has waited long enough: no one passes it now
    run = threading.Thread(target=take, args=("run", False))
    run.start()
    assert wait_for(lambda: gate.waiting() == 3)
    release.set()
    for th in (holder, baseline, run):
        th.join(10)
    assert order == ["baseline", "run"]
