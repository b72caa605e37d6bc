"""The lesson at projector size: presenter view at 1280×720, English and Chinese, every step.

A teacher projects the lesson on a 1280×720 screen: each step must fit (the page at most 760 px
tall, its title, figure and takeaway on screen without scrolling), its chart and legend text must
be read from the back of the room (at least 20 px, dark ink), and its markdown must render (no
literal `**`, which CommonMark leaves when bold meets CJK punctuation). On a smaller (1024×768) and
a larger (1920×1080) screen nothing may scroll and no button label may be cut, and at 1920×1080 the
step fills at least 80% of the height. One browser page per language walks through all the steps
with the Next button, measuring each step at the three sizes; a screenshot per step goes to
artifacts/screenshots/.

A teacher also switches the presenter view on from the page (not only from a ?presenter=1 link) and
then walks the lesson with Next, Back and the table of contents: each press must move one step
(issue 35: after the switch, Next stuck on step 2, because the table of contents was bound to the
step and, folded in a closed popover, kept sending back the step it last showed).
"""

from __future__ import annotations

import re
import time

import pytest

from specviz.teaching.lesson import load_lesson

from .helpers import assert_no_traceback, shot, wait_idle, wait_presenter_styled

pytestmark = pytest.mark.browser

VIEWPORT = (1280, 720)
MAX_PAGE_PX = 760
MIN_TEXT_PX = 20
STEPS = len(load_lesson("en")["steps"])  # the second half (issue 38) included
# The steps whose notes link to the pages that measure what they teach (issue 38, item 4): the
# links sit beside the figure, not in the folded text, so a teacher can click them while projecting.
LINKED = {step: s["figure"] for step, s in enumerate(load_lesson("en")["steps"], 1) if s["figure"] in
          ("task", "system", "family")}  # fmt: skip

# Everything the checks read, in one round trip: the page's scroll height (Streamlit scrolls its
# main section, not the document, so take the tallest of the candidates) and where its content
# ends, the bottoms of the title, the figure and the takeaway, how far the chart's title reaches
# below the top of its y-axis title, and the size and ink of every chart, legend and caption text.
MEASURE = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const tall = [document.documentElement, document.querySelector('[data-testid="stAppViewContainer"]'), main]
    .filter(Boolean).map(e => e.scrollHeight);
  const bottom = sel => { const e = main.querySelector(sel); return e ? e.getBoundingClientRect().bottom : null; };
  const ink = e => {  // [font px, the colour as seen on white (opacities blended in), text]
    const s = getComputedStyle(e), svg = e.tagName.toLowerCase() === 'text';
    const c = (svg ? s.fill : s.color).match(/[0-9.]+/g).map(Number);
    let alpha = (c.length > 3 ? c[3] : 1) * (svg ? parseFloat(s.fillOpacity) : 1);
    for (let x = e; x && x !== main; x = x.parentElement) alpha *= parseFloat(getComputedStyle(x).opacity);
    const seen = c.slice(0, 3).map(v => Math.round(255 - (255 - v) * alpha));
    return [parseFloat(s.fontSize), seen, (e.textContent || '').trim().slice(0, 40)];
  };
  const texts = [...main.querySelectorAll('.js-plotly-plot text, .sv-legend, [data-testid="stCaptionContainer"]')]
    .filter(e => (e.textContent || '').trim() && e.getBoundingClientRect().width > 0).map(ink);
  const box = sel => { const e = main.querySelector(sel); return e ? e.getBoundingClientRect() : null; };
  const ytitle = box('.js-plotly-plot .g-ytitle'), ctitle = box('.js-plotly-plot .g-gtitle');
  return {height: Math.max(...tall), content: Math.round(box('[data-testid="stMainBlockContainer"]').bottom),
          title: bottom('h1'), figure: bottom('.js-plotly-plot'), takeaway: bottom('[data-testid="stAlert"]'),
          overlap: ytitle && ctitle && ytitle.height ? ctitle.bottom - ytitle.top : null,
          texts: texts, visible: main.innerText};
}"""


# Each button's label, whole: its text is not cut (no overflow) and sits inside the button's box.
LABELS = """() => [...document.querySelectorAll('[data-testid="stMain"] button')]
  .filter(b => b.getBoundingClientRect().width > 0 && b.innerText.trim())
  .map(b => {
    const box = b.getBoundingClientRect();
    const cut = [...b.querySelectorAll('p, span, div')]
        .some(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0)
      || [...b.querySelectorAll('p')].some(e => { const r = e.getBoundingClientRect();
           return r.left < box.left - 1 || r.right > box.right + 1 || r.bottom > box.bottom + 1; });
    return [b.innerText.replace(/\\s+/g, ' ').trim(), cut];
  })"""

# Every chart has been laid out at its box's size: Plotly draws its SVG at the size of the element
# it was given, so a chart still at the old size has not followed a resize yet.
CHARTS_FIT = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].every(p => {
  const svg = p.querySelector('.main-svg');
  return svg && Math.abs(svg.getAttribute('width') - p.clientWidth) <= 1
             && Math.abs(svg.getAttribute('height') - p.clientHeight) <= 1;
})"""
SCREENS = [VIEWPORT, (1024, 768), (1920, 1080)]  # the projector first; then a smaller and a larger screen


