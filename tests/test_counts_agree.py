"""Every count two pages show for one run agrees, or the page says why in one sentence beside it
(issue 48: A1, S1, P3, O1). On the first visit's example the Inspector offered 6 iterations,
Acceptance counted 4 "with a draft" and rested position 1 on 5, without a word; it blamed "a reason
the trace does not record" for a stop the trace shows; Theory showed its own γ = 7 beside a run made
with γ = 3; "Target passes 14 vs 6" said neither whose nor why fewer can lose time; c and v were
"measured on this machine" although a shipped example was recorded elsewhere; and the Inspector
opened on the prefill, which has nothing to inspect."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.shipped import ASSETS
from specviz.teaching.charts.acceptance import counted_iterations, position_table
from specviz.teaching.charts.drafting import first_drafted, iteration_counts, run_summary
from specviz.teaching.charts.headline import headline_metrics
from specviz.teaching.charts.theory_text import measured_where, sliders_against_run
from specviz.traces.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
EXAMPLES = ASSETS / "examples"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def example(name: str = "01-default") -> tuple[Trace, Trace]:
    trace = Trace.from_json((EXAMPLES / f"{name}.json").read_bytes())
    return trace, Trace.from_json((EXAMPLES / f"{name}.baseline.json").read_bytes())


def open_page(page: str) -> AppTest:
    """The app on its first visit (the default example on show), then `page`."""
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_counts_sentence_names_each_count_the_pages_show():
    trace, baseline = example()
    its = trace.iterations
    metrics = {m.label: m for row in headline_metrics(trace, baseline) for m in row}
    drafted = [it for it in its if it["drafts"]]
    # The numbers as the pages compute them: headline, inspector, acceptance at position 1, histogram.
    assert metrics["Iterations"].value == str(len(its)) == "6"
    assert position_table(trace)[0]["reached"] == len(drafted) == 5
    assert len(counted_iterations(trace)) == 4
    said = iteration_counts(trace)
    assert said.startswith("6 iterations, one target pass each; the first is the prefill, which drafts nothing")
    assert "5 drafted, and acceptance at position 1 rests on those 5" in said
    assert "the histogram of tokens per iteration counts 4: the last ended the text on an accepted draft" in said
    assert iteration_counts(baseline) is None  # the target alone has no drafts to count


def test_an_n_gram_run_says_which_iterations_drafted_nothing_without_calling_them_the_prefill():
    trace, _ = example("04-ngram-gamma6")
    said = iteration_counts(trace)
    assert "prefill" not in said and "2 drafted nothing" in said and "4 drafted" in said


def older(trace: Trace) -> Trace:
    """The trace as specviz wrote it before it recorded why an iteration drafted what it did: no
    `drafting` record (the gallery's default example was such a trace until it was recorded again)."""
    for it in trace.iterations:
        it.pop("drafting", None)
    return trace


def test_the_reason_an_older_trace_does_not_keep_is_named_and_the_end_of_text_is_read_from_it():
    trace = older(example()[0])
    short = [it for it in trace.iterations[1:] if len(it["drafts"]) < trace.config["gamma"]]
    assert [it["correction"] is None for it in short] == [False, True]  # the fixture: one of each below
    text = run_summary(trace)
    assert "a reason the trace does not record" not in text
    assert "1 by a draft that ended the text" in text  # its last iteration has no correction: it ended on a draft
    assert "1 by a reason this older trace does not keep" in text
    assert "recorded before specviz wrote down why an iteration drafted fewer than γ" in text


def test_the_inspector_opens_on_the_first_iteration_that_drafted_and_the_prefill_stays_one_step_back():
    trace, _ = example()
    assert first_drafted(trace) == 2
    at = open_page("app_pages/inspector.py")
    assert at.slider(key="inspect_iter").value == 2
    assert any(c.value.startswith("6 iterations, one target pass each") for c in at.caption)
    assert any("It opens on iteration 2, the first that drafted" in c.value for c in at.caption)
    at.button[[b.label for b in at.button].index("Previous")].click().run()
    assert at.slider(key="inspect_iter").value == 1
    assert any("this is the first iteration" in c.value for c in at.caption)  # the prefill, explained


def test_acceptance_says_why_its_counts_differ_from_the_inspector_and_the_headline():
    trace, _ = example()
    at = open_page("app_pages/acceptance.py")
    assert any("the histogram of tokens per iteration counts 4" in c.value for c in at.caption)
    means = next(m.value for m in at.markdown if m.value.startswith("Over the 4 whole iterations that drafted"))
    s = trace.summary
    assert f"is over all 6 iterations ({s['new_tokens']} tokens ÷ 6)" in means
    assert f"{s['mean_accepted_length']:.2f}" in means


def test_target_passes_say_whose_they_are_and_why_fewer_can_lose_time():
    trace, baseline = example()
    s = trace.summary
    passes = {m.label: m for row in headline_metrics(trace, baseline) for m in row}["Target passes"]
    assert passes.value == f"{s['target_calls']} vs {s['new_tokens']}"
    assert passes.note == "spec. vs alone"  # under the number, on the page
    assert f"{s['target_calls']}: the target passes speculative decoding ran, one per iteration" in passes.help
    assert f"{s['new_tokens']}: the passes the target alone needs for the same tokens" in passes.help
    assert "Fewer passes can still lose time" in passes.help


def test_theory_says_its_sliders_are_not_the_run_and_where_c_and_v_were_measured():
    trace, _ = example()
    assert "γ = 7 (the run's 3)" in sliders_against_run({"gamma": 3, "alpha": 0.9, "c": None, "v": None}, 0.9, 7, 0, 1)
    assert sliders_against_run({"gamma": 3, "alpha": 0.9, "c": 0.1, "v": 1.0}, 0.9, 3, 0.1, 1.0) is None
    assert "measured on this machine" in measured_where(trace, here=True)
    at = open_page("app_pages/theory.py")
    captions = [c.value for c in at.caption]
    assert any("The sliders hold their own values, not the run's on show: γ = 7 (the run's 3)" in c for c in captions)
    recorded = trace.extra["example"]["recorded_with"]
    assert any(f"measured where this example was recorded ({recorded}), not on this machine" in c for c in captions)
    at.button[[b.label for b in at.button].index("Use the current trace's α, γ, c, v")].click().run()
    assert not any("The sliders hold their own values" in c.value for c in at.caption)
