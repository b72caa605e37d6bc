"""The app as a user meets it: real browser, real `streamlit run`, the offline default models.

Runs are kept short (at most 12 new tokens) because the suite must pass on a small shared CPU.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from specviz.config import DEFAULT_GAMMA, DecodeOptions
from specviz.teaching.charts.style import STATUS_COLORS
from specviz.traces.trace import validate

from .helpers import (
    RUN_PAGES,
    act,
    assert_no_traceback,
    click_run,
    download,
    goto_page,
    main_text,
    nav_titles,
    nudge_slider,
    run_button_in_sight,
    shot,
    showing,
    slider_value,
    stream_text,
    upload,
    wait_idle,
    wait_presenter_styled,
    warnings,
)

pytestmark = pytest.mark.browser

GAMMA = "γ (draft tokens per iteration)"
TEMPERATURE = "Temperature"
CORE_PAGES = ["Playground", "Step inspector", "Timeline", "Acceptance", "Traces"]


@pytest.fixture(scope="module")
def greedy_reference():
    """greedy_reference(prompt, n) -> the target's own greedy tokens, decoded in the test process."""
    from specviz import autoregressive_generate

    cache: dict = {}

    def get(prompt: str, n: int) -> list[int]:
        if (prompt, n) not in cache:
            trace = autoregressive_generate(prompt, options=DecodeOptions(temperature=0, max_new_tokens=n))
            cache[prompt, n] = trace.output_token_ids
        return cache[prompt, n]

    return get


def test_first_visit_shows_an_example_on_every_page(new_page):
    """No model is needed to look around: the first visit opens a gallery trace. That every page
    draws it is test_every_page_bilingual's first check (each page opened on a first visit, in both
    languages); moving between pages by the sidebar is the tour after a run below."""
    page = new_page()
    assert showing(page).startswith("Showing: example:")
    titles = nav_titles(page)
    assert set(CORE_PAGES) <= set(titles), titles
    assert page.locator(".sv-stream .sv-tok").count() > 5


def test_playground_run_every_page_download_and_upload(new_page, greedy_reference):
    """Run the default pair (a shared link with max_new=12), read the tokens and numbers, open every page
    (the Run button in sight on each that runs), step through iterations, download the trace, check it,
    upload it again, then change γ and temperature."""
    prompt = "List three fruits."
    page = new_page({"max_new": "12", "prompt": prompt})  # a link with settings runs them on arrival
    assert showing(page).startswith("Showing: run here"), showing(page)
    shot(page, "playground-after-run")

    # the coloured tokens, with their legend and hover cards
    stream = page.locator(".sv-stream").first
    tokens = stream.locator(".sv-tok")
    assert tokens.count() >= 12
    classes = [t.get_attribute("class").split() for t in tokens.all()]
    per_token = [[c[3:] for c in cs if c.startswith("sv-") and c[3:] in STATUS_COLORS] for cs in classes]
    assert all(len(s) == 1 for s in per_token)  # every token carries exactly one status colour
    statuses = {s[0] for s in per_token}
    page_tokens = tokens.count()
    assert statuses <= set(STATUS_COLORS) and statuses & {"resampled", "bonus"}, statuses
    legend = page.locator(".sv-legend").first.inner_text()
    assert all(status in legend for status in statuses), (statuses, legend)  # a key for every colour shown
    tokens.first.hover()
    card = tokens.first.locator(".sv-card")
    assert card.is_visible() and "p" in card.inner_text()

    # the headline numbers, with units
    labels = [m.inner_text() for m in page.locator('[data-testid="stMetricLabel"]').all()]
    values = [m.inner_text() for m in page.locator('[data-testid="stMetricValue"]').all()]
    for label in ("Speedup", "Acceptance rate", "Iterations", "α"):
        assert any(label in x for x in labels), (label, labels)
    assert any("/s" in x for x in labels + values), labels  # throughput carries its unit
    assert values[labels.index(next(x for x in labels if "Speedup" in x))].endswith("×"), values

    # the target-alone text beside the speculative one, and the verdict at temperature 0
    main = main_text(page)
    assert "Is the output unchanged?" in main and "Target alone" in main, main[:2000]
    assert "Identical token for token" in main or "First difference at token" in main, main[:2000]

    # every page, with a screenshot; on those that run, the Run button in sight at 1400×1000
    for title in nav_titles(page):
        goto_page(page, title)
        assert "run here" in showing(page) or title not in CORE_PAGES[:4]
        assert title not in RUN_PAGES or run_button_in_sight(page, 1000), title
        shot(page, f"run-{title}")

    # step through iterations
    goto_page(page, "Step inspector")
    heading = page.locator("h3").first.inner_text()
    assert "the draft proposed" in heading, heading  # it opens on the first iteration that drafted
    k, n = int(heading.split()[1]), int(heading.split(" of ")[1].split(":")[0])
    if k < n:
        act(page, page.locator('[data-testid="stMain"] button', has_text="Next").first.click)
        expect(page.locator("h3").first).to_have_text(re.compile(rf"^Iteration {k + 1} of"))
        shot(page, "inspector-next-iteration")
        act(page, page.locator('[data-testid="stMain"] button', has_text="Previous").first.click)
        expect(page.locator("h3").first).to_have_text(re.compile(rf"^Iteration {k} of"))

    # download the trace: valid, greedy output equal to the target alone
    goto_page(page, "Traces")
    raw = download(page, "Trace (JSON)")
    data = json.loads(raw)
    validate(data)
    assert data["prompt"] == prompt and data["config"]["max_new_tokens"] == 12
    assert data["output_token_ids"] == greedy_reference(prompt, 12)
    baseline = json.loads(download(page, "Baseline (JSON)"))
    validate(baseline)
    assert baseline["output_token_ids"] == data["output_token_ids"]
    assert download(page, "Per-token CSV").startswith(b"iteration,position,token_id")

    # upload it again: every page shows it, no model needed
    upload(page, [("mine.json", raw), ("mine.baseline.json", json.dumps(baseline).encode())])
    assert "Opened the uploaded mine.json" in main_text(page)
    goto_page(page, "Playground")
    assert "file: mine.json" in showing(page)
    assert page.locator(".sv-stream .sv-tok").count() == page_tokens

    # move γ and temperature: the pages say a run is needed, the URL follows, Run decodes with them
    nudge_slider(page, GAMMA, "ArrowRight")
    nudge_slider(page, TEMPERATURE, "ArrowRight", times=2)
    moved = DEFAULT_GAMMA + 1
    assert slider_value(page, GAMMA) == moved and slider_value(page, TEMPERATURE) == pytest.approx(0.1)
    assert any("differ" in w for w in warnings(page))
    assert f"gamma={moved}" in page.url and "temperature=0.1" in page.url
    assert "file: mine.json" in showing(page)  # nothing re-ran yet
    click_run(page)
    assert "run here" in showing(page) and f"γ {moved}" in showing(page) and "temperature 0.1" in showing(page)
    assert not any("differ" in w for w in warnings(page))
    shot(page, "playground-gamma-up-temperature0.1")


