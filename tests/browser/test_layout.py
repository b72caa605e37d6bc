"""Layout checks on pages whose results only appear after a run: the Sweep and the Distribution lab
on the toy pair (seconds). Every metric label and value must show in full (the walk found
"2 temperatu…" cut off), and the result pages are saved as screenshots to look at."""

from __future__ import annotations

import pytest

from .helpers import assert_no_traceback, main_text, shot, wait_idle

pytestmark = pytest.mark.browser

# Elements whose text Streamlit cuts with an ellipsis when it does not fit.
CUT_TEXT = """() => [...document.querySelectorAll(
    '[data-testid="stMain"] [data-testid="stMetricLabel"] p, [data-testid="stMain"] [data-testid="stMetricValue"] div'
  )].filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


def run_on_the_toy_pair(page, button: str) -> None:
    page.locator('[data-testid="stMain"] label', has_text="Toy pair").first.click()
    wait_idle(page)
    page.locator('[data-testid="stMain"] button', has_text=button).first.click()
    page.wait_for_timeout(500)
    wait_idle(page, 240_000)
    assert_no_traceback(page)


def test_the_toy_sweep_results_show_every_number_in_full(new_page):
    page = new_page(path="sweep")
    run_on_the_toy_pair(page, "Run the sweep")
    assert "speedup" in main_text(page).lower()
    shot(page, "run-sweep-toy")
    assert page.evaluate(CUT_TEXT) == []


def test_the_lab_comparison_shows_every_number_in_full(new_page):
    page = new_page(path="lab")
    run_on_the_toy_pair(page, "Compare all four rules")
    assert "p-value" in main_text(page)
    shot(page, "run-lab-compare-toy")
    assert page.evaluate(CUT_TEXT) == []
