"""A speedup a student can trust, in Chromium (issues 24 and 35): a Run answers at once on a fresh
app, with a status while the models load, then its text and first speedup; the speedup is the median
of timed pairs with their range, and the same number on the Playground, the Timeline and Theory,
whose verdict never contradicts it; every speed number comes from one set of pairs.

The tests that read the pairs run on an app of their own that times the fewest pairs after each run
(SPECVIZ_TIMING_SECONDS=1): the suite's shared app times none beyond a run's own (0), since the
other tests check what a run shows, not its timing.

How fast and how steady (a status within a second, the first speedup within 8 s, five identical
runs within ±10%) are wall-clock goals: `scripts/bench_app.py` measures them on a quiet machine
(docs/benchmarks.md). These tests hold the behaviour, on any machine, at any speed."""

from __future__ import annotations

import re
import time

import pytest

from specviz.config import SPEEDUP_MIN_PAIRS

from .conftest import serve_app
from .helpers import (
    ARTIFACTS,
    RUN_TIMEOUT_MS,
    act,
    assert_no_traceback,
    click_run,
    goto_page,
    run_button_in_sight,
    shot,
    wait_idle,
    watch_server,
)

STATUS = re.compile(
    r"Loading the models|Starting the run|Decoding speculatively|Decoding with the target alone|Waiting for the model"
)
WATCH_STATUS = f"""() => {{
    window.__svStatuses = [];
    const status = new RegExp({STATUS.pattern!r});
    new MutationObserver(() => {{
        const seen = document.body.innerText.match(status);
        if (seen && !window.__svStatuses.includes(seen[0])) window.__svStatuses.push(seen[0]);
    }}).observe(document.body, {{subtree: true, childList: true, characterData: true}});
}}"""
pytestmark = pytest.mark.browser
UNDER_LOAD = "(, measured under load)?"  # a note's mark when a pair the figures use ran while pages drew


@pytest.fixture(scope="module")
def timed_app():
    """The URL of an app that times the fewest pairs after each run, for this file's tests of them."""
    with serve_app(ARTIFACTS / "app-timed.log", {"SPECVIZ_TIMING_SECONDS": "1"}) as url:
        yield url


def speedup_metric(page) -> tuple[float, str]:
    """The Speedup metric's value and the line under it ('1.22–1.38 over 5 pairs')."""
    metric = page.locator('[data-testid="stMetric"]', has_text="Speedup").first
    # Both read in one evaluation: two separate reads can straddle a redraw, pairing the median of
    # an earlier render (a streamed first pair still among the figures) with the finished range.
    value, note = metric.evaluate(
        """m => ['stMetricValue', 'stMetricDelta'].map(
            id => (m.querySelector(`[data-testid="${id}"]`) || {innerText: ''}).innerText)"""
    )
    return float(value.strip().rstrip("×")), note.strip()


def wait_for_all_pairs(page, timeout_s: float = 180) -> tuple[float, str]:
    """Wait until the background pairs are in (the note says 'over N pairs'); the median and note.
    Read only on a page the app has finished drawing: while it draws the run, the metric still on
    show can be the page before's (the first visit's example, its pairs long in)."""
    deadline = time.monotonic() + timeout_s
    note = ""
    while time.monotonic() < deadline:
        wait_idle(page)
        try:
            median, note = speedup_metric(page)
        except Exception:  # noqa: BLE001 - the page is being drawn again; look once more
            median, note = float("nan"), ""
        if re.fullmatch(r"\d+\.\d\d–\d+\.\d\d over \d+ pairs" + UNDER_LOAD, note):
            return median, note
        page.wait_for_timeout(500)
    raise AssertionError(f"the timed pairs did not all come in within {timeout_s:.0f} s (last note {note!r})")


def test_a_fresh_app_answers_a_run_with_a_status_and_then_its_text_and_first_speedup(browser):
    """From a fresh server: the Run button in sight (1400×1000); after the click a status (the models
    are still loading in the background), then the text and the first speedup.
    The other pages that run keep the button in sight too: tests/browser/test_journeys.py checks
    them after a run."""
    with serve_app(ARTIFACTS / "app-fresh.log") as url:
        ctx = watch_server(browser.new_context(viewport={"width": 1400, "height": 1000}))
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=RUN_TIMEOUT_MS)
        assert run_button_in_sight(page, 1000)
        # Every status the page shows, noted as it is drawn: a fast machine may finish the run before
        # a look could find one, so the page itself remembers.
        page.evaluate(WATCH_STATUS)
        page.locator('[data-testid="stSidebar"] button', has_text="Run").first.click()
        page.wait_for_function("() => document.body.innerText.includes('Showing: run here')", timeout=RUN_TIMEOUT_MS)
        assert page.evaluate("window.__svStatuses"), "no status was shown between the click and the text"
        page.locator('[data-testid="stMetric"]', has_text="Speedup").first.wait_for()
        shot(page, "trust-first-run")  # its first speedup (one pair: this app times no more; the tests below do)
        wait_idle(page)
        assert_no_traceback(page)
        ctx.close()