def test_a_shared_link_reproduces_the_settings_and_the_trace(new_page):
    query = {
        "pair": "offline",
        "gamma": "3",
        "temperature": "0.7",
        "seed": "7",
        "max_new": "8",
        "baseline": "0",
        "prompt": "Write a haiku about the sea.",
    }
    first = new_page(query)
    assert slider_value(first, GAMMA) == 3 and slider_value(first, TEMPERATURE) == pytest.approx(0.7)
    assert "γ 3 · temperature 0.7 · seed 7" in showing(first)
    for key, value in query.items():
        assert f"{key}=" in first.url and value.split()[0] in first.url
    shot(first, "shared-link")
    text_first = stream_text(first)
    second = new_page(query)  # the same link in another browser: the same sampled tokens
    assert stream_text(second) == text_first


def test_the_lesson_can_be_followed(new_page):
    page = new_page()
    goto_page(page, "Lesson")
    assert page.locator("h1").first.inner_text().startswith("1.")
    shot(page, "lesson-step-1")
    step = 1
    while step < 30:
        nxt = page.locator('[data-testid="stMain"] button', has_text="Next")
        if not nxt.count() or nxt.first.is_disabled():
            break
        act(page, nxt.first.click)
        assert_no_traceback(page)
        step += 1
        assert page.locator("h1").first.inner_text().startswith(f"{step}."), page.locator("h1").first.inner_text()
        shot(page, f"lesson-step-{step}")
    assert step > 1 and f"{step} of {step}" in main_text(page)  # followed to the last step


def test_a_lesson_link_with_a_step_out_of_range_opens_a_real_step(new_page):
    page = new_page({"step": "999"}, path="lesson")
    heading = page.locator("h1").first.inner_text()
    count = int(heading.split(".")[0])
    assert count > 1 and any(f"showing step {count}" in w for w in warnings(page)), warnings(page)
    page = new_page({"step": "<b>x</b>"}, path="lesson")
    assert page.locator("h1").first.inner_text().startswith("1.")
    assert any("is not a step number; starting at step 1." in w for w in warnings(page)), warnings(page)


LESSON_RUN_LINK = {"step": "3", "gamma": "2", "max_new": "64", "prompt": "Tell me a long story."}


def test_a_lesson_link_with_run_settings_opens_its_step_without_decoding(new_page):
    page = new_page(LESSON_RUN_LINK, path="lesson")
    page.locator("h1", has_text="3.").first.wait_for()
    goto_page(page, "Playground")
    assert not showing(page).startswith("Showing: run here"), showing(page)  # nothing was decoded


def test_the_presenter_view_is_restored_from_its_link_and_fits_a_projector(new_page):
    # The presenter view hides the sidebar: wait for the page without it (new_page waits for the sidebar,
    # which a run whose CSS applied quickly never shows; a clean-clone CI run timed out on that).
    page = new_page({"step": "2", "presenter": "1", "lang": "zh"}, path="lesson", viewport=(1280, 720), wait=False)
    wait_idle(page, sidebar=False)
    toggle = page.get_by_role("switch").first
    assert toggle.is_checked()
    chart = page.locator('[data-testid="stMain"] .js-plotly-plot').first
    chart.locator(".main-svg text").first.wait_for(state="attached")  # Plotly has laid out its text
    wait_presenter_styled(page)  # what is measured below is the page styled for the projector
    box = chart.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 720, box  # visible without scrolling
    script = "() => [...document.querySelectorAll('.js-plotly-plot text')]"
    texts = page.evaluate(script + ".map(t => [parseFloat(getComputedStyle(t).fontSize), t.textContent])")
    small = [(size, text) for size, text in texts if size < 18 and text.strip()]
    assert texts and not small, small
    shot(page, "lesson-presenter-1280x720")
