"""Theory teaches a formula that assumes every iteration drafts one chain of exactly γ (issue 35, item
2): beside "Use the current trace's α, γ, c, v" the page says when the trace on show drafted otherwise
(early stop, a tree, the n-gram's match) and offers the paper's algorithm on the same settings in one
click; on a trace of the paper's algorithm it says the assumption holds, and where it does not quite."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.config import PAPER_DRAFT
from specviz.shipped import ASSETS
from specviz.teaching.charts import theory_text
from specviz.traces.trace import Trace
from specviz_app import keys
from specviz_app.runs import running

APP = str(Path(__file__).resolve().parent.parent / "specviz_app" / "app.py")
THEORY = "app_pages/theory.py"
EXAMPLES = ASSETS / "examples"
PAPER_BUTTON = "Run the paper's algorithm on these settings"  # the page's label (its module draws on import)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def example(name: str) -> tuple[Trace, Trace]:
    return (
        Trace.from_json((EXAMPLES / f"{name}.json").read_bytes()),
        Trace.from_json((EXAMPLES / f"{name}.baseline.json").read_bytes()),
    )


def paper_trace() -> Trace:
    """The sampled example redrawn as the paper's algorithm would draft it at γ = 4: no draft in the
    first iteration (the head has no features yet), a chain of exactly γ after, and the last with room
    for 2 before max new tokens; no tree, no early stop."""
    trace, _ = example("02-sampled")
    paper = copy.deepcopy(trace)
    paper.config["draft"], paper.config["draft_tree"] = PAPER_DRAFT, 1
    draft = next(d for it in paper.iterations for d in it["drafts"])
    last = len(paper.iterations) - 1
    for it in paper.iterations:
        it.pop("tree", None)
        g = 0 if it["index"] == 0 else 2 if it["index"] == last else 4
        it["drafts"] = [copy.deepcopy(draft) for _ in range(g)]
        it["drafting"] = {"gamma": min(g, 4) if it["index"] else 4, "source": "head", "stop": None}
    paper.iterations[0]["drafting"]["stop"] = "no_features"
    return paper


def theory_with(trace: Trace, baseline: Trace) -> AppTest:
    from specviz_app.session import Loaded

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.session_state[keys.LOADED] = Loaded(trace, baseline, "example: test", None)
    at.switch_page(THEORY).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_words_count_what_each_trace_drafted():
    sampled, _ = example("02-sampled")
    kind, sentence = theory_text.drafting_against_formula(sampled)
    short = sum(len(it["drafts"]) < 4 for it in sampled.iterations)
    total = len(sampled.iterations)
    assert kind == "most" and f"{short} of {total} iterations drafted fewer than γ = 4" in sentence
    assert "drafted a tree" in sentence and "one chain of exactly γ = 4" in sentence
    self_draft, _ = example("03-self-draft")  # every iteration one chain of γ: nothing to say
    assert theory_text.drafting_against_formula(self_draft) is None
    kind, sentence = theory_text.drafting_against_formula(paper_trace())
    assert kind == "paper"
    whole = len(paper_trace().iterations) - 2  # all but the first and the last
    assert "assumption about drafting holds" in sentence
    assert f"{whole} of {whole + 2} iterations drafted all γ" in sentence
    assert "the first drafted none" in sentence and "1 iteration near max new tokens had room for fewer" in sentence


def test_a_trace_that_drafted_fewer_than_gamma_offers_the_paper_algorithm_in_one_click(monkeypatch):
    asked = []
    monkeypatch.setattr(running, "run", asked.append)  # the decode itself: test_app_algorithm.py
    trace, baseline = example("02-sampled")
    at = theory_with(trace, baseline)
    warning = " ".join(w.value for w in at.warning)
    short = sum(len(it["drafts"]) < 4 for it in trace.iterations)
    assert f"{short} of {len(trace.iterations)} iterations drafted fewer than γ = 4" in warning
    assert "assumes every iteration drafts one chain of exactly γ = 4" in warning
    at.button[[b.label for b in at.button].index(PAPER_BUTTON)].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(asked) == 1
    settings = asked[0]
    assert settings.algorithm == "paper" and settings.model_names()[1] == PAPER_DRAFT
    assert (settings.gamma, settings.temperature, settings.seed, settings.prompt) == (
        4,
        trace.config["temperature"],
        trace.config["seed"],
        trace.prompt,
    )
    assert settings.baseline  # c and v need the target-alone run
    assert at.radio(key=keys.setting("algorithm")).value == "paper"  # the sidebar shows what ran


def test_an_ngram_trace_runs_the_paper_algorithm_with_the_draft_head(monkeypatch):
    asked = []
    monkeypatch.setattr(running, "run", asked.append)
    trace, baseline = example("04-ngram-gamma6")
    at = theory_with(trace, baseline)
    assert any("drafted fewer than γ = 6" in i.value for i in at.info)
    at.button[[b.label for b in at.button].index(PAPER_BUTTON)].click().run()
    assert len(asked) == 1 and asked[0].model_names()[1] == PAPER_DRAFT and asked[0].gamma == 6


def test_a_trace_of_the_paper_algorithm_says_the_assumption_holds():
    _, baseline = example("02-sampled")
    at = theory_with(paper_trace(), baseline)
    success = " ".join(s.value for s in at.success)
    assert "This trace is the paper's Algorithm 1" in success and "had room for fewer" in success
    assert PAPER_BUTTON not in [b.label for b in at.button]
    assert not any("drafted fewer than γ" in w.value for w in [*at.warning, *at.info])
