"""Every page in both languages, then its controls (issue 48): at 1280×720, each page is opened in
English, switched to 中文 with the sidebar's language control, its controls used (sliders, number
inputs, radios, selectboxes, toggles and the buttons that start no measurement), then switched back
to English and used again. After every action: no exception box, the sidebar still there, and the
page's title the catalogue's in the language on show.

With SPECVIZ_SCREENSHOTS=1 each page is also photographed as it opens in each language, one
viewport (1280×720, not the full page) per shot, into docs/screenshots/<lang>-<page>.png:
    SPECVIZ_SCREENSHOTS=1 OMP_NUM_THREADS=1 .venv/bin/python -m pytest -m browser \
        -p no:cacheprovider tests/browser/test_every_page_bilingual.py
"""

from __future__ import annotations

import pytest

from specviz.teaching.catalogue import LANGUAGES, words
from specviz.teaching.lesson import load_lesson

from .helpers import ROOT, SCREENSHOTS_WANTED, act, assert_no_traceback, wait_idle

pytestmark = pytest.mark.browser

VIEWPORT = (1280, 720)
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"

# page (its url path; "" for the default page, the Playground) -> where its title is in the catalogue.
PAGES = {
    "playground": ("", ("render", "playground_title")),
    "inspector": ("inspector", ("render", "inspector_title")),
    "timeline": ("timeline", ("render", "timeline_title")),
    "acceptance": ("acceptance", ("render", "acceptance_title")),
    "traces": ("traces", ("app", "page_traces")),
    "theory": ("theory", ("theory", "title")),
    "sweep": ("sweep", ("app", "page_sweep")),
    "drafts": ("drafts", ("app", "page_drafts")),
    "workloads": ("workloads", ("render", "workloads_title")),
    "serving": ("serving", ("serving", "title")),
    "lab": ("lab", ("app", "page_lab")),
    "lesson": ("lesson", None),  # "<step>. <the step's title>", from the lesson's own text
}
# The buttons of a page that start no measurement (a decode, a race, a sweep are never pressed), by
# their catalogue text: the inspector's Previous and Next, Theory's "use the current trace", the first
# example's Open on Traces, the lesson's Next and Back.
SAFE_BUTTONS = {
    "inspector": [("inspector", "next"), ("inspector", "previous")],
    "theory": [("theory", "use")],
    "traces": [("traces", "open")],
}


def main(page):
    return page.locator('[data-testid="stMain"]')


def lesson_step(page) -> int:
    return int(main(page).locator("h1").first.inner_text().split(".")[0])


def expected_title(page, slug: str, lang: str) -> str:
    where = PAGES[slug][1]
    if where is None:  # the lesson: whichever step is on show, its title in `lang`
        step = lesson_step(page)
        return f"{step}. {load_lesson(lang)['steps'][step - 1]['title']}"
    return words(where[0], lang)[where[1]]


def check(page, slug: str, lang: str) -> None:
    """No exception box, the sidebar there, the page's title in `lang`."""
    from playwright.sync_api import expect

    assert_no_traceback(page)
    expect(page.locator('[data-testid="stSidebar"]')).to_be_visible()
    expect(main(page).locator("h1").first).to_have_text(expected_title(page, slug, lang), timeout=60_000)
    # Every choice still shows what is chosen, in `lang`: after a switch a radio showed none chosen and
    # the Lab's rule its English label, Streamlit matching the browser's choice by its old label.
    radios = main(page).locator('[data-testid="stRadio"]')
    for i in range(radios.count()):
        assert radios.nth(i).locator("input:checked").count() == 1, f"{slug} ({lang}): a radio shows no choice"
    if slug == "lab":  # the rule on show is named in `lang`
        from specviz.decoding.verify import RULES
        from specviz.teaching.charts.lab import rule_title

        shown = main(page).locator('[data-testid="stSelectbox"]').first.get_by_role("combobox").input_value()
        assert shown in {rule_title(r, lang) for r in RULES}, f"lab ({lang}): the rule reads {shown!r}"


def switch_language(page, lang: str) -> None:
    button = page.locator(f'.st-key-lang_sidebar button:has-text("{LANGUAGES[lang].split()[0]}")')
    act(page, button.click)


def screenshot(page, slug: str, lang: str) -> None:
    if SCREENSHOTS_WANTED:
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.screenshot(path=str(DOCS_SCREENSHOTS / f"{lang}-{slug}.png"), full_page=False)