def test_a_run_shows_its_own_range_and_every_page_the_same_speedup(new_page, timed_app):
    """A default Run shows its median with the range of its pairs (at least the fewest pairs); the
    Timeline and Theory show the same number, and Theory's verdict on the run's own values does not
    say 'pays' beside a measured loss. (Five such runs within ±10% of their median is a wall-clock
    goal: scripts/bench_app.py.)

    The Run has a seed of its own: the app shares a recording between identical settings
    (specviz_app.serving.shared_runs), so the default seed could show another test's run. The default
    settings are greedy, so the seed changes neither a token nor any work."""
    page = new_page(app=timed_app)
    medians = []
    for i in range(1):
        seed = page.locator('[data-testid="stSidebar"]').get_by_label("Seed")
        seed.fill(str(i + 1))
        act(page, lambda s=seed: s.press("Tab"))
        page.locator('[data-testid="stSidebar"] button', has_text="Run").first.click()
        # This run's own page (the last run's also said "run here"): its caption names its seed.
        page.wait_for_function(
            f"() => /Showing: run here.*seed {i + 1}\\b/.test(document.body.innerText)", timeout=RUN_TIMEOUT_MS
        )
        median, note = wait_for_all_pairs(page)
        pairs = int(re.search(r"over (\d+) pairs", note).group(1))
        assert pairs >= SPEEDUP_MIN_PAIRS, note
        low, high = (float(x) for x in re.findall(r"\d+\.\d\d", note))
        assert low <= median <= high, (median, note)
        medians.append(median)
        wait_idle(page)
    shot(page, "trust-after-a-run")

    goto_page(page, "Timeline")
    wait_idle(page)
    assert speedup_metric(page)[0] == medians[-1]
    goto_page(page, "Theory")
    wait_idle(page)
    act(page, page.locator("button", has_text="Use the current trace").first.click)
    measured = page.locator('[data-testid="stMetric"]', has_text=re.compile(r"^Measured")).first
    assert float(measured.locator('[data-testid="stMetricValue"]').inner_text().rstrip("×")) == medians[-1]
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert "Prediction with measured v" in text and "The prediction with the measured v" in text
    if medians[-1] < 1:
        assert "some γ gives a speedup" not in text, "Theory says 'pays' beside a measured loss"
    shot(page, "trust-theory")


