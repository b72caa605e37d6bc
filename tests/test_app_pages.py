"""The Theory, Sweep, Distribution lab and Lesson pages, driven by streamlit.testing.v1.AppTest.

Fast: the theory and lesson pages need no model (closed forms and a shipped example trace); the
sweep and the lab run on the toy pair (tiny random Llamas) with small grids and sample counts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.engine import toy
from specviz.labs import sweep
from specviz.shipped import ASSETS
from specviz.teaching import catalogue, glossary

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
THEORY, SWEEP, LAB, LESSON, DRAFTS = (f"app_pages/{name}.py" for name in ("theory", "sweep", "lab", "lesson", "drafts"))
LESSON_STEPS = len(json.loads((ASSETS / "lesson" / "lesson.en.json").read_text(encoding="utf-8"))["steps"])


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with toy.one_thread():
        yield


def open_page(page: str, query: dict | None = None, timeout: float = 120) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(query or {})
    at.run()
    no_error(at)
    at.switch_page(page).run()
    no_error(at)
    return at


def no_error(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def charts(at: AppTest, prefix: str = "") -> list:
    return [c for c in at.get("plotly_chart") if (c.key or "").startswith(prefix)]


def test_app_routes_the_four_pages():
    source = (ROOT / "specviz_app" / "app.py").read_text(encoding="utf-8")
    for page in (THEORY, SWEEP, LAB, LESSON, DRAFTS):
        assert f'("{page.removeprefix("app_pages/").removesuffix(".py")}", ":material/' in source


# ----- theory ------------------------------------------------------------------------------------


def test_theory_page_curves_point_and_table4():
    at = open_page(THEORY)
    assert texts(at, "title") == ["Theory"]
    assert len(charts(at)) == 3
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Expected walltime improvement"] == "2.67×"  # α .75, γ 7, c .05
    assert metrics["Best γ"] == "7"
    assert any("some γ gives a speedup" in s for s in texts(at, "success"))
    assert any("All 12 rows agree" in s for s in texts(at, "success"))
    assert len(at.dataframe) == 2  # Table 4, and the first-visit example's formula-against-run rows
    assert any(c.startswith("Current trace") for c in texts(at, "caption"))  # the first-visit example
    # Its prediction with the measured v beside the paper's and the measurement, and why they part.
    assert {"Paper's prediction (v = 1)", "Prediction with measured v", "Measured"} <= set(metrics)
    assert any("The prediction with the measured v" in m.value for m in at.markdown)


def test_theory_sliders_move_the_numbers_and_the_boundary():
    at = open_page(THEORY)
    at.slider(key="th_alpha").set_value(0.2)
    at.slider(key="th_c").set_value(0.3).run()
    no_error(at)
    assert any("no γ gives a speedup" in s for s in texts(at, "error"))
    assert {m.label: m.value for m in at.metric}["Best γ"] == "1"


def test_theory_uses_the_trace_measurements():
    at = open_page(THEORY)
    at.button[[b.label for b in at.button].index("Use the current trace's α, γ, c, v")].click().run()
    no_error(at)
    alpha = at.session_state["loaded"].trace.summary["alpha"]
    assert at.slider(key="th_alpha").value == pytest.approx(round(alpha, 2))
    assert at.slider(key="th_gamma").value == at.session_state["loaded"].trace.config["gamma"]


def test_theory_sets_every_slider_to_a_measured_v_below_1_and_c_above_1():
    """A run measured v = 0.84 (its verification pass cheaper than a target-alone step); the v slider
    started at 1, so "Use the current trace's α, γ, c, v" set 1.00 and the headline said 1.03× beside
    "Prediction with measured v 1.17×". Here the default example's timings are rescaled to v = 0.84
    and c = 1.3 (a draft slower than its target): every slider must take the trace's own value, and
    the headline must equal the prediction with the measured v."""
    import copy

    from specviz.labs import theory
    from specviz.traces import speedup
    from specviz.traces.trace import Trace
    from specviz_app.session import Loaded

    folder = ASSETS / "examples"
    trace = Trace.from_json((folder / "01-default.json").read_bytes())
    base = Trace.from_json((folder / "01-default.baseline.json").read_bytes())
    point = theory.measured_point(trace, base)
    spec = dict(trace.summary)
    spec["verify_ms"] *= 0.84 / point["v"]
    spec["draft_ms"] *= 1.3 / point["c"]
    rescaled = copy.deepcopy(trace)
    rescaled.extra["timing"] = {
        "pairs": [speedup.pair_record(spec, base.summary, speedup.order_of_pair(i), True) for i in range(3)],
        "wanted": 3,
    }
    m = theory.measured_point(rescaled, base)
    assert m["v"] < 0.95 and m["c"] > 1.05  # outside the old ranges, 1..3 and 0..1

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.session_state["loaded"] = Loaded(rescaled, base, "example: rescaled timings", None)
    at.switch_page(THEORY).run()
    at.button[[b.label for b in at.button].index("Use the current trace's α, γ, c, v")].click().run()
    no_error(at)
    for key, name in (("th_alpha", "alpha"), ("th_c", "c"), ("th_v", "v")):
        slider = at.slider(key=key)
        assert slider.min <= m[name] <= slider.max, (key, slider.min, slider.max)
        assert slider.value == pytest.approx(round(m[name], 2)), key
    assert at.slider(key="th_gamma").value == m["gamma"]
    metrics = {x.label: x.value for x in at.metric}
    explained = theory.explain_measurement(m)
    assert metrics["Prediction with measured v"] == f"{explained.predicted:.2f}×"
    assert metrics["Expected walltime improvement"] == metrics["Prediction with measured v"]
    assert metrics["Expected walltime improvement"] != f"{theory.walltime_improvement(m['alpha'], 3, 1.0, 1.0):.2f}×"


def test_theory_says_a_speedup_timed_by_one_pair_is_one_pair():
    """A run timed by its own pair only (a server with SPECVIZ_TIMING_SECONDS=0): the Measured metric
    says so, and a run of three pairs shows their range and count."""
    from specviz.traces import speedup
    from specviz.traces.trace import Trace
    from specviz_app.session import Loaded

    folder = ASSETS / "examples"
    trace = Trace.from_json((folder / "01-default.json").read_bytes())
    base = Trace.from_json((folder / "01-default.baseline.json").read_bytes())
    pairs = trace.extra["timing"]["pairs"]
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    for kept, said in ((1, r"one timed pair"), (3, r"\d\.\d\d–\d\.\d\d, 3 pairs")):
        timed = Trace.from_json((folder / "01-default.json").read_bytes())
        timed.extra["timing"] = {"pairs": pairs[:kept], "wanted": kept}
        assert speedup.speedup_spread(timed, base).pairs == kept
        at.session_state["loaded"] = Loaded(timed, base, f"example: {kept} pairs", None)
        at.switch_page(THEORY).run()
        no_error(at)
        measured = next(m for m in at.metric if m.label == "Measured")
        assert re.fullmatch(said, measured.delta), (kept, measured.delta)


# ----- sweep -------------------------------------------------------------------------------------


def small_sweep(at: AppTest) -> AppTest:
    at.radio(key="sweep_models").set_value("toy")
    at.slider(key="sweep_gammas").set_value((1, 2))
    at.multiselect(key="sweep_temps").set_value([0.0, 1.0])
    at.number_input(key="sweep_max_new").set_value(4)
    return at.run()


def test_sweep_runs_on_the_toy_pair_and_shows_every_view():
    at = small_sweep(open_page(SWEEP))
    assert any("No sweep yet" in s for s in texts(at, "info"))
    at.button(key="sweep_run").click().run()
    no_error(at)
    result = at.session_state["sweep_result"]
    assert len(result.cells) == 4 and not result.stopped
    assert len(charts(at)) == 3  # heatmap, tokens per iteration, speedup
    labels = [m.label for m in at.metric]
    assert "Best measured speedup" in labels and glossary.C.label in labels
    assert not any("Stopped" in s for s in texts(at, "warning"))
    assert len(at.get("download_button")) == 2


def test_sweep_can_be_stopped_between_runs(monkeypatch):
    """A Stop click sets the flag while the sweep runs; here the flag is set after the second run."""
    real = sweep.run_sweep

    def run_and_click_stop(*args, on_progress=None, **kwargs):
        import streamlit as st

        def progress(done, total, partial):
            on_progress(done, total, partial)
            if done == 2:
                st.session_state["sweep_stop"] = True  # what the Stop button's callback does

        return real(*args, on_progress=progress, **kwargs)

    monkeypatch.setattr(sweep, "run_sweep", run_and_click_stop)
    at = small_sweep(open_page(SWEEP))
    at.button(key="sweep_run").click().run()
    no_error(at)
    result = at.session_state["sweep_result"]
    assert result.stopped and result.runs_done == 2 and result.runs_total == 6
    assert any("Stopped after 2 of 6 runs" in s for s in texts(at, "warning"))
    assert len(charts(at)) == 3  # the partial grid is still shown


def test_sweep_interrupted_by_a_click_keeps_the_partial_result():
    """In a browser the Stop click interrupts the script; the partial result saved by on_progress remains."""
    at = open_page(SWEEP)
    partial = sweep.SweepResult(config={}, runs_total=9, runs_done=0)
    at.session_state["sweep_result"] = partial
    at.run()
    no_error(at)
    assert any("Stopped after 0 of 9 runs" in s for s in texts(at, "warning"))


def test_sweep_stop_button_sets_the_flag():
    at = small_sweep(open_page(SWEEP))
    at.session_state["sweep_running"] = True
    at.session_state["sweep_stop"] = True  # a Stop pressed before the first run: nothing runs
    at.run()
    no_error(at)
    assert at.session_state["sweep_result"].stopped
    assert any("Stopped after 0 of" in s for s in texts(at, "warning"))


def _sweep_json() -> bytes:
    cells = [
        {"gamma": g, "temperature": 0.0, "tokens_per_s": 10.0 * g, "baseline_tokens_per_s": 10.0,
         "mean_accepted_length": 1.5, "alpha": 0.5, "c": 0.1}
        for g in (1, 2)
    ]  # fmt: skip
    return json.dumps({"schema": sweep.SCHEMA, "config": {}, "cells": cells}).encode()


def upload_sweep(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="sweep_upload").set_value([(name, data, "application/octet-stream")]).run()
    at.button(key="sweep_open").click().run()
    no_error(at)
    return at


def test_sweep_reloads_a_saved_file():
    at = upload_sweep(open_page(SWEEP), "mine.json", _sweep_json())
    assert len(at.session_state["sweep_result"].cells) == 2
    assert any("file: mine.json" in c.replace("\\", "") for c in texts(at, "caption"))
    assert {m.label: m.value for m in at.metric}["Best measured speedup"] == "2.00×"


def test_sweep_round_trips_its_own_csv():
    at = upload_sweep(open_page(SWEEP), "a.json", _sweep_json())
    csv_text = at.session_state["sweep_result"].to_csv()
    at = upload_sweep(open_page(SWEEP), "b.csv", csv_text.encode())
    assert [c["gamma"] for c in at.session_state["sweep_result"].cells] == [1, 2]


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("bad.json", b"{oops", "not valid JSON"),
        ("trace.json", json.dumps({"schema": "specviz.trace/1"}).encode(), "Unsupported schema"),
        ("bad.csv", b"a,b\n1,2\n", "no column"),
    ],
)
def test_sweep_bad_file_gets_a_clear_error(name, data, message):
    at = upload_sweep(open_page(SWEEP), name, data)
    errors = texts(at, "error")
    assert errors and message in errors[0] and name in errors[0].replace("\\", "")
    assert "sweep_result" not in at.session_state


# ----- distribution lab --------------------------------------------------------------------------


def lab_page(n: int, k: int = 2) -> AppTest:
    at = open_page(LAB)
    at.number_input(key="lab_n_toy").set_value(n)
    at.number_input(key="lab_k").set_value(k)
    return at.run()


def test_lab_correct_rule_is_not_rejected():
    at = lab_page(200)
    at.button(key="lab_run_one").click().run()
    no_error(at)
    result = at.session_state["lab_results"]["results"]["exact"]
    assert result["n_spec"] == result["n_target"] == 200
    assert any("Not rejected" in s for s in texts(at, "success"))
    assert len(charts(at, "lab-")) == 1
    assert any("Target alone (200 samples)" in c for c in texts(at, "caption"))


def test_lab_wrong_rule_is_rejected_and_labelled():
    at = lab_page(300)
    at.selectbox(key="lab_rule").set_value("resample_from_p").run()
    assert any(c.replace("\\", "").startswith("WRONG") for c in texts(at, "caption"))
    at.button(key="lab_run_one").click().run()
    no_error(at)
    assert any("Rejected" in s and "this rule is wrong" in s for s in texts(at, "error"))


def test_lab_compares_all_rules_with_their_cost():
    at = lab_page(60)
    at.button(key="lab_run_all").click().run()
    no_error(at)
    stored = at.session_state["lab_results"]
    assert list(stored["results"]) == ["exact", "block", "accept_if_equal", "resample_from_p", "no_bonus"]
    assert set(stored["costs"]) == set(stored["results"])
    # Skipping the bonus never emits more tokens per iteration than the exact rule.
    assert stored["costs"]["no_bonus"] <= stored["costs"]["exact"]
    assert len(charts(at, "lab-")) == 2  # the verdicts and the chosen rule's distribution
    assert any("Skipping the bonus keeps the distribution" in c for c in texts(at, "caption"))
    at.selectbox(key="lab_show").set_value("no_bonus").run()
    no_error(at)
    # the chosen rule's section, above the machine check's (the page's last)
    assert texts(at, "subheader")[-2:] == [
        "Correct but slower: skip the bonus token",
        "Is the output the target's on this machine?",
    ]


def _records(monkeypatch, head, distilled):
    from specviz_app.runs import gallery

    monkeypatch.setattr(gallery, "TRAINING_RECORDS", {"Draft head": head, "Distilled draft": distilled})


def test_draft_quality_without_the_training_record(tmp_path, monkeypatch):
    _records(monkeypatch, tmp_path / "missing-head.json", tmp_path / "missing.json")
    at = open_page(DRAFTS)
    no_error(at)
    assert sum("No training record yet" in s for s in texts(at, "info")) == 2


def test_draft_quality_from_hand_made_records(tmp_path, monkeypatch):
    record = {
        "schema": "specviz.draft_training/1",
        "draft": "offline:specviz-draft-smollm2",
        "target": "offline:smollm2-135m-instruct",
        "training_seconds": 600,
        "history": [
            {"step": 0, "alpha": 0.1, "greedy_agreement": 0.05, "loss": None},
            {"step": 100, "alpha": 0.5, "greedy_agreement": 0.6, "loss": 2.0},
            {"step": 200, "alpha": 0.62, "greedy_agreement": 0.71, "loss": 1.5},
        ],
    }
    head = {
        "schema": "specviz.head_training/1",
        "history": [
            {"step": 0, "alpha_by_position": [0.0, 0.0, 0.0, 0.0], "greedy_agreement_by_position": [0, 0, 0, 0]},
            {
                "step": 50,
                "alpha_by_position": [0.44, 0.31, 0.27, 0.25],
                "greedy_agreement_by_position": [0.5, 0.4, 0.3, 0.2],
            },
        ],
    }
    (tmp_path / "d.json").write_text(json.dumps(record), encoding="utf-8")
    (tmp_path / "h.json").write_text(json.dumps(head), encoding="utf-8")
    _records(monkeypatch, tmp_path / "h.json", tmp_path / "d.json")
    at = open_page(DRAFTS)
    no_error(at)
    metrics = [(m.label, m.value) for m in at.metric]
    assert ("α after training (T = 1)", "0.440") in metrics and ("α after training (T = 1)", "0.620") in metrics
    assert ("Greedy agreement (T = 0)", "0.710") in metrics
    assert ("α at draft positions 1..4", "0.44 · 0.31 · 0.27 · 0.25") in metrics
    assert len(charts(at, "dq-")) == 2
    assert not any("dashed line" in c for c in texts(at, "caption"))  # neither record measured the bench's prompts


def test_draft_quality_explains_the_bench_prompt_line_where_the_record_has_it(tmp_path, monkeypatch):
    point = {"alpha_by_position": [0.4, 0.3], "greedy_agreement_by_position": [0.5, 0.4]}
    head = {
        "schema": "specviz.head_training/1",
        "history": [
            {"step": 0, **point, "bench_prompts": {"alpha_by_position": [0.2, 0.1]}},
            {"step": 100, **point, "bench_prompts": {"alpha_by_position": [0.35, 0.3]}},
        ],
    }
    (tmp_path / "h.json").write_text(json.dumps(head), encoding="utf-8")
    _records(monkeypatch, tmp_path / "h.json", tmp_path / "missing.json")
    at = open_page(DRAFTS)
    no_error(at)
    assert sum("dashed line" in c for c in texts(at, "caption")) == 1


def test_draft_quality_of_the_shipped_records():
    at = open_page(DRAFTS)
    assert not texts(at, "error")
    assert len(charts(at, "dq-")) == 2
    assert "α after training (T = 1)" in [m.label for m in at.metric]


def test_draft_quality_bad_record_gets_an_error(tmp_path, monkeypatch):
    path = tmp_path / "draft_training.json"
    path.write_text(json.dumps({"history": [{"step": 0, "alpha": 7}]}), encoding="utf-8")
    _records(monkeypatch, tmp_path / "missing.json", path)
    at = open_page(DRAFTS)
    no_error(at)
    assert any("alpha" in s for s in texts(at, "error"))


def test_race_page_shows_a_race_and_exports_it(monkeypatch):
    """A race (hand-made, in the shape run_race returns) is drawn, tabled and offered as JSON and CSV."""
    from specviz.labs import race
    from specviz_app.runs import gallery

    rows = [
        {"draft": d, "label": d, "new_tokens": 32, "iterations": it, "tokens_per_iteration": 32 / it,
         "acceptance_rate": 0.5, "alpha": a, "acceptance_by_position": [a, a / 2], "c": 0.05, "verify_cost": 1.1,
         "speedup": sp, "predicted_speedup": 1.4, "identical_to_target": True}
        for d, it, a, sp in (("ngram", 20, 0.4, 1.2), ("hybrid", 14, 0.6, 1.6))
    ]  # fmt: skip
    result = {
        "schema": race.RACE_SCHEMA, "prompt": "Hi", "rows": rows,
        "config": {"target": "t", "gamma": 2, "temperature": 0.0, "seed": 0, "max_new_tokens": 32,
                   "dtype": "float32", "kernels": "packed"},
        "baseline": {"new_tokens": 32, "tokens_per_s": 40.0, "step_ms": 25.0},
    }  # fmt: skip
    monkeypatch.setattr(gallery, "shipped_race", lambda: result)
    at = open_page(DRAFTS)
    no_error(at)
    assert len(charts(at, "race-")) == 2
    table = at.dataframe[0].value
    assert list(table["drafter"]) == [catalogue.drafter_words(d)[0] for d in ("ngram", "hybrid")]
    assert "recorded race" in " ".join(texts(at, "caption"))
    csv_text = race.race_to_csv(result)
    assert csv_text.splitlines()[0].startswith("draft,gamma") and "hybrid" in csv_text


# ----- the real offline pair (slow: loads SmolLM2-135M) ------------------------------------------


@pytest.mark.slow
def test_sweep_on_the_sidebar_pair():
    at = open_page(SWEEP, timeout=600)
    at.radio(key="sweep_models").set_value("sidebar")
    at.slider(key="sweep_gammas").set_value((1, 2))
    at.multiselect(key="sweep_temps").set_value([0.0])
    at.number_input(key="sweep_max_new").set_value(4)
    at.run()
    at.button(key="sweep_run").click().run()
    no_error(at)
    assert not texts(at, "error")
    result = at.session_state["sweep_result"]
    assert [c["gamma"] for c in result.cells] == [1, 2] and all(c["new_tokens"] == 4 for c in result.cells)


@pytest.mark.slow
def test_lab_on_the_sidebar_pair_shows_token_text():
    at = open_page(LAB, timeout=600)
    at.radio(key="lab_models").set_value("sidebar").run()
    at.number_input(key="lab_k").set_value(1)
    at.number_input(key="lab_n_sidebar").set_value(20)
    at.button(key="lab_run_one").click().run()
    no_error(at)
    assert not texts(at, "error")
    stored = at.session_state["lab_results"]
    assert stored["results"]["exact"]["n_spec"] == 20
    assert not any(re.fullmatch(r"#\d+", label) for label in stored["labels"])  # decoded text, not ids


def test_an_unexpected_failure_in_the_sweep_is_an_error_message_not_a_traceback(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sweep, "run_sweep", broken)
    at = small_sweep(open_page(SWEEP))
    at.button(key="sweep_run").click().run()
    no_error(at)
    assert any("Something unexpected went wrong (RuntimeError: boom)" in s for s in texts(at, "error"))
