"""Several browser sessions decode at once against the one app process and its shared cached models.

Each session opens a link with its own settings, so all runs start together. The app's runs decode
batched (specviz.serving.batching): specviz.serving.gate lets the sessions' decodes of the one target hold it
together, their target passes run as one forward; a session that finds the device held by a decode
it cannot join is told it waits. Afterwards every session's trace is downloaded and checked: its
invariants hold, it is the session's own (prompt, seed, γ), greedy output equals the target's own
greedy decode, and a run that shared its passes never had its own timing count as a solo one. The
numbers go to artifacts/concurrency.json (docs/reliability.md quotes them).
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import pytest

from specviz.config import DecodeOptions
from specviz.traces.trace import validate

from .helpers import (
    ARTIFACTS,
    RUN_TIMEOUT_MS,
    act,
    assert_no_traceback,
    classroom,
    download,
    errors,
    goto_page,
    main_text,
    shot,
    showing,
    wait_idle,
)

pytestmark = pytest.mark.browser

MAX_NEW = 32  # long enough that the three sessions' runs overlap on a busy machine
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
        reference = autoregressive_generate(
            query["prompt"], options=DecodeOptions(temperature=0, max_new_tokens=MAX_NEW)
        )
        assert trace["output_token_ids"] == reference.output_token_ids  # greedy: exactly the target's text
        assert baseline["output_token_ids"] == reference.output_token_ids
        shared = max(run["extra"].get("batch", {}).get("most_sessions", 0) for run in (trace, baseline))
        assert trace["config"]["batched"] and baseline["config"]["batched"]  # the app's runs decode batched
        assert trace["extra"]["timing"]["pairs"][0]["batched"] == (shared >= 2)  # a shared timing never counts
        results.append(
            {
                "session": i + 1,
                "gamma": trace["config"]["gamma"],
                "new_tokens": trace["summary"]["new_tokens"],
                "iterations": trace["summary"]["iterations"],
                "speculative_wall_ms": round(trace["summary"]["wall_ms"]),
                "baseline_wall_ms": round(baseline["summary"]["wall_ms"]),
                "told_to_wait": i in saw_waiting,
                "most_sessions_in_a_pass": shared,
            }
        )
    # They ran at once: two shared a pass, or one waited for the device (behind a timing pair, which
    # runs alone). tests/test_concurrency.py shows batching itself without a browser's timing.
    batched = max(r["most_sessions_in_a_pass"] for r in results)
    assert batched >= 2 or saw_waiting, "the sessions' runs never met: none shared a pass, none waited"
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


PLACE = re.compile(r"Waiting for the model: (\d+)(?:st|nd|rd|th) in line(?:, about (\d+) s)?")


ESTIMATES: list[int] = []  # every estimate a waiting page showed


def _place(page) -> int | None:
    """The queue place the page's run status shows now ("3rd in line, about 8 s" -> 3), or None."""
    match = PLACE.search(page.locator('[data-testid="stMain"]').inner_text())
    if match and match.group(2):
        ESTIMATES.append(int(match.group(2)))
    return int(match.group(1)) if match else None


def _wait_for_place(page, timeout_s: float = 120) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        place = _place(page)
        if place is not None:
            return place
        page.wait_for_timeout(150)
    raise AssertionError(f"the page never showed its queue place:\n{main_text(page)[:2000]}")


@pytest.mark.classroom
@classroom
def test_the_queue_shows_places_a_closed_tab_frees_its_place_and_cancel_keeps_the_trace(browser, new_page):
    """One long run holds the model; three sessions queue behind it. The page shows each its place
    and an estimate; closing one tab moves the ones behind it up at once; Cancel leaves the queue and
    keeps the trace the page showed before."""
    short = {"max_new": "8", "temperature": "0", "baseline": "0", "pair": "offline"}
    new_page(dict(short, prompt="Say hello."))  # one finished decode: the gate has a duration to estimate from
    # The holder must outlast three sessions' page loads on a busy CI machine: the target drafting for
    # itself (every draft a full target step) and its baseline, 256 tokens each, about 25 s here;
    # the default pair's 128 tokens once finished before the queue had formed (1st and 1st in line).
    # In bfloat16: another target than the short runs' float32 one, so they cannot join its batch
    # (specviz.serving.batching) and must queue behind it.
    long_run = {"prompt": "Write a long story about a lighthouse keeper.", "max_new": "256", "temperature": "0"}
    holder = new_page(dict(long_run, baseline="1", pair="offline-self", seed="1", dtype="bfloat16"), wait=False)
    _wait_for_status = time.monotonic()
    while "Decoding" not in main_text(holder) and time.monotonic() - _wait_for_status < 120:
        holder.wait_for_timeout(200)

    # A session that shows an example first, so Cancel has a previous trace to keep.
    canceller = new_page()
    before = showing(canceller)
    assert before.startswith("Showing: example"), before

    leaver_ctx = browser.new_context()
    leaver = leaver_ctx.new_page()
    leaver.goto(holder.url.split("?")[0] + "?" + urllib.parse.urlencode(dict(short, prompt="Name a colour.")))
    leaver_place = _wait_for_place(leaver)
    stayer = new_page(dict(short, prompt="Name a fruit."), wait=False)
    stayer_place = _wait_for_place(stayer)
    assert stayer_place > leaver_place >= 1

    # The tab behind which the stayer waits closes: its place is freed within a poll or two.
    leaver_ctx.close()
    closed_at = time.monotonic()
    while (_place(stayer) or 0) >= stayer_place and time.monotonic() - closed_at < 5:
        stayer.wait_for_timeout(100)
    moved_up = _place(stayer)
    assert moved_up is None or moved_up < stayer_place, "closing a waiting tab did not free its place"

    # Cancel while queued: the run leaves the queue, the example stays on show.
    canceller.locator('[data-testid="stSidebar"] button', has_text="Run").first.click()
    _wait_for_place(canceller)
    act(canceller, canceller.locator('[data-testid="stMain"] button', has_text="Cancel this run").first.click)
    assert_no_traceback(canceller)
    assert any(e.startswith("Run cancelled") and "Nothing was lost" in e for e in errors(canceller)), errors(canceller)
    assert showing(canceller) == before
    assert _place(canceller) is None

    assert ESTIMATES, "no waiting page showed an estimate in seconds"
    for page in (holder, stayer):
        wait_idle(page)
        assert showing(page).startswith("Showing: run here"), showing(page)
