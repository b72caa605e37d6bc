"""The token stream stays inside its column (issue 48, O2): a struck-through draft whose text is wider
than the column (a long word, or a run of spaces such as code's indentation) wraps within it instead
of drawing its strike line into the column beside it. Under `white-space: pre-wrap` spaces at the end
of a line hang past the edge, and the line-through of a rejected draft was painted over them.

The stream is specviz.teaching.charts.stream's HTML as the pages show it, set in two columns of a
page in Debian's Chromium (the browser tests' one)."""

from __future__ import annotations

import pytest

from specviz.teaching.charts.stream import token_stream_html

pytestmark = pytest.mark.browser

COLUMN_PX = 220

# Each token's boxes (one per line it wraps onto) against its column's right edge.
OVERFLOW = """() => {
  const column = document.querySelector('#column').getBoundingClientRect();
  return [...document.querySelectorAll('#column .sv-tok')].flatMap(t => [...t.getClientRects()].map(r =>
    [t.className, t.firstChild.textContent.slice(0, 20), Math.round(r.right - column.right)]))
    .filter(([, , past]) => past > 1);
}"""


def _draft(position: int, token: str, accepted: bool, r: float | None) -> dict:
    return {"position": position, "token_id": position, "token": token, "q": 0.9, "p": 0.1, "accept_prob": 0.1,
            "r": r, "accepted": accepted, "beta": 0.2, "q_top": [], "p_top": []}  # fmt: skip


def _iteration() -> dict:
    """Drafts wider than the column: spaces inside and at the end of a token, and one long word."""
    drafts = [
        _draft(1, "if" + " " * 40 + "x", False, 0.5),
        _draft(2, "tail" + " " * 60, False, None),
        _draft(3, "supercalifragilisticexpialidocious_and_more", False, None),
    ]
    correction = {"kind": "resample", "position": 1, "token_id": 9, "token": " ok", "p": 0.5, "residual_top": [],
                  "p_top": []}  # fmt: skip
    return {"index": 0, "accepted_count": 0, "drafts": drafts, "correction": correction}


def test_a_struck_through_draft_wider_than_its_column_stays_in_it(browser):
    """In the session's Chromium (a second Playwright inside the session's one cannot start)."""
    stream = token_stream_html([_iteration()], {}, gamma=3)
    page_html = (
        f"<div style='display:flex;gap:16px'><div id='column' style='flex:0 0 {COLUMN_PX}px'>{stream}</div>"
        "<div id='next' style='flex:1'>the next column</div></div>"
    )
    page = browser.new_page(viewport={"width": 800, "height": 600})
    try:
        page.set_content(page_html)
        assert page.locator("#column .sv-tok.sv-rejected").count() == 1
        assert page.locator("#column .sv-tok.sv-discarded").count() == 2
        assert page.evaluate(OVERFLOW) == []
    finally:
        page.close()