def wait_drawn(page, step: int, timeout_s: float = 180) -> None:  # bounds a hang only
    """Wait until step `step` is drawn and its script run has ended (the sidebar is hidden in
    presenter view, so helpers.wait_idle, which waits for it, does not apply)."""
    page.locator('[data-testid="stMain"] h1', has_text=f"{step}.").first.wait_for(timeout=timeout_s * 1000)
    app = page.locator('[data-testid="stApp"]')
    deadline, quiet = time.monotonic() + timeout_s, 0
    while quiet < 3:
        quiet = quiet + 1 if app.get_attribute("data-test-script-state") == "notRunning" else 0
        assert time.monotonic() < deadline, f"step {step} was still running after {timeout_s:.0f} s"
        page.wait_for_timeout(150)
    # Plotly lays out its text after the element appears: wait for the text itself.
    page.locator('[data-testid="stMain"] .js-plotly-plot .main-svg text').first.wait_for(
        state="attached", timeout=timeout_s * 1000
    )
    wait_presenter_styled(page, int(timeout_s * 1000))  # what MEASURE reads is the styled page


def dark(rgb: list[float]) -> bool:
    """Dark ink: the colour's relative luminance (WCAG) is at most 0.1 (a contrast of 7:1 or more
    on white). White text counts as well: only a bar's label is white, on the bar's dark fill."""
    lin = [(v / 255 / 12.92) if v <= 10 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in rgb]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return lum <= 0.1 or min(rgb) >= 250


# True once the reading of the function given (MEASURE's text) is the one the last poll saw: the page
# has stopped moving.
UNCHANGED = """(script) => { const now = JSON.stringify((0, eval)('(' + script + ')')());
  const same = window.__svLastReading === now; window.__svLastReading = now; return same; }"""


def settled(page, script: str, timeout_s: float = 60):
    """`script`'s reading once the page has stopped moving: after a resize Streamlit and Plotly lay
    the page out again over several frames, so wait until every chart fills its box and two readings
    300 ms apart agree (the timeout bounds a hang only)."""
    page.wait_for_function(CHARTS_FIT, timeout=timeout_s * 1000)
    page.evaluate("() => { window.__svLastReading = undefined; }")
    page.wait_for_function(UNCHANGED, arg=script, polling=300, timeout=timeout_s * 1000)
    return page.evaluate(script)


def projector_problems(m: dict, where: str, step: int, page) -> list[str]:
    """What a 1280×720 projector needs of a step: it fits, its chart, legend and caption text read from
    the back of the room, its markdown rendered, and its link beside the figure."""
    problems = []
    if max(m["height"], m["content"]) > MAX_PAGE_PX:
        problems.append(f"{where}: the page is {m['height']} px tall, its content ends at {m['content']} px")
    if m["overlap"] is not None and m["overlap"] > 0:
        problems.append(f"{where}: the y-axis title runs {m['overlap']:.0f} px into the chart's title")
    for name in ("title", "figure", "takeaway"):
        if m[name] is None or m[name] > VIEWPORT[1]:
            problems.append(f"{where}: the {name} ends at {m[name]} px, below the screen")
    if step in LINKED and not page.locator(".st-key-lesson_notes a[href]").count():
        problems.append(f"{where}: no link beside the figure to the page that measures it")
    if "**" in m["visible"]:
        problems.append(f"{where}: literal ** in the text")
    small = [(size, text) for size, _, text in m["texts"] if size < MIN_TEXT_PX]
    pale = [(rgb, text) for _, rgb, text in m["texts"] if not dark(rgb)]
    if small:
        problems.append(f"{where}: text under {MIN_TEXT_PX} px: {small[:6]}")
    if pale:
        problems.append(f"{where}: text not in dark ink: {pale[:6]}")
    return problems


