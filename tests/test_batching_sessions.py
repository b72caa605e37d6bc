"""Batched decoding across sessions, the sessions' side (specviz.serving.batching): decodes sharing
the gate, drafting in turn, interrupted, timed, on the offline target and in the lab (the ragged
forward and batched-equals-solo: tests/test_batching.py)."""

from __future__ import annotations

import copy
import dataclasses
import threading

import pytest
import torch
from test_batching import (  # noqa: F401 (the fixtures and helpers both files use)
    PROB_TOL,
    _one_thread,
    check_batched_equal_solo,
    packed_pair,
    pair,
    run_together,
)

from conftest import wait_for
from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.engine.lean_llama import LeanRequest
from specviz.serving.batching import batcher_for
from specviz.serving.gate import DeviceGate
from specviz.serving.hooks import ServingHooks
from specviz.traces import speedup
from specviz.traces.trace import validate

# ----- the gate ---------------------------------------------------------------------------------------


def test_sharing_decodes_hold_the_gate_together_and_a_solo_one_alone():
    gate, share = DeviceGate(), object()
    events: list[str] = []
    inside = threading.Semaphore(0)
    release = threading.Event()

    def decode(name: str, share_with) -> None:
        with gate.turn(share=share_with, poll_s=0.02):
            events.append(f"{name} in")
            inside.release()
            release.wait(10)
            events.append(f"{name} out")

    a = threading.Thread(target=decode, args=("a", share))
    a.start()
    inside.acquire(timeout=10)
    b = threading.Thread(target=decode, args=("b", share))
    b.start()
    assert inside.acquire(timeout=10)  # b got in beside a
    solo = threading.Thread(target=decode, args=("solo", None))
    solo.start()
    assert wait_for(lambda: gate.waiting() >= 3)
    late = threading.Thread(target=decode, args=("late", share))  # queued behind the solo one
    late.start()
    assert wait_for(lambda: gate.waiting() >= 4)
    assert not inside.acquire(timeout=0.2)  # neither the solo decode nor the late sharer got in
    release.set()
    for th in (a, b, solo, late):
        th.join(10)
    assert events[:2] == ["a in", "b in"]
    solo_in = events.index("solo in")
    assert {"a out", "b out"} <= set(events[:solo_in])  # the solo one waited for both sharers
    assert events[solo_in + 1] == "solo out"  # and held the gate alone
    assert events.index("late in") > events.index("solo out")  # first come, first served


@dataclasses.dataclass
class _Cache:
    """All of a cache that _CountingLean reads: its length."""

    length: int = 0


