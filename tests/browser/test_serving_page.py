"""The Serving page ("Batch size", issue 38 item 2) in Chromium at 1280 × 720, as a teacher projects it:
it opens on the shipped recording with no model loaded, draws its three charts and says the
crossover in the words the library computes from the recording; the pass-cost chart's "B n"
labels never cover each other (they are thinned to fit its half-width column); the table shows all its
columns, none scrolled out of view on the right (issue 38's follow-up); the JSON download is
the recording itself, and the Save-or-load block offers both downloads and the uploader."""

from __future__ import annotations

import pytest

from specviz.labs import serving
from specviz.teaching.charts import serving as charts

from .helpers import download, main_text, shot

pytestmark = pytest.mark.browser

CHARTS = ("sv-throughput", "sv-pass", "sv-latency")
# Each label of a chart as drawn: its text and its box on the screen.
LABELS = """key => [...document.querySelectorAll(`.st-key-${key} .annotation-text`)].map(e => {
  const r = e.getBoundingClientRect();
  return [e.textContent, r.left, r.right, r.top, r.bottom]})"""
# The page's data grid: its column headers and how far its columns overflow its width (the grid then
# scrolls sideways and its last columns are cut off at the right edge).
TABLE = """() => {
  const e = document.querySelector('[data-testid="stMain"] [data-testid="stDataFrame"]');
  const s = e.querySelector('.dvn-scroller');
  return {heads: [...e.querySelectorAll('table[role="grid"] thead th')].map(h => h.innerText.trim()),
          overflow: s.scrollWidth - s.clientWidth}}"""
HEADS = ["B", "tok/s T", "tok/s S", "gain ×", "s/req T", "s/req S", "ms/row T", "ms/row S", "rows T", "rows S",
         "identical"]  # fmt: skip


def test_serving_opens_on_the_recording_with_its_charts_sentence_and_download(new_page):
    recorded = serving.shipped()
    assert recorded is not None, "the recording specviz/assets/serving.json is missing or unreadable"
    page = new_page(path="serving", viewport=(1280, 720))
    for key in CHARTS:  # each chart's own drawing (Plotly's title), not only its placeholder
        page.locator(f".st-key-{key} .js-plotly-plot .gtitle").wait_for()
    text = main_text(page)
    assert "Serving: batch size" in text and "Showing the recording shipped with specviz" in text
    info = page.locator('[data-testid="stAlertContentInfo"]').first.inner_text()
    assert charts.crossover_sentence(recorded) in info, info
    assert charts.memory_bound_sentence(recorded) in text

    labels = page.evaluate(LABELS, "sv-pass")
    laid_out = [note.text for note in charts.pass_cost_figure(recorded).layout.annotations]
    assert sorted(t for t, *_ in labels) == sorted(laid_out), labels  # every label the chart module kept
    chart = page.locator(".st-key-sv-pass").bounding_box()
    for i, (name, left, right, top, bottom) in enumerate(labels):
        assert chart["x"] <= left and right <= chart["x"] + chart["width"], (name, chart)  # none clipped
        for other, *box in labels[i + 1 :]:
            apart = right <= box[0] or box[1] <= left or bottom <= box[2] or box[3] <= top
            assert apart, f"{name!r} covers {other!r}"
    page.locator(".st-key-sv-pass").scroll_into_view_if_needed()  # the charts in the screenshot
    shot(page, "serving-1280")

    frame = page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first  # the regime's table follows
    frame.scroll_into_view_if_needed()
    frame.locator('table[role="grid"] thead th').last.wait_for(state="attached")  # its headers drawn
    frame.locator(".dvn-scroller").wait_for()
    table = page.evaluate(TABLE)
    shot(page, "serving-table-1280")
    assert table["heads"] == HEADS, table  # every column under its short header (a key missed keeps its long one)
    assert table["overflow"] <= 1, table  # no column pushed past the right edge

    assert page.get_by_role("heading", name="Save or load").count() == 1
    buttons = page.locator('[data-testid="stDownloadButton"] button')
    assert buttons.all_inner_texts() == ["Serving (JSON)", "Serving (CSV)"]
    assert page.locator('[data-testid="stFileUploaderDropzone"]').count() == 1
    saved = serving.from_json(download(page, "Serving (JSON)"))
    assert saved.cells == recorded.cells and saved.config == recorded.config
