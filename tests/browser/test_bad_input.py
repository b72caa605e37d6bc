"""Bad input in the browser: each gets a clear message, the app keeps running, and nothing the user
had (the trace on show, the sidebar settings) is lost. Below the browser the same inputs are tested in
tests/test_hardening.py and tests/test_hardening_app.py."""

from __future__ import annotations

import json

import pytest

from specviz.config import DEFAULT_GAMMA
from specviz.traces.trace import MAX_TRACE_BYTES

from .helpers import (
    choose,
    clear_uploads,
    click_run,
    errors,
    goto_page,
    main_text,
    nudge_slider,
    shot,
    showing,
    sidebar_text,
    slider_value,
    type_into,
    upload,
)

pytestmark = pytest.mark.browser

GAMMA = "γ (draft tokens per iteration)"
TEMPERATURE = "Temperature"
EXAMPLE = "01-default.json"


def _example_bytes() -> bytes:
    from .helpers import ROOT

    return (ROOT / "specviz" / "assets" / "examples" / EXAMPLE).read_bytes()


def bad_traces() -> dict[str, tuple[bytes, str]]:
    """name -> (file content, words the error must contain)."""
    good = _example_bytes()
    data = json.loads(good)
    nan = json.dumps(dict(data, config=dict(data["config"], temperature="@NAN@"))).replace('"@NAN@"', "NaN").encode()
    huge = json.loads(good)
    drafted = next(it for it in huge["iterations"] if it["drafts"])  # the first iteration may draft nothing
    drafted["drafts"][0]["q"] = 1e308
    inf = json.dumps(dict(data, summary=dict(data["summary"], wall_ms="@INF@"))).replace('"@INF@"', "1e999").encode()
    wrong_schema = dict(data, schema="specviz.trace/99")
    return {
        "not-json.json": (b"this is not JSON at all", "not valid JSON"),
        "truncated.json": (good[: len(good) // 2], "looks truncated"),
        "wrong-schema.json": (json.dumps(wrong_schema).encode(), "Unsupported trace schema 'specviz.trace/99'"),
        "nan.json": (nan, "NaN, which is not a valid number"),
        "huge-number.json": (json.dumps(huge).encode(), "expected a number from 0 to 1, got 1e+308"),
        "infinite.json": (inf, "expected a finite number, got inf"),
        "deep.json": (b"[" * 100_000, "nested too deeply"),
        "pickle.json": (b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94.", "not UTF-8"),
    }


def _kept(page, before: str, gamma: float) -> None:
    """The trace on show and the settings survived."""
    goto_page(page, "Playground")
    assert showing(page) == before
    assert slider_value(page, GAMMA) == gamma
    assert page.locator(".sv-stream .sv-tok").count() > 0


def test_empty_prompt_keeps_the_trace_and_the_settings(new_page):
    page = new_page()
    before = showing(page)
    nudge_slider(page, GAMMA, "ArrowRight", times=2)  # the user's own settings: two above the default
    type_into(page, "Prompt", "")
    click_run(page)
    msgs = errors(page)
    assert any("The prompt is empty: type some text for the model to continue." in m for m in msgs), msgs
    assert any("Nothing was lost" in m for m in msgs)
    shot(page, "bad-empty-prompt")
    _kept(page, before, DEFAULT_GAMMA + 2)


def test_link_values_outside_the_sliders_are_clamped_with_a_message(new_page):
    # The empty prompt stops the run the link asks for before any decoding: only the clamping is on show.
    page = new_page({"gamma": "99", "temperature": "7", "max_new": "100000", "top_p": "-3", "prompt": ""})
    side = sidebar_text(page)
    for msg in (
        "γ: 99 is outside 1..16; using 16.",
        "temperature: 7.0 is outside 0.0..2.0; using 2.0.",
        "max new tokens: 100000 is outside 1..256; using 256.",
        "top-p: -3.0 is outside 0.05..1.0; using 0.05.",
    ):
        assert msg in side, side
    assert slider_value(page, GAMMA) == 16 and slider_value(page, TEMPERATURE) == 2.0
    assert slider_value(page, "Max new tokens") == 256
    assert any("prompt is empty" in m for m in errors(page))
    shot(page, "bad-url-out-of-range")
    nan_page = new_page({"gamma": "nan", "temperature": "hot", "prompt": ""})
    side = sidebar_text(nan_page)
    assert "γ: 'nan' is not a finite number; using the default." in side
    assert "temperature: 'hot' is not a number; using the default." in side
    assert slider_value(nan_page, GAMMA) == DEFAULT_GAMMA and slider_value(nan_page, TEMPERATURE) == 0.0


def test_a_prompt_longer_than_the_app_allows_is_cut_with_a_message(new_page):
    """The model reads 8192 tokens; the app takes at most 2000 characters, so the context cannot overflow
    from here (the library refusal is tested in tests/test_hardening.py)."""
    page = new_page({"prompt": "ab " * 3000, "max_new": "2", "baseline": "0"})
    assert "prompt: longer than 2000 characters; cut to that length." in sidebar_text(page)
    prompt = page.locator('[data-testid="stSidebar"]').get_by_label("Prompt", exact=True).input_value()
    assert len(prompt) == 2000
    assert "run here" in showing(page)  # the cut prompt ran
    shot(page, "bad-long-prompt")


def test_a_pasted_prompt_longer_than_the_app_allows_is_cut_with_a_message(new_page):
    """The prompt box took no paste past 2,000 characters and said nothing (issue 59): now it is cut and said."""
    page = new_page({"max_new": "2", "baseline": "0"}, path="traces")
    type_into(page, "Prompt", "ab " * 1700)
    box = page.locator('[data-testid="stSidebar"]').get_by_label("Prompt", exact=True)
    assert len(box.input_value()) == 2000
    assert "prompt: longer than 2000 characters; cut to that length." in sidebar_text(page)


def test_the_upload_box_speaks_the_pages_language_and_limit(new_page):
    """Streamlit's box said "Upload" and "50MB per file" beside the page's "at most 20 MB" (issue 59)."""
    page = new_page({"lang": "zh"}, path="traces")
    box = page.locator('[data-testid="stFileUploaderDropzone"]').first
    assert not box.locator('[data-testid="stFileUploaderDropzoneInstructions"]').is_visible()
    assert not box.locator("button [data-testid=stMarkdownContainer]").is_visible()  # Streamlit's "Upload"
    after = box.locator("button").evaluate("b => getComputedStyle(b, '::after').content")
    assert "选择文件" in after, after


def test_bad_trace_files_get_clear_errors_and_keep_the_trace(new_page):
    page = new_page()
    before = showing(page)
    nudge_slider(page, GAMMA, "ArrowRight")  # one above the default: the user's settings must survive too
    goto_page(page, "Traces")
    for name, (content, words) in bad_traces().items():
        upload(page, [(name, content)])
        msgs = errors(page)
        assert any(name in m and words in m for m in msgs), (name, msgs)
        clear_uploads(page)
    shot(page, "bad-trace-files")
    # many megabytes (25 MB): the page says the file is too large, the limit and what to do (issue 48, E3:
    # it was only the uploader's red "!"), and offers no Open button
    big = b" " * (MAX_TRACE_BYTES + 5 * 1024 * 1024)
    upload(page, [("huge.json", big)])
    # Wait for this file's own message: 25 MB take a while to send, and the one before may still show.
    page.locator('[data-testid="stAlertContentError"]', has_text="huge.json").first.wait_for(timeout=120_000)
    said = " ".join(errors(page))
    assert "huge.json" in said and "25.0 MB" in said and "too large" in said and "at most 20 MB" in said, said
    assert "--max-new-tokens" in said and "Remove it" in said, said
    assert page.locator('[data-testid="stMain"] button', has_text="Open the uploaded trace").count() == 0
    shot(page, "bad-trace-too-big")
    clear_uploads(page)
    _kept(page, before, DEFAULT_GAMMA + 1)


def test_missing_custom_model_wrong_vocabulary_and_offline_pair(new_page, foreign_vocab_model):
    page = new_page()
    before = showing(page)
    choose(page, "Model pair", "Custom pair")
    type_into(page, "Target model (Hugging Face name)", "nobody/no-such-model")
    click_run(page)
    msgs = errors(page)
    assert any("The model 'nobody/no-such-model' is not available offline" in m for m in msgs), msgs
    shot(page, "bad-missing-model")

    type_into(page, "Target model (Hugging Face name)", "offline:smollm2-135m-instruct")
    type_into(page, "Draft model, or ngram / self", str(foreign_vocab_model))
    click_run(page)
    msgs = errors(page)
    assert any("do not share a vocabulary" in m and "same model family" in m for m in msgs), msgs
    shot(page, "bad-vocabulary")

    choose(page, "Model pair", "Online: SmolLM2 1.7B / 135M")
    click_run(page, timeout_ms=60_000)  # must fail fast offline, not hang
    msgs = errors(page)
    assert any("HuggingFaceTB/SmolLM2-1.7B-Instruct' is not available offline" in m for m in msgs), msgs
    shot(page, "bad-offline-pair")
    goto_page(page, "Playground")
    assert showing(page) == before  # the example is still on show
    # the app still works: every page opens
    for title in ("Step inspector", "Timeline", "Acceptance", "Traces"):
        goto_page(page, title)


XSS = "<img src=x onerror=window.__xss=1>"


def test_html_in_traces_and_prompts_shows_as_text(new_page):
    """Token and prompt text is data: an uploaded trace full of markup runs no script and shows the markup."""
    from test_charts import EVIL, make_trace

    page = new_page()
    page.evaluate("window.__xss = 0")
    evil = make_trace(evil=True).to_json().replace(EVIL, XSS)
    goto_page(page, "Traces")
    upload(page, [("evil.json", evil.encode())])
    assert "Opened the uploaded evil.json" in main_text(page)
    for title in ("Playground", "Step inspector", "Acceptance", "Timeline"):
        goto_page(page, title)
        assert page.evaluate("window.__xss") == 0, f"markup from the trace ran on {title}"
        assert page.locator('[data-testid="stMain"] img[src="x"]').count() == 0
    goto_page(page, "Playground")
    tokens = page.locator(".sv-stream").first
    assert XSS in tokens.inner_text()
    tokens.locator(".sv-tok", has_text=XSS).first.hover()  # its hover card escapes it too
    assert page.evaluate("window.__xss") == 0
    page.locator('[data-testid="stExpander"] summary').first.click()
    assert XSS in main_text(page)  # the prompt, shown as text
    shot(page, "escaped-markup")