def screen_problems(m: dict, where: str, height: int, labels: list) -> list[str]:
    """Issue 48 (T2): at 1920×1080 the projected lesson filled 57% of the screen's height. Every step
    now fills at least 80% of it at 1920×1080 (the figure grows with the screen), and at every size
    nothing scrolls and every button's label is whole."""
    problems = []
    if max(m["height"], m["content"]) > height:
        problems.append(f"{where}: the page is {m['height']} px tall, its content ends at {m['content']} px")
    if height >= 1080 and m["content"] < 0.8 * height:
        problems.append(f"{where}: the page fills {m['content'] / height:.0%} of the screen's height")
    cut = [label for label, is_cut in labels if is_cut]
    if cut:
        problems.append(f"{where}: button labels cut: {cut}")
    return problems


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_step_fits_every_screen_and_reads_from_the_back(new_page, lang):
    """One walk through the steps with Next; each step is measured on a 1280×720 projector (it fits and
    reads from the back) and then, the window resized as a teacher's other screen would be, at
    1024×768 and 1920×1080 (nothing scrolls, the figure grows with the screen, labels whole). The
    presenter view is CSS, so a step laid out again at another size is the step a fresh page of
    that size shows; resizing instead of walking once per screen saves two thirds of the walks."""
    page = new_page({"step": "1", "presenter": "1", "lang": lang}, path="lesson", viewport=VIEWPORT, wait=False)
    problems, heights, filled = [], {}, {}
    for step in range(1, STEPS + 1):
        if step > 1:
            page.set_viewport_size({"width": VIEWPORT[0], "height": VIEWPORT[1]})
            page.locator('[data-testid="stMain"] button', has_text="下一步" if lang == "zh" else "Next").first.click()
        wait_drawn(page, step)
        assert_no_traceback(page)
        for width, height in SCREENS:
            page.set_viewport_size({"width": width, "height": height})
            m = settled(page, MEASURE)
            where = f"{lang} {width}×{height} step {step}"
            if (width, height) == VIEWPORT:
                heights[step] = (m["height"], m["content"])
                problems += projector_problems(m, where, step, page)
                shot(page, f"lesson-projector-{lang}-{step:02d}")
            else:
                filled.setdefault(f"{width}×{height}", {})[step] = round(m["content"] / height, 2)
                if step in (1, STEPS):
                    shot(page, f"lesson-presenter-{lang}-{width}x{height}-{step:02d}")
            problems += screen_problems(m, where, height, page.evaluate(LABELS))
    print(f"page heights, content ends at 1280×720 ({lang}):", heights)
    print(f"share of the height filled ({lang}):", filled)
    assert not problems, "\n".join(problems)


IDLE = "document.querySelector('[data-testid=\"stApp\"]').dataset.testScriptState === 'notRunning'"


def heading(page):
    """The step's title on the page (st.title: the page's only h1). While a script run redraws the
    page, the step's title can show twice for a moment (the element being replaced and its
    successor): the first is the one read, and Playwright's expect reads it again until it matches."""
    return page.locator('[data-testid="stMain"] h1').first


