"""The Workloads page, driven by streamlit.testing.v1.AppTest: it opens on the shipped recording
(no model), measures live (on the toy pair, put in the offline target's place), stops between
pairs and keeps what was timed, and loads a saved file back."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.engine import toy
from specviz.labs import workloads
from specviz_app.runs import loading

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
PAGE = "app_pages/workloads.py"
TOY_KINDS = (
    workloads.Kind("code", "code", "repeats itself", ((3, 1, 4, 1, 5, 9, 2, 6), (1, 2, 3, 1, 2, 3))),
    workloads.Kind("story", "open-ended story", "does not", ((5, 4, 3, 7),)),
)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with toy.one_thread():
        yield


@pytest.fixture(scope="module", autouse=True)
def toy_target():
    """Built before any page runs: the app's preload thread importing transformers at the same time
    as this thread made `from transformers import LlamaConfig` fail."""
    return toy.toy_pair()[0]


@pytest.fixture
def toy_models(monkeypatch, toy_target):
    """The page's live run on the toy pair: its target for the offline one, token-id prompts, two drafters."""
    target = toy_target
    monkeypatch.setattr(loading, "get_model", lambda *args, **kwargs: target)
    monkeypatch.setattr(workloads, "KINDS", TOY_KINDS)
    monkeypatch.setattr(workloads, "OFFLINE_DRAFTS", ("ngram", "self"))


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> list[str]:
    return [c.key for c in at.get("plotly_chart") if (c.key or "").startswith("wl")]


def test_the_page_is_routed_as_workloads():
    source = (ROOT / "specviz_app" / "app.py").read_text(encoding="utf-8")
    assert '("workloads", ":material/' in source  # app.PAGES: its file, titled by the catalogue
    from specviz.teaching.catalogue import words

    assert words("app")["page_workloads"] == "Workloads"


def test_it_opens_on_the_recording_with_every_measure():
    at = open_page()
    assert [t.value for t in at.title] == ["Where it pays: workloads"]
    assert charts(at) == ["wl-speedup", "wl-alpha", "wl-tokens_per_iteration", "wl-positions"]
    assert any("recording shipped with specviz" in c.value and "CPU " in c.value for c in at.caption)
    recorded = workloads.shipped()
    assert len(at.dataframe[0].value) == len(recorded.cells)
    assert len(at.get("download_button")) == 2
    at.selectbox(key="wl_position_draft").set_value("ngram").run()
    assert not at.exception


def test_a_live_run_measures_here_and_replaces_the_recording(toy_models):
    at = open_page()
    at.slider(key="wl_prompts").set_value(2)
    at.number_input(key="wl_max_new").set_value(4)
    at.button(key="wl_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    result = at.session_state["workloads_result"]
    assert result.pairs_done == result.pairs_total == 6 and not result.stopped  # 3 prompts x 2 drafters
    assert result.kinds() == ["code", "story"] and result.drafts() == ["ngram", "self"]
    assert any("measured here, on this machine" in c.value for c in at.caption)
    assert len(at.dataframe[0].value) == 4 and len(charts(at)) == 4
    assert not at.warning


def test_stop_keeps_the_pairs_timed(toy_models, monkeypatch):
    """A Stop click sets the flag while the run goes on; here it is set after the second pair."""
    real = workloads.run_workloads

    def run_and_click_stop(*, on_progress, **kwargs):
        import streamlit as st

        def progress(done, total, partial):
            on_progress(done, total, partial)
            if done == 2:
                st.session_state["workloads_stop"] = True  # what the Stop button's callback does

        return real(on_progress=progress, **kwargs)

    monkeypatch.setattr(workloads, "run_workloads", run_and_click_stop)
    at = open_page()
    at.number_input(key="wl_max_new").set_value(4)
    at.button(key="wl_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    result = at.session_state["workloads_result"]
    assert result.stopped and result.pairs_done == 2 and result.pairs_total == 4
    assert any("Stopped after 2 of 4 pairs" in w.value for w in at.warning)


def test_a_failed_run_says_why_and_keeps_the_recording(monkeypatch):
    def broken(*args, **kwargs):
        raise workloads.WorkloadsError("Choose at least one kind of task and one drafter.")

    monkeypatch.setattr(workloads, "run_workloads", broken)
    monkeypatch.setattr(loading, "get_model", lambda *args, **kwargs: None)
    at = open_page()
    at.button(key="wl_run").click().run()
    assert not at.exception
    assert any("Choose at least one kind" in e.value for e in at.error)
    assert len(charts(at)) == 4  # the recording is still shown
