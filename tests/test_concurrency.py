"""Several decodes at once against shared models: each gets its own correct trace, in turn."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_batching import at_once

from conftest import wait_for
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


def _hold(gate: DeviceGate):
    """A thread holding the gate until the returned event is set."""
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gate.turn():
            holding.set()
            release.wait(120)  # bounds a hang only: the test releases it

    th = threading.Thread(target=holder)
    th.start()
    assert holding.wait(10)
    return release, th


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
    release, th = _hold(gate)
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
    release, th = _hold(gate)
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
    release, th = _hold(gate)
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
    from specviz.serving.gate import QueueFullError

    gate = DeviceGate(limit=2)
    release, th = _hold(gate)
    waiter = threading.Thread(target=_through, args=(gate,))
    waiter.start()
    assert wait_for(lambda: gate.waiting() >= 2)
    # Refused at once: a caller that queued instead would wait for the holder, which the test
    # releases only afterwards, so the refusal runs in a thread that must end on its own.
    refused: list[BaseException] = []

    def knock() -> None:
        try:
            with gate.turn():
                pass
        except QueueFullError as e:
            refused.append(e)

    knocker = threading.Thread(target=knock)
    knocker.start()
    knocker.join(60)  # bounds a hang only
    assert not knocker.is_alive(), "a caller beyond the queue's limit waited instead of being refused"
    assert refused and "busy" in str(refused[0])
    with pytest.raises(QueueFullError) as info:
        gate.check_room(2)  # the app's own, lower bound for new runs
    assert isinstance(info.value, SpecvizError)  # the app shows it word for word
    assert "Try Run again in a minute" in str(info.value) and "Traces page" in str(info.value)
    gate.check_room(3)  # below the bound: no complaint
    release.set()
    th.join(10)
    waiter.join(10)


def test_the_app_bound_sits_below_the_gates_own():
    from specviz import config

    assert 30 <= config.MAX_QUEUED_RUNS < config.GATE_QUEUE_MAX  # a class of 30 fits
    with pytest.raises(ValueError):
        DeviceGate(limit=0)


def test_the_app_refuses_a_run_at_once_when_the_queue_is_full_and_keeps_the_trace(monkeypatch):
    """Past config.MAX_QUEUED_RUNS a Run gets the gate's message (what to do) and starts nothing."""
    from streamlit.testing.v1 import AppTest

    import specviz.decoding.decoder
    from specviz import config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = []
    # Only a Run passes on_wait (the preload's warm-up decode does not, and may call this too).
    monkeypatch.setattr(
        specviz.decoding.decoder, "speculative_generate", lambda *a, **k: "on_wait" in k and started.append(1)
    )
    monkeypatch.setattr(config, "MAX_QUEUED_RUNS", 0)  # every run finds the queue full
    at = AppTest.from_file(str(ROOT / "specviz_app" / "app.py"), default_timeout=120).run()
    before = next(c.value for c in at.caption if c.value.startswith("Showing"))
    at.button(key="run_sidebar").click().run()
    assert not at.exception
    assert not started
    message = at.error[0].value
    assert message.startswith("The model is busy:") and "Try Run again in a minute" in message
    assert "Nothing was lost" in message
    assert next(c.value for c in at.caption if c.value.startswith("Showing")) == before


# ----- batched runs (specviz.serving.batching) and the app's timing pairs --------------------------------


class _Status:
    """What running._decode_with_progress updates: st.status's label, kept for the test."""

    def __init__(self) -> None:
        self.labels: list[str] = []

    def update(self, label: str = "", **_) -> None:
        self.labels.append(label)


