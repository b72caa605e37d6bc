"""Check the pair's result is seen whole (issue 48, E6): it is drawn at the sidebar's foot, under the
custom pair's fields, and a long error (a draft that is not on this machine) ran past the bottom of
a 1280×720 window, unseen until the sidebar was scrolled. Now the sidebar brings it into view."""

from __future__ import annotations

import pytest

from specviz.teaching.catalogue import words

from .helpers import act, assert_no_traceback, choose, type_into

pytestmark = pytest.mark.browser

VIEWPORT = (1280, 720)
RESULT = ".st-key-check_pair_result [data-testid='stAlert']"
# The result lies wholly in the window; one taller than the window shows its top.
IN_VIEW = f"""() => {{
  const e = document.querySelector("{RESULT}");
  if (!e) return false;
  const r = e.getBoundingClientRect(), h = window.innerHeight;
  return r.height > h ? r.top >= 0 && r.top < h / 2 : r.top >= 0 && r.bottom <= h;
}}"""


@pytest.mark.parametrize(("draft", "said"), [("nobody/no-such-draft", "nobody/no-such-draft"), ("ngram", "vocabulary")])
def test_the_pairs_check_is_shown_whole_in_the_window(new_page, draft, said):
    w = words("sidebar", "en")
    page = new_page(viewport=VIEWPORT)
    choose(page, w["pair"], w["pair_custom"])
    type_into(page, w["target_name"], "offline:smollm2-135m-instruct")
    type_into(page, w["draft_name"], draft)
    button = page.locator('[data-testid="stSidebar"] button', has_text=w["check_pair_button"])
    act(page, button.click)
    assert_no_traceback(page)
    result = page.locator(RESULT).first
    assert said in result.inner_text()
    page.wait_for_function(IN_VIEW, timeout=10_000)  # scrolled there once drawn: no scrolling by hand
    box = result.bounding_box()
    assert box and box["y"] >= 0 and box["y"] < VIEWPORT[1], box
