"""The app's runs batched across sessions and its timing pairs (specviz_app.serving.background): two
sessions' runs batched equal solo and timed solo, pairs waiting for the gate, the estimate of a full
batch, a pair a page was drawn beside timed again (the gate's queue: tests/test_concurrency.py)."""

from __future__ import annotations

import threading

import pytest
from test_batching import at_once

from conftest import wait_for
from specviz.decoding.decoder import speculative_generate
from specviz.serving.gate import DeviceGate

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
    from specviz.config import SPEEDUP_MIN_PAIRS
    from specviz.decoding.decoder import autoregressive_generate
    from specviz.traces import speedup
    from specviz_app.params import Settings
    from specviz_app.runs import running
    from specviz_app.serving import background

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
    # The fewest pairs a run gets (SPEEDUP_MIN_PAIRS: any budget under one pair's time) show the rule
    # as well as the many the app's default budget gives this run.
    monkeypatch.setenv(background.TIMING_SECONDS_ENV, "0.01")
    timing = running._time_more_pairs(requests[0], trace, baseline)
    assert trace.extra["timing"]["pairs"][0]["batched"] is True
    assert speedup.why_no_speedup(trace, baseline) == speedup.ONLY_BATCHED
    timing.join(300)
    pairs = trace.extra["timing"]["pairs"]
    solo = speedup.solo_pairs(pairs)
    # the batched one took no place among the solo pairs the run wanted
    assert len(solo) == trace.extra["timing"]["wanted"] == SPEEDUP_MIN_PAIRS == len(pairs) - 1
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