@pytest.mark.slow
def test_two_sessions_runs_in_the_app_path_are_batched_equal_solo_and_timed_solo(offline_target, monkeypatch):
    """Two sessions press Run at once: the app's run path decodes them batched (their traces say
    most_sessions >= 2), each equal to its solo run on the same settings; the speedup is figured
    only from the solo pairs timed after, never from the batched run's own timing."""
    from specviz.decoding.decoder import autoregressive_generate
    from specviz.traces import speedup
    from specviz_app.params import Settings
    from specviz_app.runs import running

    settings = [Settings(seed=s, temperature=0.7, max_new=24, prompt="List three fruits.") for s in (1, 2)]
    requests = [running.run_request(s) for s in settings]
    results = at_once([lambda r=r: running._decode_with_progress(r, _Status()) for r in requests], timeout_s=300)
    for i, (s, request) in enumerate(zip(settings, requests, strict=True)):
        trace, baseline = results[i]
        assert trace.config["batched"] and baseline.config["batched"]
        assert trace.extra["batch"]["most_sessions"] >= 2, i  # its passes were shared with the other's
        # The solo runs from the settings themselves, not from the request: they check its arguments too.
        options = s.decode_options()
        solo = speculative_generate(s.prompt, target=request.target, draft=request.draft, options=options)
        solo_base = autoregressive_generate(s.prompt, target=request.target, options=options)
        assert trace.output_token_ids == solo.output_token_ids
        assert baseline.output_token_ids == solo_base.output_token_ids

    trace, baseline = results[0]
    assert speedup.speedup(trace, baseline) is None  # the batched timing gives no number
    # The fewest pairs a run gets (SPEEDUP_MIN_PAIRS) show the rule as well as the ten the app's
    # 16 s budget gives this run: the test took 11.1 s alone instead of 29.6 s.
    monkeypatch.setattr(speedup, "SPEEDUP_TIMED_SECONDS", 0.0)
    timing = running._time_more_pairs(requests[0], trace, baseline)
    assert trace.extra["timing"]["pairs"][0]["batched"] is True
    assert speedup.why_no_speedup(trace, baseline) == speedup.ONLY_BATCHED
    timing.join(300)
    pairs = trace.extra["timing"]["pairs"]
    solo = speedup.solo_pairs(pairs)
    assert len(solo) == trace.extra["timing"]["wanted"] == len(pairs) - 1  # the batched one took no place
    assert not any(p["batched"] for p in solo)
    spread = speedup.speedup_spread(trace, baseline)
    assert spread.complete and spread.pairs == len(speedup.figure_pairs(pairs))
    assert spread.median == pytest.approx(speedup.spread_of_pairs(speedup.figure_pairs(solo)).median)


def _fake_run(mode: str, calls: list[str]):
    """A decode for speedup.time_pair that only says it ran: a solo run's trace of 10 tokens."""
    from specviz.traces.trace import Trace

    def run():
        calls.append(mode)
        summary = dict(new_tokens=10, wall_ms=100.0, iterations=5, drafted=10, draft_ms=10.0, verify_ms=80.0)
        return Trace(mode, {"batched": False}, "", [1], [2], "", "max_new_tokens", [], summary, {})

    return run


