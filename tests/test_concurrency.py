"""Several decodes at once against shared models: each gets its own correct trace, in turn."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from conftest import hold_gate, wait_for
from specviz.config import DecodeOptions
from specviz.decoding.decoder import speculative_generate
from specviz.serving.gate import DeviceGate
from specviz.serving.hooks import ServingHooks
from specviz.traces.trace import validate

ROOT = Path(__file__).resolve().parent.parent


def test_concurrent_runs_equal_sequential_runs(tiny_pair):
    target, draft = tiny_pair
    settings = [
        dict(seed=s, gamma=g, temperature=t) for s, g, t in [(1, 2, 1.0), (2, 4, 0.0), (3, 8, 0.7), (4, 1, 1.0)]
    ]
    expected = [
        speculative_generate(
            [5, 6, 7], target=target, draft=draft, options=DecodeOptions(max_new_tokens=30, **kw)
        ).output_token_ids
        for kw in settings
    ]
    results: dict[int, list[int]] = {}
    waits: list[int] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            options, hooks = DecodeOptions(max_new_tokens=30, **settings[i]), ServingHooks(on_wait=waits.append)
            trace = speculative_generate([5, 6, 7], target=target, draft=draft, options=options, hooks=hooks)
            validate(trace.to_dict())
            results[i] = trace.output_token_ids
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(settings)) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors
    assert [results[i] for i in range(len(settings))] == expected
    assert waits and all(ahead >= 1 for ahead in waits)  # queued callers were told their place


def test_gate_releases_a_caller_interrupted_while_waiting():
    gate = DeviceGate()
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gate.turn():
            holding.set()
            release.wait(120)  # bounds a hang only: the test releases it

    th = threading.Thread(target=holder)
    th.start()
    holding.wait(10)

    class Stop(Exception):
        pass

    def interrupt(ahead: int) -> None:
        raise Stop  # what Streamlit does to a session whose user pressed Stop

    try:
        with gate.turn(on_wait=interrupt):
            raise AssertionError("must not get the turn while another run holds it")
    except Stop:
        pass
    assert gate.waiting() == 1
    release.set()
    th.join(10)
    assert gate.waiting() == 0
    with gate.turn():
        pass


def _through(gate: DeviceGate) -> None:
    with gate.turn(poll_s=0.05):
        pass


def test_a_waiting_caller_is_told_its_place_and_an_estimate_from_recent_decodes(monkeypatch, fake_clock):
    from specviz.serving import gate as gate_module
    from specviz.serving.gate import place_words

    monkeypatch.setattr(gate_module, "time", fake_clock)  # the turns last what the test says
    gate = DeviceGate()
    assert gate.estimate_s(1) is None  # no decode has finished: no estimate yet
    for held_s in (3.0, 1.0, 2.0):
        with gate.turn():
            fake_clock.advance(held_s)
    assert gate.typical_s() == 2.0  # the median of the turns' own lengths
    release, th = hold_gate(gate)
    fake_clock.advance(0.5)  # the holder has held the gate for half a second
    told: list[tuple[int, float | None]] = []
    second = threading.Thread(target=_through, args=(gate,))  # queued behind the holder
    second.start()
    assert wait_for(lambda: gate.waiting() >= 2)

    def on_wait(ahead: int) -> None:
        told.append((ahead, gate.estimate_s(ahead)))
        raise KeyboardInterrupt  # leave after the first report

    try:
        with gate.turn(on_wait=on_wait):
            pass
    except KeyboardInterrupt:
        pass
    ahead, estimate = told[0]
    assert ahead == 2
    assert estimate == (2.0 - 0.5) + 2.0  # the holder's remainder of a typical turn, then one more
    assert place_words(2, estimate) == "2nd in line, about 4 s"
    assert place_words(3, 8.4) == "3rd in line, about 8 s"
    assert place_words(11, 0.2) == "11th in line, about 1 s"
    assert "no estimate yet" in place_words(1, None)
    release.set()
    th.join(10)
    second.join(10)


def test_a_cancelled_waiter_frees_its_place_for_the_ones_behind_it():
    gate = DeviceGate()
    release, th = hold_gate(gate)
    places: dict[str, list[int]] = {"b": [], "c": []}
    cancel_b = threading.Event()

    class Cancelled(Exception):
        pass

    def waiter(name: str) -> None:
        def on_wait(ahead: int) -> None:
            places[name].append(ahead)
            if name == "b" and cancel_b.is_set():
                raise Cancelled  # what Streamlit's Cancel (a rerun) or a closed tab (a stop) does

        try:
            with gate.turn(on_wait=on_wait, poll_s=0.05):
                pass
        except Cancelled:
            pass

    b = threading.Thread(target=waiter, args=("b",))
    b.start()
    assert wait_for(lambda: gate.waiting() >= 2)
    c = threading.Thread(target=waiter, args=("c",))
    c.start()
    assert wait_for(lambda: places["c"])
    assert places["c"][-1] == 2  # behind the holder and b
    cancel_b.set()
    b.join(10)
    assert gate.waiting() == 2  # the holder and c: b's place is gone
    wait_for(lambda: places["c"][-1] == 1)  # bounds a hang only: c moves up at its next poll
    assert places["c"][-1] == 1  # c moved up
    release.set()
    th.join(10)
    c.join(10)
    assert gate.waiting() == 0


def test_a_caller_behind_lets_later_runs_pass_and_never_shares_a_solo_turn():
    """The app's baselines wait `behind`: a run that comes later takes the gate first, so no student's
    first tokens wait for another's baseline; the baseline still never runs beside a solo holder."""
    gate = DeviceGate()
    release, th = hold_gate(gate)
    order, places = [], {"baseline": [], "run": []}
    inside = threading.Lock()
    overlaps = []

    def caller(name: str, behind: bool) -> None:
        with gate.turn(on_wait=places[name].append, poll_s=0.05, behind=behind):
            if not inside.acquire(blocking=False):
                overlaps.append(name)  # two solo turns at once
                return
            order.append(name)
            if name == "run":  # hold the turn until the baseline, still waiting, looked at the gate again
                looks = len(places["baseline"])
                wait_for(lambda: len(places["baseline"]) > looks or overlaps)  # or it came in beside
            inside.release()

    baseline = threading.Thread(target=caller, args=("baseline", True))
    baseline.start()
    assert wait_for(lambda: places["baseline"])
    run = threading.Thread(target=caller, args=("run", False))
    run.start()
    assert wait_for(lambda: places["run"])
    wait_for(lambda: places["baseline"][-1] == 2)  # bounds a hang only: the baseline's place is re-read at each poll
    assert places["run"][-1] == 1 and places["baseline"][-1] == 2  # the later run is now ahead of it
    release.set()
    for thread in (th, run, baseline):
        thread.join(10)
    assert order == ["run", "baseline"] and overlaps == []
    assert gate.waiting() == 0


