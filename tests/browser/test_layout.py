"""Layout checks on pages whose results only appear after a run: the Sweep and the Distribution lab
on the toy pair (seconds). Every metric label and value must show in full (the walk found
"2 temperatu…" cut off), and the result pages are saved as screenshots to look at."""

from __future__ import annotations

import re
import time

import pytest

from specviz.teaching.charts.lab import SIGNIFICANCE

from .helpers import act, assert_no_traceback, main_text, shot, wait_idle

pytestmark = pytest.mark.browser
LAB_SAMPLES = 100

# Elements whose text Streamlit cuts with an ellipsis when it does not fit.
CUT_TEXT = """() => [...document.querySelectorAll(
    '[data-testid="stMain"] [data-testid="stMetricLabel"] p, [data-testid="stMain"] [data-testid="stMetricValue"] div'
  )].filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


def run_on_the_toy_pair(page, button: str) -> None:
    page.locator('[data-testid="stMain"] label', has_text="Toy pair").first.click()
    wait_idle(page)
    act(page, page.locator('[data-testid="stMain"] button', has_text=button).first.click, 240_000)
    assert_no_traceback(page)


def test_the_toy_sweep_results_show_every_number_in_full(new_page):
    page = new_page(path="sweep")
    run_on_the_toy_pair(page, "Run the sweep")
    assert "speedup" in main_text(page).lower()
    shot(page, "run-sweep-toy")
    assert page.evaluate(CUT_TEXT) == []


def test_the_lab_comparison_shows_every_number_in_full(new_page):
    page = new_page(path="lab")
    page.locator('[data-testid="stMain"] label', has_text="Toy pair").first.click()
    wait_idle(page)
    # The page's layout and words are under test here, not the test's power (tests/test_lab.py and
    # tests/test_app_pages.py check the statistics): fewer samples than the toy's default 500.
    samples = page.locator('[data-testid="stMain"]').get_by_role("spinbutton", name="n (samples)")
    samples.fill(str(LAB_SAMPLES))
    act(page, lambda: samples.press("Tab"))
    # The page says about how long a run takes (it promised "a few seconds" and took 32 s).
    promise = re.search(r"about (\d+) s for one rule, (\d+) s for all of them", main_text(page))
    assert promise and "a few seconds" not in main_text(page), main_text(page)[:2000]
    started = time.monotonic()
    page.locator('[data-testid="stMain"] button', has_text="Compare all rules").first.click()
    countdown = page.get_by_text(re.compile(r"Rule \d of \d .*about \d+ s left"))  # the bar counts down
    countdown.first.wait_for(timeout=120_000)
    wait_idle(page, 240_000)
    assert_no_traceback(page)
    took = time.monotonic() - started
    print(f"Compare all rules on the toy pair: {took:.0f} s; the page said about {promise[2]} s")
    text = main_text(page)
    assert "p-value" in text
    shot(page, "run-lab-compare-toy")
    assert page.evaluate(CUT_TEXT) == []
    # The control (the target alone): never "should not be rejected" beside a p-value that was.
    assert "should not be rejected" not in text
    control = re.search(r"Target alone \((\d+) samples\): p-value ([0-9.e+-]+)", text)
    assert control and int(control[1]) == LAB_SAMPLES, text[-3000:]
    if float(control[2]) < SIGNIFICANCE:
        assert "false alarm" in text and f"1 time in {round(1 / SIGNIFICANCE)}" in text, text[-3000:]
    else:
        assert f"not rejected at the {SIGNIFICANCE:g} level" in text, text[-3000:]


# The tokens a card is most likely to leave the window from: the one furthest right on each line of the
# stream and the lowest ones, as indices among the stream's tokens.
EDGE_TOKENS = """() => {
    const tokens = [...document.querySelectorAll('[data-testid="stMain"] .sv-stream .sv-tok')];
    const rects = tokens.map(t => t.getBoundingClientRect());
    const lines = {};
    rects.forEach((r, i) => {
        const line = Math.round(r.top);
        if (!(line in lines) || rects[lines[line]].right < r.right) lines[line] = i;
    });
    const last = Object.keys(lines).map(Number).sort((a, b) => a - b).slice(-3).map(k => lines[k]);
    return [...new Set([...Object.values(lines).slice(0, 6), ...last, tokens.length - 1])];
}"""


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900)])
def test_every_hover_card_opens_inside_the_window(new_page, size):
    """A card at a line's end ran past the window's right edge and one near the bottom opened below it
    (issue 59): hovered where that happens, each card lies inside the window."""
    width, height = size
    page = new_page(viewport=size)  # the first visit's example, its stream drawn
    tokens = page.locator('[data-testid="stMain"] .sv-stream .sv-tok')
    tokens.first.wait_for()
    for i in page.evaluate(EDGE_TOKENS):
        token = tokens.nth(i)
        token.scroll_into_view_if_needed()
        token.evaluate("t => window.scrollBy(0, 0)")
        token.hover()
        card = token.locator(".sv-card")
        card.wait_for(state="visible")
        page.wait_for_timeout(100)  # the placing script runs on the next frame
        box = card.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (i, box)
        assert box["y"] >= 0 and box["y"] + box["height"] <= height, (i, box)
