"""A speedup a student can trust, in Chromium (issue 24): a Run answers at once and shows its first
speedup within seconds on a fresh app; the speedup is the median of timed pairs with its range,
steady across identical runs, and the same number on the Playground, the Timeline and Theory,
whose verdict never contradicts it."""

from __future__ import annotations

import re
import statistics
import time

import pytest

from specviz.config import SPEEDUP_MIN_PAIRS

from .conftest import serve_app
from .helpers import ARTIFACTS, RUN_TIMEOUT_MS, assert_no_traceback, goto_page, run_button_in_sight, shot, wait_idle

STATUS = re.compile(r"Loading the models|Decoding speculatively|Decoding with the target alone|Waiting for the model")
FIRST_STATUS_S = 1.0  # the bar: a Run shows a status within a second ...
FIRST_SPEEDUP_S = 8.0  # ... and the first default Run its text and first speedup within 8 s of a fresh app
# Five identical runs: every median within this of their common median. The bar is 10%,
# measured with nothing else running (docs/benchmarks.md); a test machine running the rest of the
# suite beside the app scatters more, so the test holds 20%: still twice as tight as the flips it
# guards against (0.88x, 1.26x and 1.56x for one setting, single timings, -30% to +24%).
STEADY = 0.20
# These tests time the app: `./dev.sh test` runs them on their own, after the parallel part.
pytestmark = [pytest.mark.browser, pytest.mark.quiet]


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
    """Wait until the background pairs are in (the note says 'over N pairs'); the median and note."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            median, note = speedup_metric(page)
        except Exception:  # noqa: BLE001 - the page is being drawn again; look once more
            median, note = float("nan"), ""
        if re.fullmatch(r"\d+\.\d\d–\d+\.\d\d over \d+ pairs", note):
            return median, note
        page.wait_for_timeout(500)
    raise AssertionError(f"the timed pairs did not all come in within {timeout_s:.0f} s (last note {note!r})")


def test_a_fresh_app_answers_a_run_at_once_and_shows_its_first_speedup_within_8_s(browser):
    """From a fresh server: the Run button in sight (1400×1000), a status within a second of the click
    (the models are still loading in the background), and the text and first speedup within 8 s.
    The other pages that run keep the button in sight too: tests/browser/test_journeys.py checks
    them after a run, in the parallel part, where walking the pages takes no time from this quiet one."""
    with serve_app(ARTIFACTS / "app-fresh.log") as url:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=RUN_TIMEOUT_MS)
        assert run_button_in_sight(page, 1000)
        started = time.monotonic()
        page.locator('[data-testid="stSidebar"] button', has_text="Run").first.click()
        page.get_by_text(STATUS).first.wait_for(timeout=30_000)
        first_status = time.monotonic() - started
        page.wait_for_function("() => document.body.innerText.includes('Showing: run here')", timeout=RUN_TIMEOUT_MS)
        page.locator('[data-testid="stMetric"]', has_text="Speedup").first.wait_for()
        first_speedup = time.monotonic() - started
        shot(page, "trust-first-run")
        median, _ = speedup_metric(page)
        print(f"first status {first_status:.2f} s, text and first speedup {first_speedup:.1f} s ({median:.2f}×)")
        assert first_status <= FIRST_STATUS_S, f"the first status came {first_status:.2f} s after Run"
        assert first_speedup <= FIRST_SPEEDUP_S, f"the first speedup came {first_speedup:.1f} s after Run"
        wait_idle(page)
        assert_no_traceback(page)
        ctx.close()


def test_identical_runs_agree_and_every_page_shows_the_same_speedup(new_page):
    """Five fresh default Runs: each shows its median with the range of its pairs, all five close
    to their common median (STEADY); the Timeline and Theory show the same number, and Theory's verdict
    on the run's own values does not say 'pays' beside a measured loss.

    Each Run has its own seed, 1 to 5: the app shares a recording between identical settings
    (specviz_app.shared_runs), so the same seed would show the first run five times. The default
    settings are greedy, so the seed changes neither a token nor any work: the five decode alike."""
    page = new_page()
    medians = []
    for i in range(5):
        seed = page.locator('[data-testid="stSidebar"]').get_by_label("Seed")
        seed.fill(str(i + 1))
        seed.press("Tab")
        page.wait_for_timeout(400)
        wait_idle(page)
        page.locator('[data-testid="stSidebar"] button', has_text="Run").first.click()
        # This run's own page (the last run's also said "run here"): its caption names its seed.
        page.wait_for_function(
            f"() => /Showing: run here.*seed {i + 1}\\b/.test(document.body.innerText)", timeout=RUN_TIMEOUT_MS
        )
        if i == 0:
            page.get_by_text("Timing the speedup again").first.wait_for(timeout=60_000)  # the page says how many are in
            assert re.search(r"\d+ of \d+ pairs in", page.locator('[data-testid="stMain"]').inner_text())
            shot(page, "trust-timing")
        median, note = wait_for_all_pairs(page)
        pairs = int(re.search(r"over (\d+) pairs", note).group(1))
        assert pairs >= SPEEDUP_MIN_PAIRS, note
        low, high = (float(x) for x in re.findall(r"\d+\.\d\d", note))
        assert low <= median <= high, (median, note)
        medians.append(median)
        wait_idle(page)
    shot(page, "trust-after-five-runs")
    common = statistics.median(medians)
    print(f"five runs: {medians}, common median {common:.2f}")
    assert all(abs(m - common) <= STEADY * common for m in medians), (medians, common)

    goto_page(page, "Timeline")
    wait_idle(page)
    assert speedup_metric(page)[0] == medians[-1]
    goto_page(page, "Theory")
    wait_idle(page)
    page.locator("button", has_text="Use the current trace").first.click()
    page.wait_for_timeout(500)
    wait_idle(page)
    measured = page.locator('[data-testid="stMetric"]', has_text=re.compile(r"^Measured")).first
    assert float(measured.locator('[data-testid="stMetricValue"]').inner_text().rstrip("×")) == medians[-1]
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert "Prediction with measured v" in text and "The prediction with the measured v" in text
    if medians[-1] < 1:
        assert "some γ gives a speedup" not in text, "Theory says 'pays' beside a measured loss"
    shot(page, "trust-theory")