def expect_step(page, step: int, titles: list[str]) -> None:
    """Wait (Playwright's auto-waiting expect) until step `step` is the one on show."""
    from playwright.sync_api import expect

    expect(heading(page)).to_have_text(f"{step}. {titles[step - 1]}", timeout=60_000)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_presenter_view_switched_on_from_the_page_keeps_next_and_back_working(new_page, lang):
    from playwright.sync_api import expect

    lesson = load_lesson(lang)
    titles, ui = [s["title"] for s in lesson["steps"]], lesson["ui"]
    count = len(titles)
    page = new_page({"lang": lang}, path="lesson", viewport=VIEWPORT)  # the reading view, with its sidebar
    expect_step(page, 1, titles)
    page.locator('[data-testid="stMain"] [data-testid="stCheckbox"]', has_text=ui["presenter"]).click()
    expect(page.locator('[data-testid="stSidebar"]')).to_be_hidden(timeout=60_000)  # presenter view is on
    expect(page).to_have_url(re.compile(r"presenter=1"), timeout=60_000)
    back, next_ = page.locator(".st-key-lesson_back button"), page.locator(".st-key-lesson_next button")
    # The switch reruns the page: until that run ends, the old Back and the new one are both on it
    # (a clean-clone CI run found two), so read the buttons once it has ended.
    wait_idle(page, sidebar=False)
    expect(back).to_be_disabled()
    # English walks to the last step and back to the first; Chinese the first four (the bug stuck on
    # step 2; every step's presenter view in both languages is test_every_step_fits_every_screen's).
    last = count if lang == "en" else 4
    for step in range(2, last + 1):
        wait_idle(page, sidebar=False)  # the step before is drawn and its link written: Next is the live one
        next_.click()
        expect_step(page, step, titles)
    wait_idle(page, sidebar=False)
    if last == count:
        expect(next_).to_be_disabled(timeout=60_000)
        shot(page, f"lesson-presenter-switched-{lang}-{count:02d}")
    for step in range(last - 1, 0, -1):
        wait_idle(page, sidebar=False)
        back.click()
        expect_step(page, step, titles)
    wait_idle(page, sidebar=False)
    expect(back).to_be_disabled(timeout=60_000)

    # The table of contents (a popover in presenter view), then Next and Back from the step it chose.
    # It is opened once step 1's run has ended: a run that ends redraws the page and folds it again.
    page.wait_for_function(IDLE, timeout=60_000)
    page.locator('[data-testid="stMain"] [data-testid="stPopoverButton"]', has_text=ui["contents"]).click()
    page.locator('[data-testid="stPopoverBody"] [data-testid="stSelectbox"]').click()
    page.get_by_role("option", name=f"3. {titles[2]}").click()
    expect_step(page, 3, titles)
    page.keyboard.press("Escape")  # fold the popover away again, as a teacher would
    for step in (4, 5):
        wait_idle(page, sidebar=False)
        next_.click()
        expect_step(page, step, titles)
    for step in (4, 3, 2):
        wait_idle(page, sidebar=False)
        back.click()
        expect_step(page, step, titles)
    expect(page.locator('[data-testid="stSidebar"]')).to_be_hidden()  # still the presenter view
    assert_no_traceback(page)


def test_every_lesson_control_keeps_working_after_a_language_switch(new_page):
    """Issue 48 (T1): after English -> 中文 (or back) Next and Back showed a TypeError and the presenter
    toggle a ValueError, and the sidebar vanished: Streamlit hands back a selectbox's value as its
    label when that label is no longer among its options, so the old contents picker gave the step
    as "2. The idea: ..." once the titles changed language. Each switch is followed by every control."""
    from playwright.sync_api import expect

    lessons = {lang: load_lesson(lang) for lang in ("en", "zh")}
    page = new_page({"step": "2", "lang": "en"}, path="lesson", viewport=VIEWPORT)
    step = 2
    for lang, presenter in (("zh", False), ("en", False), ("zh", True), ("en", True)):
        titles, ui = [s["title"] for s in lessons[lang]["steps"]], lessons[lang]["ui"]
        wait_idle(page, sidebar=not presenter)
        page.locator('[data-testid="stMain"] [data-testid="stButtonGroup"] button', has_text=LANGUAGE[lang]).click()
        expect_step(page, step, titles)
        wait_idle(page, sidebar=not presenter)
        if not presenter:
            expect(page.locator('[data-testid="stSidebar"]')).to_be_visible()  # the settings stay
        for delta in (1, -1, 1):  # Next, Back, Next: exactly one step each
            wait_idle(page, sidebar=not presenter)
            page.locator(".st-key-lesson_next button" if delta > 0 else ".st-key-lesson_back button").click()
            step += delta
            expect_step(page, step, titles)
        assert_no_traceback(page)
        if lang == "en" and not presenter:  # then the presenter toggle, in this language
            wait_idle(page)
            page.locator('[data-testid="stMain"] [data-testid="stCheckbox"]', has_text=ui["presenter"]).click()
            expect(page.locator('[data-testid="stSidebar"]')).to_be_hidden(timeout=60_000)
            expect_step(page, step, titles)
            assert_no_traceback(page)
    shot(page, "lesson-after-language-switches")


LANGUAGE = {"en": "English", "zh": "中文"}  # a part of each segment's label (specviz.teaching.lesson.LANGUAGES)
