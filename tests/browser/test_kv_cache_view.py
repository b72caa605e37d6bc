"""The Step inspector's KV-cache view on the first visit's example: the rows of each iteration in
plain words (a chain and a tree iteration), their strip, and the measured comparison of no cache,
cache and cache + speculative decoding, with the numbers the recording holds."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from specviz.labs.kv_cache import load_comparison
from specviz.shipped import ASSETS
from specviz.teaching.charts.kv_cache import cache_caption
from specviz.traces.trace import Trace

from .helpers import act, assert_no_traceback, goto_page, main_text, shot, showing

pytestmark = pytest.mark.browser

EXAMPLE = ASSETS / "examples" / "01-default.json"  # the first visit's example (gallery order)


def test_the_inspector_shows_the_kv_caches_of_a_chain_and_a_tree_iteration(new_page):
    trace = Trace.from_json(EXAMPLE.read_text(encoding="utf-8"))
    page = new_page()
    assert showing(page).startswith("Showing: example:")
    goto_page(page, "Step inspector")
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("The KV caches in this iteration")).to_be_visible()
    opened = next(i for i, it in enumerate(trace.iterations) if it["drafts"])  # it opens on the first that drafted
    for line in cache_caption(trace, opened):
        expect(main.get_by_text(line, exact=True)).to_be_visible()
    tree = next(i for i, it in enumerate(trace.iterations) if "tree" in it)
    for _ in range(tree - opened):
        act(page, main.locator("button", has_text="Next").first.click)
    expect(main.get_by_text(f"Iteration {tree + 1}: the KV caches' rows")).to_be_visible()
    lines = cache_caption(trace, tree)
    assert "the draft tree's other branches" in lines[0]
    for line in lines:
        expect(main.get_by_text(line, exact=True)).to_be_visible()
    assert_no_traceback(page)
    shot(page, "inspector-kv-cache-tree")


def test_the_inspector_shows_the_measured_comparison(new_page):
    comparison = load_comparison()
    page = new_page()
    goto_page(page, "Step inspector")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("No KV cache, KV cache, KV cache + speculative decoding").click()
    expect(main.get_by_text(f"all three made the same {len(comparison.runs[0].tokens)} tokens")).to_be_visible()
    text = main_text(page)
    for run in comparison.runs:
        assert f"{run.tokens_per_s:.1f} tok/s · {run.ms_per_token:.0f} ms/token" in text
    assert_no_traceback(page)
