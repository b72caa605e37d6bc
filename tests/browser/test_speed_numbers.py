"""One set of timed pairs behind every speed number (issue 35), in Chromium: after a default Run's
timing has finished, the Playground's speedup is its speculative tok/s ÷ its target-only tok/s (both
shown beside it, within 3%), lies inside the range shown under it, and that range's count of pairs
is the count the timing line counted to. The Timeline shows the same figure.

It waits for the finished state the page itself shows ("x–y over N pairs" under the Speedup, the
timing line gone), never for a fixed time. Under the suite's SPECVIZ_TIMING_SECONDS=0 a run gets the
fewest pairs, so this is quick; it asserts agreement between numbers, never a speed.
"""

from __future__ import annotations

import re

import pytest

from .helpers import RUN_TIMEOUT_MS, click_run, goto_page, shot, wait_idle

pytestmark = pytest.mark.browser

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
    return Boolean(note) && /^\\d+\\.\\d\\d–\\d+\\.\\d\\d over \\d+ pairs$/.test(note.innerText.trim())
        && !document.body.innerText.includes('Timing the speedup again');
}"""

# The speed metrics' values and notes, read in one evaluation so they come from one drawing.
READ_METRICS = """() => Object.fromEntries(
    [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetric"]')].map(m => {
        const part = id => (m.querySelector(`[data-testid="${id}"]`) || {innerText: ''}).innerText.trim();
        return [part('stMetricLabel'), [part('stMetricValue'), part('stMetricDelta')]];
    }))"""


def test_the_playground_speed_numbers_come_from_one_set_of_pairs(new_page):
    page = new_page()
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
    low, high, pairs = re.fullmatch(r"(\d+\.\d\d)–(\d+\.\d\d) over (\d+) pairs", note).groups()
    assert float(low) <= shown <= float(high), (speedup, note)

    counts = page.evaluate("() => window.__svCounts")
    assert counts, "the page never showed how many pairs were in"
    wanted = {int(re.search(r"of (\d+)", c).group(1)) for c in counts}
    final = int(re.search(r"(\d+) of (\d+)", counts[-1]).group(2))
    assert int(pairs) == final, (note, counts)
    assert wanted == {final}, counts  # the line counted to one N all along, the N the result shows

    goto_page(page, "Timeline")  # the same figure, range and count on the Timeline
    assert page.evaluate(READ_METRICS)["Speedup"] == [speedup, note]