def test_timing_pairs_wait_while_batched_runs_hold_the_gate_and_run_once_they_end(monkeypatch):
    """A run's further pairs are low priority: while a class's batched runs hold the gate together
    they wait, and once the last of them ends they run (and, batched first pair aside, all of them)."""
    from specviz.serving.gate import device_gate
    from specviz.traces import speedup
    from specviz_app.serving import background

    monkeypatch.setattr(background, "SETTLE_S", 0.0)
    monkeypatch.setattr(background, "IDLE_POLL_S", 0.01)
    gate, share = device_gate("test-timing-behind-a-batch"), object()
    holding, release = threading.Barrier(3), threading.Event()
    looks = []  # each time the timing worker asks whether the gate is busy
    waiting = gate.waiting

    def looked_at() -> int:
        if threading.current_thread().name == "specviz-timing":
            looks.append(1)
        return waiting()

    monkeypatch.setattr(gate, "waiting", looked_at)

    def batched_run() -> None:
        with gate.turn(share=share, poll_s=0.05):
            holding.wait(10)
            release.wait(120)  # bounds a hang only: the test releases it

    holders = [threading.Thread(target=batched_run) for _ in range(2)]
    for th in holders:
        th.start()
    holding.wait(10)  # both hold the gate at once
    trace = _fake_run("speculative", [])()
    base = _fake_run("autoregressive", [])()
    for run in (trace, base):  # the run itself decoded batched, a pass shared with another session's
        run.config["batched"], run.extra["batch"] = True, {"most_sessions": 2}
    speedup.start_timing(trace, base, streamed=True)
    trace.extra["timing"]["wanted"] = 3
    calls: list[str] = []
    timing = background.TimingPairs(
        trace, "test-timing-behind-a-batch", _fake_run("speculative", calls), _fake_run("autoregressive", calls)
    ).start()
    assert wait_for(lambda: len(looks) >= 5 or calls)  # the worker found the gate held, and again, and again
    assert calls == [] and timing.running()  # no pair while the batch holds the gate
    release.set()
    for th in holders:
        th.join(10)
    timing.join(10)
    assert not timing.running()
    assert len(calls) == 6  # three solo pairs: the batched first one took no place among them
    timing_record = trace.extra["timing"]
    assert timing_record["wanted"] == 3 and len(timing_record["pairs"]) == 4
    spread = speedup.speedup_spread(trace, base)
    assert spread.complete and (spread.timed, spread.pairs, spread.wanted) == (3, 3, 3)


def test_the_estimate_counts_a_full_batch_as_one_round(monkeypatch, fake_clock):
    """Behind decodes holding the gate together, the queue moves a batch at a time: with three
    holders and three waiting, the next caller is about one turn away, not three."""
    from specviz import config
    from specviz.serving import gate as gate_module

    monkeypatch.setattr(config, "BATCH_MAX_SESSIONS", 3)
    monkeypatch.setattr(gate_module, "time", fake_clock)  # the turns last what the test says
    gate, share = DeviceGate(), object()
    for _ in range(3):
        with gate.turn():
            fake_clock.advance(2.0)
    typical = gate.typical_s()
    started, release = threading.Barrier(4), threading.Event()

    def sharer(holds: bool) -> None:
        with gate.turn(share=share, poll_s=0.05):
            if holds:
                started.wait(10)
            release.wait(120)  # bounds a hang only: the test releases it

    threads = [threading.Thread(target=sharer, args=(True,)) for _ in range(3)]
    for th in threads:
        th.start()
    started.wait(10)  # a full batch holds the gate
    threads += [threading.Thread(target=sharer, args=(False,)) for _ in range(3)]
    for th in threads[3:]:
        th.start()
    assert wait_for(lambda: gate.waiting() >= 6)
    fake_clock.advance(0.5)  # the batch has held the gate for half a second
    told: list[tuple[int, float | None]] = []

    def on_wait(ahead: int) -> None:
        told.append((ahead, gate.estimate_s(ahead)))
        raise KeyboardInterrupt  # leave after the first report

    try:
        with gate.turn(on_wait=on_wait, share=share):
            pass
    except KeyboardInterrupt:
        pass
    ahead, estimate = told[0]
    assert ahead == 4  # three waiting before it, the holders counting as one
    assert estimate == (typical - 0.5) + typical  # the batch's remainder and one round, not four turns
    release.set()
    for th in threads:
        th.join(10)
    assert gate.waiting() == 0


