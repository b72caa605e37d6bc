"""The replicas' shared trace store (specviz/traces/trace_store.py) and the `?trace=<id>` link that opens
a stored run (specviz_app/runs/opening.py): by id, validated, bounded, every bad id a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specviz.errors import TraceError
from specviz.traces.trace import Trace
from specviz.traces.trace_store import ENV, TraceStore, check_id, run_id

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "specviz" / "assets" / "examples" / "01-default.json"


def _example() -> tuple[Trace, Trace | None]:
    base = EXAMPLE.with_name("01-default.baseline.json")
    return Trace.from_json(EXAMPLE.read_bytes()), Trace.from_json(base.read_bytes()) if base.is_file() else None


def test_a_stored_run_comes_back_from_its_id_with_its_baseline(tmp_path):
    store = TraceStore(tmp_path)
    trace, baseline = _example()
    pairs = trace.extra["timing"]["pairs"][:1]  # the example's own first timed pair
    trace.extra["timing"] = {"pairs": pairs, "wanted": 5}  # a run whose pairs are still coming
    tid = run_id([["prompt", 4], True, ["t", "float32", {"body": "packed"}], "ngram"])
    assert tid == run_id([["prompt", 4], True, ["t", "float32", {"body": "packed"}], "ngram"])  # stable
    assert len(tid) == 20 and tid != run_id([["prompt", 5], True, None, None])
    store.put(tid, trace, baseline)
    again, base, written = store.get(tid)
    assert again.output_token_ids == trace.output_token_ids and again.summary == trace.summary
    assert (base is None) == (baseline is None)
    assert again.extra["timing"]["wanted"] == 1  # the file's timing is what it holds
    assert trace.extra["timing"]["wanted"] == 5  # the live trace is untouched
    assert written > 0 and not list(tmp_path.glob(".writing-*"))  # no half-written files left


@pytest.mark.parametrize("bad", ["", "../../etc/passwd", "ABCDEF0123456789abcd", "0" * 19, "0" * 21, "x" * 500])
def test_a_malformed_id_is_refused_with_what_an_id_looks_like(tmp_path, bad):
    with pytest.raises(TraceError, match="is not a stored trace's id: an id is 20 characters"):
        TraceStore(tmp_path).get(bad)
    with pytest.raises(TraceError):
        check_id(bad)


def test_a_missing_or_damaged_stored_run_gets_a_clear_error(tmp_path):
    store = TraceStore(tmp_path)
    with pytest.raises(TraceError, match="No stored trace has the id 0{20}.*Press Run"):
        store.get("0" * 20)
    (tmp_path / ("1" * 20 + ".json")).write_text('{"schema": "specviz.trace/1", "mode": ', encoding="utf-8")
    with pytest.raises(TraceError, match="not valid JSON"):
        store.get("1" * 20)


def test_the_store_is_bounded_oldest_first(tmp_path):
    import os

    store = TraceStore(tmp_path, max_traces=2)
    trace, baseline = _example()
    ids = [run_id([i]) for i in range(3)]
    for n, tid in enumerate(ids):
        store.put(tid, trace, baseline)
        os.utime(tmp_path / f"{tid}.json", (1000 + n, 1000 + n))  # distinct ages on any file system
    store.put(ids[2], trace, baseline)  # a write prunes
    assert [store.has(t) for t in ids] == [False, True, True]
    assert not (tmp_path / f"{ids[0]}.baseline.json").exists()
    with pytest.raises(ValueError):
        TraceStore(tmp_path, max_traces=0)


def _app(query: dict, timeout: float = 120):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "specviz_app" / "app.py"), default_timeout=timeout)
    at.query_params.update(query)
    return at.run()


def _showing(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Showing")).replace("\\", "")


def test_a_trace_link_opens_the_stored_run_and_bad_links_say_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(ENV, str(tmp_path))
    trace, baseline = _example()
    tid = run_id(["a class's run"])
    TraceStore(tmp_path).put(tid, trace, baseline)

    at = _app({"trace": tid})
    assert not at.exception, [e.value for e in at.exception]
    assert _showing(at).startswith(f"Showing: stored run {tid}, recorded at ")
    assert not at.error
    assert at.query_params.get("trace") in (tid, [tid])  # the URL keeps it: a reconnect opens it again

    at = _app({"trace": "not-an-id"})
    assert not at.exception
    assert at.error[0].value.startswith("From the link: 'not-an-id' is not a stored trace's id")
    assert "Nothing was lost" in at.error[0].value

    at = _app({"trace": "f" * 20})
    assert "No stored trace has the id" in at.error[0].value

    monkeypatch.delenv(ENV)
    at = _app({"trace": tid})
    assert "this server keeps no trace store" in at.error[0].value


def test_a_finished_run_is_written_to_the_store_and_linked(tmp_path, monkeypatch):
    from specviz_app import keys

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(ENV, str(tmp_path))
    at = _app({"prompt": "Name a tree.", "max_new": "4", "temperature": "0", "baseline": "0", "pair": "offline"}, 300)
    assert not at.exception, [e.value for e in at.exception]
    loaded = at.session_state[keys.LOADED]
    assert loaded.trace_id and _showing(at).startswith("Showing: run here")
    stored, _, _ = TraceStore(tmp_path).get(loaded.trace_id)
    assert stored.output_token_ids == loaded.trace.output_token_ids
    assert json.loads(stored.to_json())["prompt"] == "Name a tree."
    assert at.query_params.get("trace") in (loaded.trace_id, [loaded.trace_id])
