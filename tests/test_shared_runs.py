"""One run, many viewers (specviz_app/serving/shared_runs.py): identical settings share one decode while it
runs and its recording afterwards; bounded, oldest first; a replaced model's recordings go."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import wait_for
from specviz_app.serving.shared_runs import Recording, SharedRuns, made_words, run_key

ROOT = Path(__file__).resolve().parent.parent


def _model(name="t", dtype="float32"):
    return SimpleNamespace(name=name, dtype=dtype, model=object())


def test_sessions_asking_at_once_share_one_decode_and_later_ones_get_it_at_once():
    runs = SharedRuns()
    target = _model()
    key = run_key(("prompt", 4), True, target, "ngram")
    decodes, got, following = [], [], set()
    release = threading.Event()

    def session() -> None:
        me = threading.get_ident()
        recording, lead = runs.claim(key, on_wait=lambda: following.add(me), poll_s=0.02)
        if lead is not None:
            decodes.append(1)
            release.wait(60)  # bounds a hang only: the test releases it
            recording = Recording(trace=object(), baseline=None)
            lead.finish(recording)
        got.append(recording)

    threads = [threading.Thread(target=session) for _ in range(8)]
    for th in threads:
        th.start()
    assert wait_for(lambda: len(following) == 7)  # the other seven wait for the one decode in flight
    release.set()
    for th in threads:
        th.join(10)
    assert len(decodes) == 1 and len(got) == 8
    assert all(r is got[0] for r in got)  # the same recording object: the same trace and timing
    recording, lead = runs.claim(key)
    assert recording is got[0] and lead is None
    assert made_words(recording).startswith("shared recording made at ") and made_words(recording).endswith(" UTC")


def test_a_leader_that_fails_or_is_cancelled_hands_the_lead_to_a_follower():
    runs = SharedRuns()
    key = run_key(("p",), False, _model(), None)
    _, first = runs.claim(key)
    result, following = {}, threading.Event()

    def follower() -> None:
        recording, lead = runs.claim(key, on_wait=following.set, poll_s=0.02)
        result["lead"] = lead

    th = threading.Thread(target=follower)
    th.start()
    assert following.wait(60)  # it follows the first leader's decode
    first.abandon()  # a closed tab, Cancel, or an error
    th.join(10)
    assert result["lead"] is not None  # the follower decodes instead
    result["lead"].finish(Recording(trace="t", baseline=None))
    first.abandon()  # harmless once done
    assert runs.get(key).trace == "t"


def test_recordings_are_bounded_and_evicted_oldest_first():
    runs = SharedRuns(max_recordings=3)
    target = _model()
    keys = [run_key((i,), False, target, None) for i in range(5)]
    stopped = []
    for k in keys:
        _, lead = runs.claim(k)
        lead.finish(Recording(trace=k, baseline=None, timing=SimpleNamespace(stop=lambda k=k: stopped.append(k))))
    assert len(runs) == 3
    assert [runs.get(k) is None for k in keys] == [True, True, False, False, False]
    assert stopped == keys[:2]  # an evicted recording's timing pairs stop; the kept ones go on
    runs.clear()
    assert len(runs) == 0 and stopped == keys
    with pytest.raises(ValueError):
        SharedRuns(max_recordings=0)


def test_a_reloaded_model_drops_the_recordings_of_the_one_it_replaced():
    runs = SharedRuns()
    old, other = _model("t"), _model("u")
    k_old, k_other = run_key((1,), False, old, None), run_key((1,), False, other, None)
    for k in (k_old, k_other):
        runs.claim(k)[1].finish(Recording(trace=k, baseline=None))
    reloaded = _model("t")  # same name and dtype, a new object: the model cache loaded it again
    k_new = run_key((1,), False, reloaded, None)
    recording, lead = runs.claim(k_new)
    assert recording is None  # never served the old model's recording: this session decodes
    lead.finish(Recording(trace="new", baseline=None))
    assert runs.get(k_old) is None and runs.get(k_other) is not None
    assert run_key((1,), False, _model("t", "bfloat16"), None) != k_new  # dtype is part of the key


def test_two_app_sessions_with_one_link_share_the_recording_and_its_timing(monkeypatch):
    """The second session shows the first's trace object, says it is shared and when it was made,
    and starts no second TimingPairs."""
    from streamlit.testing.v1 import AppTest

    from specviz_app import keys
    from specviz_app.serving import background, shared_runs

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(background.TIMING_SECONDS_ENV, "1")  # pairs to time, which the suite's 0 would not
    monkeypatch.setattr(shared_runs, "RUNS", SharedRuns())
    started = []
    real_start = background.TimingPairs.start
    monkeypatch.setattr(background.TimingPairs, "start", lambda self: started.append(self) or real_start(self))
    query = {"prompt": "Name a bird.", "max_new": "4", "temperature": "0", "baseline": "1", "pair": "offline"}
    sessions = []
    for _ in range(2):
        at = AppTest.from_file(str(ROOT / "specviz_app" / "app.py"), default_timeout=300)
        at.query_params.update(query)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        sessions.append(at)
    first, second = (at.session_state[keys.LOADED] for at in sessions)
    assert second.trace is first.trace and second.baseline is first.baseline
    assert second.timing is first.timing and len(started) == 1  # one timing thread for one trace
    assert first.source == "run here" and second.source.startswith("run here, shared recording made at ")
    caption = next(c.value for c in sessions[1].caption if c.value.startswith("Showing"))
    assert "shared recording made at" in caption
    first.timing.stop()
    first.timing.join(60)