class _CountingLean:
    """A stand-in for LeanLlama whose passes only count the requests they serve."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def forward_many(self, requests, reuse_prefixes=False):
        self.sizes.append(len(requests))
        for r in requests:
            r.cache.length += int(r.input_ids.shape[0])
        return [(torch.zeros(r.keep, 4), None) for r in requests]


def test_decodes_drafting_in_turn_share_every_pass(monkeypatch, fake_clock):
    """Six decodes draft one after another under the compute lock, together for longer than the
    batcher's window, as a class's thirty do: every pass still waits for all six, since each
    submission is progress (the old rule, a window counted from the oldest request, cut each pass
    to those that had submitted within it). The window only bounds how long the lock may lie free
    with no seated decode taking it. The batcher's clock is fake: a drafting turn lasts what the
    test says, and the hand-overs between threads, however slow the machine, last nothing."""
    from specviz.serving import batching
    from specviz.serving.batching import VerifyBatcher

    monkeypatch.setattr(batching, "time", fake_clock)
    lean, sessions, steps = _CountingLean(), 6, 3
    batcher = VerifyBatcher(lean, window_s=0.4, max_sessions=8)

    def decode() -> None:
        cache = _Cache()
        with batcher.seat() as seat:
            for _ in range(steps):
                fake_clock.advance(0.1)  # drafting, holding the compute lock: six turns outlast the window
                seat.forward(LeanRequest(torch.zeros(3, dtype=torch.long), cache, keep=1))

    threads = [threading.Thread(target=decode, daemon=True) for _ in range(sessions)]
    with batcher.compute:  # every decode takes its seat before the first one drafts
        for th in threads:
            th.start()
        wait_for(lambda: batcher._joined >= sessions)  # a hang bound
    for th in threads:
        th.join(30)  # a hang bound
    assert not any(th.is_alive() for th in threads)
    assert lean.sizes == [sessions] * steps


class _LockThatFails:
    """A lock whose acquire raises once `fail` is set, as an interrupt (Ctrl-C in a notebook's
    thread) raises in a decode waiting for the compute lock."""

    def __init__(self) -> None:
        self.lock, self.fail = threading.Lock(), False

    def acquire(self, *args) -> bool:
        if self.fail:
            raise KeyboardInterrupt
        return self.lock.acquire(*args)

    def release(self) -> None:
        self.lock.release()


def test_an_interrupted_decode_leaves_no_seat_and_no_request_behind():
    """A seat taken, or a request left pending, by a decode interrupted while it waited would make
    every later pass of the batcher wait out the window for a decode that is gone."""
    from specviz.serving.batching import VerifyBatcher

    batcher = VerifyBatcher(_CountingLean(), window_s=0.05)
    batcher.compute = _LockThatFails()
    batcher.compute.fail = True
    with pytest.raises(KeyboardInterrupt), batcher.seat():
        pass
    assert batcher._joined == 0

    batcher.compute.fail = False

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    cache = _Cache()
    with pytest.raises(KeyboardInterrupt), batcher.seat() as seat:
        batcher._joined += 1  # another seated decode that has not submitted: this one must wait
        batcher._cond.wait_for = interrupted  # and is interrupted while it waits for its pass
        try:
            seat.forward(LeanRequest(torch.zeros(2, dtype=torch.long), cache, keep=1))
        finally:
            batcher._joined -= 1
    assert batcher._pending == [] and batcher._joined == 0
    assert batcher.lean.sizes == []  # no pass ran for it


# ----- timings ----------------------------------------------------------------------------------------


def test_no_speedup_is_figured_from_a_batched_timing(pair):  # noqa: F811 (the fixture)
    target, draft = pair

    def spec(batched):
        return speculative_generate(
            [3, 1, 4],
            target=target,
            draft=draft,
            options=DecodeOptions(seed=1, max_new_tokens=12),
            hooks=ServingHooks(batched=batched),
        )

    def base(batched):
        return autoregressive_generate(
            [3, 1, 4],
            target=target,
            options=DecodeOptions(seed=1, max_new_tokens=12),
            hooks=ServingHooks(batched=batched),
        )

    for _ in range(5):  # started together they nearly always share a pass; the claim needs one that did
        run, baseline = run_together([spec, base])
        if run.extra["batch"]["most_sessions"] >= 2:
            break
    assert run.extra["batch"]["most_sessions"] >= 2
    assert speedup.speedup(run, baseline) is None and speedup.speedup_spread(run, baseline) is None
    assert speedup.why_no_speedup(run, baseline) == speedup.ONLY_BATCHED
    assert speedup.measured_costs(run, baseline) is None  # no c or v from it either
    timing = speedup.start_timing(run, baseline)
    assert timing["pairs"][0]["batched"] is True
    validate(run.to_dict())
    assert speedup.speedup(run, baseline) is None  # still only the batched pair
    solo_pair = speedup.time_pair(lambda: spec(False), lambda: base(False), 1, traced=True)
    assert solo_pair["batched"] is False
    timing["pairs"].append(solo_pair)
    validate(run.to_dict())
    assert speedup.speedup(run, baseline) == pytest.approx(speedup.pair_speedup(solo_pair))  # the solo pair only
    assert speedup.speedup_spread(run, baseline).pairs == 1
    assert speedup.why_no_speedup(run, baseline) is None
    alone = speculative_generate(
        [3, 1, 4], target=target, draft=draft, options=DecodeOptions(seed=1, max_new_tokens=12)
    )
    assert speedup.why_no_speedup(alone, None) == speedup.NO_BASELINE


def test_a_batched_decode_that_met_no_other_is_timed_as_solo(pair):  # noqa: F811 (the fixture)
    """Asking to batch and finding nobody to batch with (the app's run on a quiet server): every pass
    served it alone (most_sessions 1), the same computation as a solo pass, with nobody to wait for,
    so its timing is a solo run's and gives the speedup at once."""
    target, draft = pair
    run = speculative_generate(
        [3, 1, 4],
        target=target,
        draft=draft,
        options=DecodeOptions(seed=1, max_new_tokens=12),
        hooks=ServingHooks(batched=True),
    )
    baseline = autoregressive_generate(
        [3, 1, 4], target=target, options=DecodeOptions(seed=1, max_new_tokens=12), hooks=ServingHooks(batched=True)
    )
    assert run.config["batched"] and run.extra["batch"] == {"most_sessions": 1}
    assert not speedup.was_batched(run, baseline)
    assert speedup.start_timing(run, baseline)["pairs"][0]["batched"] is False
    assert speedup.speedup(run, baseline) is not None and speedup.why_no_speedup(run, baseline) is None
    unknown = copy.deepcopy(run)
    del unknown.extra["batch"]  # batched with no count recorded: assume it shared
    assert speedup.was_batched(unknown)


# ----- the offline target -------------------------------------------------------------------------------


@pytest.mark.slow
def test_offline_target_batched_greedy_decodes_equal_solo(offline_target):
    from specviz.labs.bench import PROMPTS

    assert offline_target.lean is not None

    def spec(prompt):
        return lambda batched: speculative_generate(
            prompt,
            target=offline_target,
            options=DecodeOptions(temperature=0, max_new_tokens=16),
            hooks=ServingHooks(batched=batched),
        )

    def base(prompt):
        return lambda batched: autoregressive_generate(
            prompt,
            target=offline_target,
            options=DecodeOptions(temperature=0, max_new_tokens=16),
            hooks=ServingHooks(batched=batched),
        )

    check_batched_equal_solo([spec(PROMPTS[0]), spec(PROMPTS[1]), base(PROMPTS[2])], PROB_TOL)


def test_the_labs_samples_decode_batched_and_count_as_one_at_a_time(packed_pair, monkeypatch):  # noqa: F811
    """The distribution lab decodes its samples several at once, batched (specviz.labs.lab.sample_workers):
    the same counts as one at a time, since each sample's seed fixes its tokens; the passes were
    really shared; and a stop still ends the run with what was drawn."""
    from specviz.labs import lab

    target, draft = packed_pair
    prompt = [1, 5, 9]
    settings = dict(target=target, draft=draft, k=3, n=24, gamma=2, seed=7)
    assert lab.sample_workers(target, draft) > 1
    batcher = batcher_for(target)
    before = len(batcher.pass_sizes)
    batched = lab.run_lab(prompt, **settings)
    assert max(batcher.pass_sizes[before:]) > 1  # the samples shared target passes
    monkeypatch.setattr(lab, "sample_workers", lambda target, draft: 1)
    alone = lab.run_lab(prompt, **settings)
    for key in ("spec_counts", "target_counts", "n_spec", "n_target", "impossible_spec"):
        assert getattr(batched, key) == getattr(alone, key), key
    assert batched.n_spec == batched.n_target == 24 and not batched.stopped

    monkeypatch.undo()
    recorded = []
    progress, stop = (lambda done, total: recorded.append(done)), (lambda: len(recorded) >= 5)
    stopped = lab.run_lab(prompt, **settings, on_progress=progress, should_stop=stop)
    assert stopped.stopped and 5 <= stopped.n_spec + stopped.n_target < 48
    assert recorded == list(range(1, len(recorded) + 1)) and recorded[-1] == stopped.n_spec + stopped.n_target