def test_a_pair_a_page_was_drawn_beside_is_timed_again_and_a_busy_server_still_ends(monkeypatch):
    """The timing worker waits for a script run in progress to end before a pair; a pair during
    which a page was drawn (a script run began) is marked disturbed and timed again, at most as many
    times as pairs are wanted, so a server whose pages never stop drawing still ends its timing."""
    from specviz.traces import speedup
    from specviz_app.serving import background

    monkeypatch.setattr(background, "SETTLE_S", 0.0)
    monkeypatch.setattr(background, "PAGE_ACTIVITY", background.PageActivity())

    def timed(draw_on_calls: set[int]) -> tuple[list[dict], list[str]]:
        """Three more pairs wanted; the speculative decodes numbered in `draw_on_calls` meet a page draw."""
        calls: list[str] = []
        speculative = _fake_run("speculative", calls)

        def run_speculative():
            if calls.count("speculative") in draw_on_calls:
                with background.PAGE_ACTIVITY.drawing():
                    pass
            return speculative()

        trace, base = _fake_run("speculative", [])(), _fake_run("autoregressive", [])()
        speedup.start_timing(trace, base)
        trace.extra["timing"]["wanted"] = 4  # the run's own pair and three more
        timing = background.TimingPairs(trace, "test-disturbed", run_speculative, _fake_run("autoregressive", calls))
        timing.start().join(10)
        assert not timing.running()
        return trace.extra["timing"], calls

    timing, calls = timed({1})  # the second pair met a page draw
    assert [p["disturbed"] for p in timing["pairs"]] == [False, False, True, False, False]
    assert timing["wanted"] == 4 and len(calls) == 8

    timing, calls = timed(set(range(100)))  # every pair met one: it stops after as many as it wanted (4)
    assert [p["disturbed"] for p in timing["pairs"][1:]] == [True] * 4
    # Its retries spent, it counts the earliest three disturbed pairs (speedup.keep_disturbed): the run
    # ends with the four pairs its timing line counted towards, and the figures show that count (issue 35).
    assert [bool(p.get("kept")) for p in timing["pairs"][1:]] == [True, True, True, False]
    assert timing["wanted"] == 4 and len(speedup.counted_pairs(timing["pairs"])) == 4

    # A script run in progress holds the next pair back until it ends.
    drawing, release = threading.Event(), threading.Event()

    def page() -> None:
        with background.PAGE_ACTIVITY.drawing():
            drawing.set()
            release.wait(120)  # bounds a hang only: the test releases it

    class Watched(threading.Condition):
        """The pages' condition, counting the waits for a script run to end."""

        waits = 0

        def wait(self, timeout=None):
            self.waits += 1
            return super().wait(timeout)

    activity = background.PageActivity()
    activity._changed = watched = Watched()
    monkeypatch.setattr(background, "PAGE_ACTIVITY", activity)
    monkeypatch.setattr(background, "QUIET_WAIT_S", 120.0)  # bounds a hang only: the page's run ends first
    drawer = threading.Thread(target=page)
    drawer.start()
    drawing.wait(10)
    calls = []
    trace, base = _fake_run("speculative", [])(), _fake_run("autoregressive", [])()
    speedup.start_timing(trace, base)
    trace.extra["timing"]["wanted"] = 2
    timing = background.TimingPairs(
        trace, "test-disturbed", _fake_run("speculative", calls), _fake_run("autoregressive", calls)
    ).start()
    assert wait_for(lambda: watched.waits > 0 or calls)  # the worker found a script run in progress and waits
    assert calls == [] and timing.running()
    release.set()
    drawer.join(10)
    timing.join(10)
    assert len(calls) == 2 and [p["disturbed"] for p in trace.extra["timing"]["pairs"]] == [False, False]


def test_the_timing_seconds_come_from_the_environment_when_they_are_a_number(monkeypatch, capsys):
    from specviz.config import SPEEDUP_TIMED_SECONDS
    from specviz_app.serving import background

    monkeypatch.delenv(background.TIMING_SECONDS_ENV, raising=False)
    assert background.timing_seconds() == SPEEDUP_TIMED_SECONDS
    for value, seconds in (("0", 0.0), ("4.5", 4.5), ("-1", SPEEDUP_TIMED_SECONDS), ("nan", SPEEDUP_TIMED_SECONDS)):
        monkeypatch.setenv(background.TIMING_SECONDS_ENV, value)
        assert background.timing_seconds() == seconds, value
    monkeypatch.setenv(background.TIMING_SECONDS_ENV, "fast")
    assert background.timing_seconds() == SPEEDUP_TIMED_SECONDS
    assert "SPECVIZ_TIMING_SECONDS='fast' is not a number of seconds >= 0" in capsys.readouterr().err