def test_a_full_queue_refuses_at_once_with_a_message_that_says_what_to_do():
    from specviz.errors import SpecvizError
    from specviz.serving.gate import Admission, QueueFullError

    gate = DeviceGate(limit=1)
    release, th = hold_gate(gate)
    waiter = threading.Thread(target=_through, args=(gate,))  # a caller without admission: a baseline
    waiter.start()
    assert wait_for(lambda: gate.waiting() >= 2)
    # Refused at once: a caller that queued instead would wait for the holder, which the test
    # releases only afterwards, so the refusals run in a thread that must end on its own.
    refused: list[BaseException] = []

    def knock(admission) -> None:
        try:
            with gate.turn(admission=admission):
                pass
        except QueueFullError as e:
            refused.append(e)

    for admission in (Admission(1e9), None):  # a new run past the bound (1); any caller past twice it
        knocker = threading.Thread(target=knock, args=(admission,))
        knocker.start()
        knocker.join(60)  # bounds a hang only
        assert not knocker.is_alive(), "a caller beyond the queue's limit waited instead of being refused"
    assert len(refused) == 2 and all("busy" in str(e) for e in refused)
    assert isinstance(refused[0], SpecvizError)  # the app shows it word for word
    assert "Try Run again in a few minutes" in str(refused[0]) and "Traces page" in str(refused[0])
    release.set()
    th.join(10)
    waiter.join(10)