# Every "k of N pairs in" the page shows (the timing line and the note under the Speedup), in the
# order they appear: installed before the Run, so a count that is drawn and gone again is still seen.
WATCH_COUNTS = """() => {
    window.__svCounts = [];
    const look = () => {
        for (const el of document.querySelectorAll('[data-testid="stMain"] [data-testid="stCaptionContainer"]')) {
            const m = el.innerText.match(/(\\d+) of (\\d+) pairs in/);
            const seen = window.__svCounts;
            if (m && seen[seen.length - 1] !== m[0]) seen.push(m[0]);
        }
    };
    new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""

# The Speedup metric's note reads "x–y over N pairs" and no timing line is left: every pair is in.
FINISHED = """() => {
    const metric = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetric"]')]
        .find(m => m.innerText.includes('Speedup'));
    const note = metric && metric.querySelector('[data-testid="stMetricDelta"]');
    const done = /^\\d+\\.\\d\\d–\\d+\\.\\d\\d over \\d+ pairs(, measured under load)?$/;
    return Boolean(note) && done.test(note.innerText.trim())
        && !document.body.innerText.includes('Timing the speedup again');
}"""

# The speed metrics' values and notes, read in one evaluation so they come from one drawing.
READ_METRICS = """() => Object.fromEntries(
    [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetric"]')].map(m => {
        const part = id => (m.querySelector(`[data-testid="${id}"]`) || {innerText: ''}).innerText.trim();
        return [part('stMetricLabel'), [part('stMetricValue'), part('stMetricDelta')]];
    }))"""


def test_the_playground_speed_numbers_come_from_one_set_of_pairs(new_page, timed_app):
    """One set of timed pairs behind every speed number (issue 35): after a default Run's timing has
    finished, the Playground's speedup is its speculative tok/s ÷ its target-only tok/s (both shown
    beside it, within 3%), lies inside the range shown under it, and that range's count of pairs is
    the count the timing line counted to. The Timeline shows the same figure. It waits for the
    finished state the page itself shows ("x–y over N pairs" under the Speedup, the timing line
    gone), never for a fixed time, and asserts agreement between numbers, never a speed."""
    page = new_page(app=timed_app)
    page.evaluate(WATCH_COUNTS)
    click_run(page)
    shot(page, "speed-numbers-timing")  # during the timing, on most machines (the counts are watched)
    page.wait_for_function(FINISHED, timeout=RUN_TIMEOUT_MS, polling=500)
    wait_idle(page)
    shot(page, "speed-numbers-finished")

    metrics = page.evaluate(READ_METRICS)
    speedup, note = metrics["Speedup"]
    shown = float(speedup.rstrip("×"))
    spec, alone = float(metrics["Speculative tok/s"][0]), float(metrics["Target-only tok/s"][0])
    assert spec / alone == pytest.approx(shown, rel=0.03), (spec, alone, speedup)
    low, high, pairs = re.fullmatch(r"(\d+\.\d\d)–(\d+\.\d\d) over (\d+) pairs" + UNDER_LOAD, note).groups()[:3]
    assert float(low) <= shown <= float(high), (speedup, note)

    counts = page.evaluate("() => window.__svCounts")
    assert counts, "the page never showed how many pairs were in"
    wanted = {int(re.search(r"of (\d+)", c).group(1)) for c in counts}
    final = int(re.search(r"(\d+) of (\d+)", counts[-1]).group(2))
    assert int(pairs) == final, (note, counts)
    assert wanted == {final}, counts  # the line counted to one N all along, the N the result shows

    goto_page(page, "Timeline")  # the same figure, range and count on the Timeline
    assert page.evaluate(READ_METRICS)["Speedup"] == [speedup, note]


# Theory's Measured metric once every pair is in: its note "x–y, N pairs" and no timing line left.
THEORY_FINISHED = """() => {
    const metric = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetric"]')]
        .find(m => m.innerText.trim().startsWith('Measured'));
    const note = metric && metric.querySelector('[data-testid="stMetricDelta"]');
    const done = /^\\d+\\.\\d\\d–\\d+\\.\\d\\d, \\d+ pairs(, measured under load)?$/;
    return Boolean(note) && done.test(note.innerText.trim())
        && !/\\d+ of \\d+ pairs in/.test(document.querySelector('[data-testid="stMain"]').innerText);
}"""


def test_theory_follows_the_pairs_while_they_come_in(new_page, timed_app):
    """Theory opened while a run's pairs are still being timed used to keep the figure it was first drawn
    with ("1.13×, one timed pair" beside the Playground's "1.13×, 1.11–1.15 over 3 pairs", issue 59). It
    must follow them: once they are in, its Measured figure, range and count are the Playground's."""
    page = new_page(app=timed_app)
    seed = page.locator('[data-testid="stSidebar"]').get_by_label("Seed")
    seed.fill("7")
    act(page, lambda: seed.press("Tab"))
    page.locator('[data-testid="stSidebar"] button', has_text="Run").first.click()
    page.wait_for_function("() => /Showing: run here.*seed 7\\b/.test(document.body.innerText)", timeout=RUN_TIMEOUT_MS)
    goto_page(page, "Theory")  # at once: the pairs are still being timed on most machines
    page.wait_for_function(THEORY_FINISHED, timeout=RUN_TIMEOUT_MS, polling=500)
    wait_idle(page)
    measured = page.locator('[data-testid="stMetric"]', has_text=re.compile(r"^Measured")).first
    value = float(measured.locator('[data-testid="stMetricValue"]').inner_text().rstrip("×"))
    low, high, pairs, mark = re.fullmatch(
        r"(\d+\.\d\d)–(\d+\.\d\d), (\d+) pairs(, measured under load)?",
        measured.locator('[data-testid="stMetricDelta"]').inner_text().strip(),
    ).groups()
    goto_page(page, "Playground")
    median, note = wait_for_all_pairs(page)
    assert value == median and note == f"{low}–{high} over {pairs} pairs{mark or ''}", (value, low, high, pairs, note)
