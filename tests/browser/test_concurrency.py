"""Several browser sessions decode at once against the one app process and its shared cached models.

Each session opens a link with its own settings, so all runs start together. specviz.gate lets one
decode per device run at a time; the others must be told they wait. Afterwards every session's
trace is downloaded and checked: its invariants hold, it is the session's own (prompt, seed, γ), and
greedy output equals the target's own greedy decode. The numbers go to artifacts/concurrency.json
(docs/reliability.md quotes them).
"""

from __future__ import annotations

import json
import time

import pytest

from specviz.trace import validate

from .helpers import ARTIFACTS, RUN_TIMEOUT_MS, assert_no_traceback, download, goto_page, shot, showing, wait_idle

pytestmark = pytest.mark.browser

MAX_NEW = 12
SESSIONS = [
    {"prompt": "List three fruits.", "gamma": "2", "seed": "1"},
    {"prompt": "Explain in one sentence why the sky is blue.", "gamma": "4", "seed": "2"},
    {"prompt": "Copy this list exactly: apple, banana, cherry, apple, banana, cherry.", "gamma": "6", "seed": "3"},
]
WAITING = "Waiting for the model:"


def test_three_sessions_decode_at_once_and_each_gets_its_own_correct_trace(new_page):
    from specviz import autoregressive_generate

    queries = [dict(s, max_new=str(MAX_NEW), temperature="0", baseline="1", pair="offline") for s in SESSIONS]
    start = time.monotonic()
    pages = [new_page(q, wait=False) for q in queries]  # each link starts its run on arrival

    # While they run: a queued session says so (the status line of its run).
    saw_waiting: set[int] = set()
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000 * len(pages)
    while time.monotonic() < deadline:
        states = []
        for i, page in enumerate(pages):
            if page.get_by_text(WAITING).count():
                saw_waiting.add(i)
            states.append(page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state"))
        if all(s == "notRunning" for s in states) and all(p.locator("h1").count() for p in pages):
            break
        pages[0].wait_for_timeout(200)
    for page in pages:
        wait_idle(page)
    elapsed = time.monotonic() - start
    assert saw_waiting, "no session was told it waits for the model"

    results = []
    for i, (page, query) in enumerate(zip(pages, queries, strict=True)):
        assert_no_traceback(page)
        caption = showing(page)
        assert caption.startswith("Showing: run here"), caption
        assert f"γ {query['gamma']} · temperature 0.0 · seed {query['seed']}" in caption  # its own settings
        shot(page, f"concurrent-session-{i + 1}")
        goto_page(page, "Traces")
        trace = json.loads(download(page, "Trace (JSON)"))
        baseline = json.loads(download(page, "Baseline (JSON)"))
        validate(trace)
        validate(baseline)
        assert trace["prompt"] == query["prompt"] and baseline["prompt"] == query["prompt"]
        assert trace["config"]["gamma"] == int(query["gamma"]) and trace["config"]["seed"] == int(query["seed"])
        reference = autoregressive_generate(query["prompt"], temperature=0, max_new_tokens=MAX_NEW)
        assert trace["output_token_ids"] == reference.output_token_ids  # greedy: exactly the target's text
        assert baseline["output_token_ids"] == reference.output_token_ids
        results.append(
            {
                "session": i + 1,
                "gamma": trace["config"]["gamma"],
                "new_tokens": trace["summary"]["new_tokens"],
                "iterations": trace["summary"]["iterations"],
                "speculative_wall_ms": round(trace["summary"]["wall_ms"]),
                "baseline_wall_ms": round(baseline["summary"]["wall_ms"]),
                "told_to_wait": i in saw_waiting,
            }
        )
    report = {
        "sessions": len(pages),
        "decodes": 2 * len(pages),  # speculative + baseline each
        "failures": 0,
        "wall_s_all_sessions": round(elapsed, 1),
        "sessions_told_to_wait": len(saw_waiting),
        "runs": results,
    }
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "concurrency.json").write_text(json.dumps(report, indent=1))
