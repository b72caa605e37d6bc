"""The Lesson page in Streamlit's AppTest: every step from a link, Next and Back through all of them, a
bad step clamped with a message, Chinese and the presenter view, the contents, and a lesson link that
opens at once without decoding (the other pages: tests/test_app_pages.py)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from test_app_pages import APP, LESSON, LESSON_STEPS, charts, no_error, offline, one_thread, open_page, texts  # noqa: F401

# ----- lesson ------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", range(1, LESSON_STEPS + 1))
def test_every_lesson_step_opens_from_a_link(step):
    at = open_page(LESSON, {"step": str(step)})
    titles = texts(at, "title")
    assert titles and titles[0].startswith(f"{step}. ")
    assert len(charts(at)) == 1, f"step {step} shows its figure"
    assert at.query_params["step"] in (str(step), [str(step)])
    assert at.button(key="lesson_back").disabled == (step == 1)
    assert at.button(key="lesson_next").disabled == (step == LESSON_STEPS)
    assert at.info, "every step ends with its takeaway"


def test_lesson_next_and_back_walk_through_every_step():
    at = open_page(LESSON)
    seen = [texts(at, "title")[0]]
    for _ in range(LESSON_STEPS - 1):
        at.button(key="lesson_next").click().run()
        no_error(at)
        seen.append(texts(at, "title")[0])
    assert [t.split(".")[0] for t in seen] == [str(i) for i in range(1, LESSON_STEPS + 1)]
    at.button(key="lesson_back").click().run()
    assert texts(at, "title")[0].startswith(f"{LESSON_STEPS - 1}. ")


@pytest.mark.parametrize("raw, shown", [("99", LESSON_STEPS), ("0", 1), ("abc", 1), ("-3", 1)])
def test_lesson_link_with_a_bad_step_is_clamped_with_a_message(raw, shown):
    at = open_page(LESSON, {"step": raw})
    assert texts(at, "title")[0].startswith(f"{shown}. ")
    assert any("From the link: step" in w for w in texts(at, "warning"))


def test_lesson_in_chinese_and_presenter_view():
    at = open_page(LESSON, {"step": "8", "lang": "zh"})
    assert texts(at, "title")[0] == "8. 为什么输出分布不变"
    at.toggle(key="lesson_presenter").set_value(True).run()
    no_error(at)
    assert any("font-size: 1.6rem" in h.value for h in at.html)
    assert len(charts(at)) == 1


def test_lesson_contents_jump_to_a_step():
    at = open_page(LESSON)
    at.selectbox(key="lesson_contents_en-1").set_value(6).run()  # the picker of step 1 (a new one per step)
    no_error(at)
    assert texts(at, "title")[0].startswith("6. ")
    assert at.query_params["step"] in ("6", ["6"])


def test_a_lesson_link_opens_instantly_without_decoding():
    """?step= is the lesson's own parameter: it must not count as a demo link that starts a decode."""
    at = open_page(LESSON, {"step": "2"}, timeout=20)
    assert at.session_state["_url_given"] is False
    loaded = at.session_state["loaded"] if "loaded" in at.session_state else None
    assert loaded is None or loaded.source != "run here"


def test_a_lesson_link_with_run_settings_opens_at_once_and_never_decodes(monkeypatch):
    import specviz.decoding.decoder

    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a lesson link started a decode")

    monkeypatch.setattr(specviz.decoding.decoder, "speculative_generate", refuse)
    monkeypatch.setattr(specviz.decoding.decoder, "autoregressive_generate", refuse)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(
        {"step": "4", "gamma": "2", "temperature": "0.7", "prompt": "Tell me a joke.", "presenter": "1"}
    )
    at.switch_page(LESSON).run()
    no_error(at)
    assert calls == [] and not texts(at, "error")
    assert texts(at, "title")[0].startswith("4. ")
    assert at.toggle(key="lesson_presenter").value is True  # the presenter view lives in the link
    assert at.query_params["presenter"] in ("1", ["1"])
