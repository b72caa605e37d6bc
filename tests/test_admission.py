"""Admission by the wait (specviz.serving.gate.DeviceGate.turn's admission): a run joins the queue while
its estimated wait is within the bound; past it the run is deferred, told its place, and joins by itself
in arrival order; past the hard bound it is refused at once; a baseline is not passed for ever."""

from __future__ import annotations

import threading

import pytest

from conftest import hold_gate, wait_for
from specviz import config
from specviz.serving import gate as gate_module
from specviz.serving.gate import Admission, DeviceGate, QueueFullError, _Ticket

pytestmark = pytest.mark.quick


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(config, "ADMISSION_RETRY_S", 0.2)  # the periodic try, soon enough to be seen


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
        admission = Admission(self.max_wait_s, lambda *report: self.told.append(report))
        try:
            with self.gate.turn(poll_s=0.05, admission=admission):  # a solo turn: one at a time, in order
                self.order.append(self.run_name)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc


def test_a_run_within_the_bound_joins_at_once_and_one_past_it_is_deferred_then_joins_by_itself():
    gate = DeviceGate()
    events: list[str] = []
    gate_module.observe_admission(events.append)
    try:
        with gate.turn(admission=Admission(1.0)):  # no history yet: no estimate, so it fits
            pass
        _with_history(gate, 30.0)
        release, holder = hold_gate(gate)  # a solo turn: a newcomer waits for it, about 30 s
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
    release, holder = hold_gate(gate)
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
    release, holder = hold_gate(gate)

    def leave(*_report) -> None:
        raise KeyboardInterrupt  # as Streamlit stops a closed tab's or a cancelled run's script

    with pytest.raises(KeyboardInterrupt):
        with gate.turn(poll_s=0.05, admission=Admission(10.0, leave)):
            pass
    assert gate.deferred() == 0 and gate.waiting() == 1  # the holder only
    release.set()
    holder.join(10)


def test_past_the_hard_bound_a_run_is_refused_at_once_with_what_to_do():
    gate = DeviceGate(limit=2)
    _with_history(gate, 30.0)
    events: list[str] = []
    gate_module.observe_admission(events.append)
    release, holder = hold_gate(gate)
    order: list[str] = []
    deferred = _Admitting(gate, 10.0, "deferred", order)
    deferred.start()
    assert wait_for(lambda: deferred.told)
    baseline: list[str] = []

    def queue_plainly() -> None:  # a run's baseline: no admission, queued past the new runs' bound
        with gate.turn(poll_s=0.05):
            baseline.append("baseline")

    plain = threading.Thread(target=queue_plainly)
    try:
        with pytest.raises(QueueFullError) as info:  # one holding, one deferred: the bound of 2
            with gate.turn(admission=Admission(10.0)):
                pass
        assert str(info.value).startswith(gate_module.BUSY) and "Try Run again" in str(info.value)
        assert "refused" in events
        plain.start()
        assert wait_for(lambda: gate.waiting() == 2)  # queued, not refused: an admitted run's baseline
    finally:
        gate_module._admission_observers.remove(events.append)
        release.set()
        deferred.join(10)
        holder.join(10)
        plain.join(10)
    assert order == ["deferred"] and baseline == ["baseline"]


def test_a_room_never_joins_against_one_estimate(monkeypatch):
    """The estimate and the queueing are one step: two runs arriving together behind a solo turn of
    30 s, with a bound of 40 s, are one queued (30 s) and one deferred (60 s), never both queued."""
    gate = DeviceGate()
    _with_history(gate, 30.0)
    release, holder = hold_gate(gate)
    order: list[str] = []
    runs = [_Admitting(gate, 40.0, name, order) for name in ("a", "b")]
    for run in runs:
        run.start()
    assert wait_for(lambda: gate.waiting() + gate.deferred() == 3)
    assert gate.waiting() == 2 and gate.deferred() == 1
    release.set()
    for run in runs:
        run.join(10)
    holder.join(10)
    assert sorted(order) == ["a", "b"]


def test_a_newcomer_is_estimated_to_share_a_batch_with_a_free_seat(monkeypatch):
    gate = DeviceGate()
    _with_history(gate, 30.0)
    batch = object()
    monkeypatch.setattr(config, "BATCH_MAX_SESSIONS", 2)
    release, holder = hold_gate(gate, share=batch)
    assert gate._newcomer_estimate_s(_Ticket(batch)) == 0.0  # a seat is free: it joins the batch now
    assert gate._newcomer_estimate_s(_Ticket(None)) > 0  # a solo decode waits for the batch
    release2, holder2 = hold_gate(gate, share=batch)
    assert gate._newcomer_estimate_s(_Ticket(batch)) > 0  # the batch is full: it waits for a place
    for ev, th in ((release, holder), (release2, holder2)):
        ev.set()
        th.join(10)


def test_a_baseline_is_passed_only_until_its_patience_runs_out(monkeypatch):
    release, holder = None, None
    gate = DeviceGate()
    release, holder = hold_gate(gate)
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
