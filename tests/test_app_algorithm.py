"""The paper's algorithm one click away (issue 35): a link with ?algorithm=paper decodes with the draft
head as one chain of gamma drafts, no tree, no early stop, and the pages say so where it happens."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.config import PAPER_DRAFT
from specviz_app import keys

APP = str(Path(__file__).resolve().parent.parent / "specviz_app" / "app.py")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SPECVIZ_TIMING_SECONDS", "0")


@pytest.mark.slow
def test_a_paper_link_drafts_one_chain_of_gamma_and_the_inspector_says_so():
    at = AppTest.from_file(APP, default_timeout=600)
    at.query_params.update({"algorithm": "paper", "gamma": "3", "temperature": "1.0", "max_new": "12",
                            "seed": "1", "baseline": "0", "prompt": "List three fruits."})  # fmt: skip
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key=keys.setting("algorithm")).value == "paper"
    trace = at.session_state[keys.LOADED].trace
    assert trace.config["draft"] == PAPER_DRAFT and trace.config["draft_tree"] == 1
    its = trace.iterations
    assert its[0]["drafts"] == [] and its[0]["drafting"]["stop"] == "no_features"
    full = [it for it in its[1:] if it["drafting"]["gamma"] == 3]
    assert full and all(len(it["drafts"]) == 3 and "tree" not in it for it in full)
    at.switch_page("app_pages/inspector.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="inspect_iter").value == 2  # it opens on the first iteration that drafted
    at.slider(key="inspect_iter").set_value(1).run()  # the prefill, one step back, says why it drafted nothing
    assert any("this is the first iteration: the draft head reads" in c.value for c in at.caption)