def _stub_decoding(monkeypatch) -> list[int]:
    """Stop every decode once it holds the device (after the gate's admission and turn), with an error
    the page shows; returns the list each such decode adds a 1 to. Set after the preload's warm-up."""
    import specviz.decoding.decoder
    from specviz.errors import SpecvizError

    started: list[int] = []

    def decode_loop(*_args, **_kwargs):
        started.append(1)
        raise SpecvizError("the test stops the decode here")

    monkeypatch.setattr(specviz.decoding.decoder, "_decode_loop", decode_loop)
    return started


def test_the_hard_bound_holds_a_lecture_hall_and_a_gate_takes_at_least_one():
    from specviz import config

    # A hundred students, each a run or its baseline at once, and more: the bound is a safety net.
    assert 2 * 100 <= config.GATE_QUEUE_MAX
    with pytest.raises(ValueError):
        DeviceGate(limit=0)


def test_the_app_refuses_a_run_at_once_when_the_queue_is_full_and_keeps_the_trace(monkeypatch):
    """Past the gate's hard bound a Run gets the gate's message (what to do) and starts nothing."""
    from streamlit.testing.v1 import AppTest

    from specviz.serving.gate import device_gate
    from specviz_app.serving import background

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "specviz_app" / "app.py"), default_timeout=120).run()
    assert wait_for(lambda: not background.preload_running())  # its warm-up decode takes turns too
    started = _stub_decoding(monkeypatch)
    monkeypatch.setattr(device_gate("cpu"), "limit", 0)  # every run finds the server full
    before = next(c.value for c in at.caption if c.value.startswith("Showing"))
    at.button(key="run_sidebar").click().run()
    assert not at.exception
    assert not started
    message = at.error[0].value
    assert message.startswith("The model is busy:") and "Try Run again in a few minutes" in message
    assert "Nothing was lost" in message
    assert next(c.value for c in at.caption if c.value.startswith("Showing")) == before


def test_a_run_past_the_wait_bound_is_told_its_place_and_then_decodes_without_another_click(monkeypatch):
    """Admission by the wait, through the app: a Run whose estimated wait is past config.MAX_WAIT_S says
    so in its status (its place in the waiting room), and decodes by itself once a place frees."""
    from streamlit.testing.v1 import AppTest

    from specviz import config
    from specviz.serving.gate import device_gate
    from specviz_app.runs import running
    from specviz_app.serving import background

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "specviz_app" / "app.py"), default_timeout=120).run()
    assert wait_for(lambda: not background.preload_running())
    started = _stub_decoding(monkeypatch)
    gate = device_gate("cpu")
    monkeypatch.setattr(gate, "_durations", type(gate._durations)([30.0] * 3, maxlen=5))  # turns of 30 s
    monkeypatch.setattr(config, "MAX_WAIT_S", 1.0)
    release, holder = hold_gate(gate)  # another session's decode: a newcomer would wait about 30 s
    told: list[str] = []
    say = running._deferred

    def deferred(place, estimate_s, next_try_s, w):
        told.append(say(place, estimate_s, next_try_s, w))
        release.set()  # the other session finishes: a place frees
        return told[-1]

    monkeypatch.setattr(running, "_deferred", deferred)
    at.button(key="run_sidebar").click().run()
    holder.join(10)
    assert told and "1st in the waiting room" in told[0]
    waited = int(re.search(r"about (\d+) s of waiting", told[0]).group(1))
    assert 1 < waited <= 30  # a turn of 30 s, less what the other session has held of it
    assert started == [1]  # it went on to decode by itself
    assert "the test stops the decode here" in at.error[0].value