def nudge(page, thumb) -> None:
    """Move a slider's thumb one step with the keyboard (back one at its end), as a user can."""
    at_end = thumb.get_attribute("aria-valuenow") == thumb.get_attribute("aria-valuemax")
    thumb.focus()
    page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    act(page, lambda: page.keyboard.press("Tab"))  # the value is sent when the thumb lets go


def pick_other(page, box) -> None:
    """Choose an option of a selectbox other than the one it shows, with the keyboard once its list is
    open (an option element clicked while a rerun redrew the list was gone before the click)."""
    from playwright.sync_api import TimeoutError as Slow

    listbox = page.locator('[role="listbox"]').first
    for _ in range(3):  # a click that landed while the page redrew the box opens nothing: click again
        wait_idle(page)
        box.locator("input").first.click()
        try:
            listbox.wait_for(timeout=10_000)
            break
        except Slow:
            continue
    listbox.wait_for()
    if listbox.locator('[role="option"][aria-selected="false"]').count():
        page.keyboard.press("ArrowDown")  # the highlight moves off the chosen option to the next one
        act(page, lambda: page.keyboard.press("Enter"))
    else:  # a selectbox with one option: nothing else to choose
        page.keyboard.press("Escape")


def use_controls(page, slug: str, lang: str) -> int:
    """Use every control of the page that starts no measurement; -> how many were used. The page is
    read again after each action: a rerun may redraw its widgets."""
    used = 0
    m = main(page)
    for i in range(m.locator('[data-testid="stSlider"] input[type="range"]').count()):
        thumb = m.locator('[data-testid="stSlider"] input[type="range"]').nth(i)
        if thumb.is_visible() and thumb.is_enabled():
            nudge(page, thumb)
            used += 1
    for i in range(m.locator('[data-testid="stNumberInput"]').count()):
        up = m.locator('[data-testid="stNumberInput"]').nth(i).locator('[data-testid="stNumberInputStepUp"]')
        if up.count() and up.is_visible() and up.is_enabled():
            act(page, up.click)
            used += 1
    for i in range(m.locator('[data-testid="stRadio"]').count()):
        radio = m.locator('[data-testid="stRadio"]').nth(i)
        other = radio.locator("label").filter(has=page.locator("input:not(:checked)")).first
        if other.count() and other.is_visible():
            act(page, other.click)
            used += 1
    for i in range(m.locator('[data-testid="stSelectbox"]').count()):
        box = m.locator('[data-testid="stSelectbox"]').nth(i)
        if box.is_visible():
            pick_other(page, box)
            used += 1
    for i in range(m.locator('[data-testid="stCheckbox"]').count()):
        toggle = m.locator('[data-testid="stCheckbox"]').nth(i)
        if not toggle.is_visible():
            continue
        if slug == "lesson":  # the presenter toggle hides the sidebar: on, then off again
            from playwright.sync_api import expect

            sidebar = page.locator('[data-testid="stSidebar"]')
            toggle.click()
            expect(sidebar).to_be_hidden(timeout=60_000)
            wait_idle(page, sidebar=False)
            assert_no_traceback(page)
            m.locator('[data-testid="stCheckbox"]').nth(i).click()
            expect(sidebar).to_be_visible(timeout=60_000)
            wait_idle(page)
        else:
            act(page, toggle.click)
        used += 1
    for section, key in SAFE_BUTTONS.get(slug, []):
        button = m.locator("button", has_text=words(section, lang)[key]).first
        if button.count() and button.is_enabled():
            act(page, button.click)
            used += 1
    if slug == "lesson":  # Next, then Back: one step each
        step = lesson_step(page)
        act(page, page.locator(".st-key-lesson_next button").click)
        assert lesson_step(page) == step + 1
        check(page, slug, lang)
        act(page, page.locator(".st-key-lesson_back button").click)
        assert lesson_step(page) == step
        used += 2
    # One of the sidebar's settings too: every page reads them (a setting changed starts no run).
    thumb = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"] input[type="range"]').first
    if thumb.count() and thumb.is_visible():
        nudge(page, thumb)
        used += 1
    return used


@pytest.mark.parametrize("slug", list(PAGES))
def test_every_page_switches_language_and_keeps_its_controls(new_page, slug):
    page = new_page({"lang": "en"}, path=PAGES[slug][0], viewport=VIEWPORT)
    check(page, slug, "en")
    screenshot(page, slug, "en")
    for lang in ("zh", "en"):  # English -> 中文, its controls; back to English, its controls
        switch_language(page, lang)
        check(page, slug, lang)
        if lang == "zh":
            screenshot(page, slug, lang)
        used = use_controls(page, slug, lang)
        wait_idle(page)
        check(page, slug, lang)
        assert used >= 1, f"{slug}: no control was used"
