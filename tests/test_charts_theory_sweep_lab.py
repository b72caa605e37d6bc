"""Chart builders of the theory, sweep and lab pages: built from hand-made numbers (no torch, no
streamlit), each with a title, labelled axes with units, and a legend where colours carry meaning."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from specviz.labs.sweep import SweepResult
from specviz.labs.theory import TABLE_4, best_gamma, walltime_improvement
from specviz.teaching.charts import lab as lab_charts
from specviz.teaching.charts import sweep as sweep_charts
from specviz.teaching.charts import theory as theory_charts

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick


def assert_labelled(fig: go.Figure, legend: bool = True) -> None:
    layout = fig.layout
    assert layout.title.text, "every chart has a title"
    assert layout.xaxis.title.text and layout.yaxis.title.text, "both axes are labelled"
    if legend:
        named = [t for t in fig.data if t.name and t.showlegend is not False]
        assert named, "a legend names what the colours mean"


def make_sweep(stopped: bool = False) -> SweepResult:
    cells = []
    for t in (0.0, 1.0):
        for g in (1, 2, 3):
            alpha = 0.8 if t == 0 else 0.5
            tokens = sum(alpha**k for k in range(g + 1))
            cells.append(
                {
                    "gamma": g,
                    "temperature": t,
                    "tokens_per_s": 10.0 * tokens / (1 + 0.1 * g),
                    "baseline_tokens_per_s": 10.0,
                    "speedup": tokens / (1 + 0.1 * g),
                    "mean_accepted_length": tokens + 0.05,
                    "predicted_tokens_per_iteration": tokens,
                    "alpha": alpha,
                    "c": 0.1,
                    "predicted_speedup": walltime_improvement(alpha, g, 0.1),
                    "acceptance_rate": alpha,
                    "iterations": 10,
                    "new_tokens": 20,
                    "wall_ms": 100.0,
                    "draft_ms": 10.0,
                    "verify_ms": 80.0,
                }
            )
    if stopped:
        cells = cells[:4]
    return SweepResult(config={}, baselines={"0.0": 10.0, "1.0": 10.0}, cells=cells, stopped=stopped)


def make_lab(rule: str = "exact", shift: bool = False) -> dict:
    exact = [0.5, 0.3, 0.15, 0.05]  # three outcomes and "other"
    spec = [250, 150, 75, 25] if not shift else [400, 50, 40, 10]
    fit = {"method": "chi2", "statistic": 1.0 if not shift else 300.0, "dof": 3, "p_value": 0.8 if not shift else 1e-40}
    return {
        "rule": rule,
        "rule_label": f"label of {rule}",
        "k": 2,
        "gamma": 1,
        "n_spec": 500,
        "n_target": 500,
        "outcomes": [[1, 2], [1, 3], [4, 2]],
        "exact": exact,
        "spec_counts": spec,
        "target_counts": [252, 148, 74, 26],
        "spec_test": fit,
        "target_test": {"method": "chi2", "statistic": 1.2, "dof": 3, "p_value": 0.75},
        "impossible_spec": 0,
    }


# ----- theory ------------------------------------------------------------------------------------


def test_tokens_per_iteration_curve():
    fig = theory_charts.tokens_per_iteration_curve_figure(0.8, 4, measured={"gamma": 4, "tokens": 3.1, "alpha": 0.8})
    assert_labelled(fig)
    main = next(t for t in fig.data if t.name.startswith("expected at"))
    assert list(main.x) == list(range(1, 17))
    assert main.y[3] == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)
    assert any(t.name == "measured (current trace)" for t in fig.data)
    assert "tokens" in fig.layout.yaxis.title.text


@pytest.mark.parametrize("alpha, c", [(0.75, 0.02), (0.6, 0.3), (0.2, 0.5)])
def test_walltime_curve_marks_the_best_gamma(alpha, c):
    fig = theory_charts.walltime_curve_figure(alpha, c, 3)
    assert_labelled(fig)
    best = best_gamma(alpha, c, 16)
    star = next(t for t in fig.data if t.name.startswith("best γ"))
    assert star.x == (best,) and star.y[0] == pytest.approx(walltime_improvement(alpha, best, c))
    assert "×" in fig.layout.yaxis.title.text


def test_walltime_curve_with_a_measured_point():
    fig = theory_charts.walltime_curve_figure(
        0.7, 0.1, 4, measured={"gamma": 4, "alpha": 0.6, "c": 0.2, "speedup": 1.3}
    )
    names = [t.name for t in fig.data]
    assert any("predicted from its α, c" in n for n in names)
    assert any("measured vs its baseline (1.30×)" in n for n in names)


def test_alpha_c_plane_has_the_boundary_and_points():
    fig = theory_charts.alpha_c_plane_figure(0.7, 0.1, measured={"alpha": 0.5, "c": 1.7}, steps=11)
    assert_labelled(fig)
    boundary = next(t for t in fig.data if t.name and t.name.startswith("α = c"))
    assert list(boundary.x) == list(boundary.y)
    heat = fig.data[0]
    assert heat.type == "heatmap" and heat.colorbar.title.text == "best speedup (×)"
    # Below the line a speedup exists, above it none: check two corners of the grid.
    assert heat.z[0][-1] > 1  # c = 0, alpha = 1
    assert heat.z[-1][0] <= 1  # c at the top, alpha = 0
    measured = next(t for t in fig.data if t.name and t.name.startswith("current trace"))
    assert measured.y == (0.6,) and "off the chart" in measured.name


def test_table4_rows_are_within_a_tenth_of_the_paper():
    rows = theory_charts.table4_rows()
    assert len(rows) == len(TABLE_4) == 12
    for row in rows:
        assert abs(row["formula − paper expected"]) <= 0.1
        assert {"paper expected (×)", "paper measured (×)", "our formula (×)"} <= set(row)


def test_draft_training_figure():
    history = [
        {"step": 0, "alpha": 0.1, "greedy_agreement": 0.05},
        {"step": 25, "alpha": 0.4, "greedy_agreement": 0.5},
        {"step": 50, "alpha": 0.6, "greedy_agreement": 0.7},
    ]
    fig = theory_charts.draft_training_figure(history, c=0.2)
    assert_labelled(fig)
    speed = next(t for t in fig.data if t.yaxis == "y2")
    assert speed.y[-1] == pytest.approx(walltime_improvement(0.6, best_gamma(0.6, 0.2), 0.2))
    assert fig.layout.yaxis2.title.text
    # its own round ticks, not ones lined up with the left axis's grid (1.491, 1.193, 0.895)
    assert fig.layout.yaxis2.tickmode == "auto"
    assert not any("free-text" in t.name for t in fig.data)  # a record without that measure


def test_head_record_with_bench_prompt_alpha_draws_it(tmp_path):
    import json

    from specviz.training.training_record import read_training_record

    point = {"alpha_by_position": [0.4, 0.3], "greedy_agreement_by_position": [0.5, 0.4]}
    history = [
        {"step": 0, **point, "bench_prompts": {"alpha_by_position": [0.2, 0.1]}},
        {"step": 100, **point, "bench_prompts": {"alpha_by_position": [0.35, 0.3]}},
    ]
    path = tmp_path / "head_training.json"
    path.write_text(json.dumps({"history": history}))
    read = read_training_record(path)["history"]
    assert [p["alpha_bench_prompts"] for p in read] == [0.2, 0.35] and read[1]["alpha"] == 0.4
    fig = theory_charts.draft_training_figure(read, c=0.06)
    free = next(t for t in fig.data if "free-text" in t.name)
    assert list(free.y) == [0.2, 0.35]
    history[1]["bench_prompts"] = {"alpha_by_position": [1.7]}  # out of range: dropped, not drawn
    path.write_text(json.dumps({"history": history}))
    assert read_training_record(path)["history"][1]["alpha_bench_prompts"] is None


# ----- sweep -------------------------------------------------------------------------------------


def test_speedup_heatmap():
    result = make_sweep()
    fig = sweep_charts.speedup_heatmap(result)
    assert_labelled(fig, legend=False)
    heat = fig.data[0]
    assert heat.colorbar.title.text == "speedup (×)"  # the colour bar is the legend
    assert len(heat.z) == 2 and len(heat.z[0]) == 3
    assert heat.text[0][0].endswith("×")


def test_heatmap_of_a_stopped_sweep_leaves_unreached_cells_empty():
    fig = sweep_charts.speedup_heatmap(make_sweep(stopped=True))
    assert fig.data[0].z[1][1] is None and fig.data[0].z[1][0] is not None
    result = make_sweep(stopped=True)
    result.cells = result.cells[:2]  # only gamma 1 and 2 at T = 0 were reached
    result.config = {"gammas": [1, 2, 3], "temperatures": [0.0, 1.0]}
    heat = sweep_charts.speedup_heatmap(result).data[0]
    assert list(heat.x) == ["1", "2", "3"] and list(heat.y) == ["0", "1"]  # the planned grid
    assert heat.z[0][2] is None and list(heat.z[1]) == [None, None, None]


def test_empty_sweep_says_so():
    fig = sweep_charts.speedup_heatmap(SweepResult(config={}))
    assert "run the sweep" in fig.layout.annotations[0].text


def test_tokens_per_iteration_sweep_figure():
    fig = sweep_charts.tokens_per_iteration_sweep_figure(make_sweep())
    assert_labelled(fig)
    names = [t.name for t in fig.data]
    assert "T = 0: measured" in names and any(n.startswith("T = 1: formula") for n in names)
    formula = next(t for t in fig.data if t.name.startswith("T = 0: formula"))
    assert formula.y[0] == pytest.approx(1.8)


def test_speedup_sweep_figure_and_table():
    result = make_sweep()
    fig = sweep_charts.speedup_sweep_figure(result)
    assert_labelled(fig)
    rows = sweep_charts.sweep_table(result)
    assert len(rows) == 6 and "speedup (×)" in rows[0]


# ----- lab ---------------------------------------------------------------------------------------


def test_distribution_figure_groups_the_tail():
    result = make_lab()
    labels = ["a b", "a <b>", "c b"]
    fig = lab_charts.distribution_figure(result, labels, top=2)
    assert_labelled(fig)
    exact = next(t for t in fig.data if t.name.startswith("exact p"))
    assert list(exact.x) == ["a b", "a &lt;b&gt;", "everything else"]  # escaped
    assert exact.y[-1] == pytest.approx(0.2)
    spec = next(t for t in fig.data if t.name.startswith("speculative"))
    assert spec.y[0] == pytest.approx(0.5)
    assert exact.error_y.array[0] == pytest.approx(2 * (0.25 / 500) ** 0.5)


def test_rules_figure_and_rows():
    results = {"exact": make_lab(), "accept_if_equal": make_lab("accept_if_equal", shift=True)}
    fig = lab_charts.rules_figure(results, ["accept_if_equal"])
    assert_labelled(fig)
    assert {t.name for t in fig.data} == {
        "correct rule (keeps p exactly)",
        "wrong rule (changes the distribution)",
    }
    rows = lab_charts.rules_rows(results, {"exact": 1.6, "accept_if_equal": 1.4})
    assert [r["verdict"] for r in rows] == ["not rejected", "rejected"]
    assert rows[0]["tokens per iteration"] == 1.6


def test_rules_figure_draws_p_values_on_a_log_axis():
    results = {"exact": make_lab(), "resample_from_p": make_lab("resample_from_p", shift=True)}
    fig = lab_charts.rules_figure(results, ["resample_from_p"])
    correct, wrong = fig.data
    assert fig.layout.yaxis.type == "log"
    assert correct.y[0] == pytest.approx(0.8)
    assert wrong.y[0] == pytest.approx(1e-40)  # where it is: no floor
    assert fig.layout.yaxis.range[0] < -40 < math.log10(0.8) < fig.layout.yaxis.range[1]
    assert wrong.text[0] == "p-value 1e-40"  # never "p =": p is the target's probability
    assert fig.layout.shapes[0].y0 == pytest.approx(lab_charts.SIGNIFICANCE)  # the significance line


def test_rules_table_as_text_keeps_every_label_whole_and_formats_the_numbers():
    results = {"exact": make_lab(), "resample_from_p": make_lab("resample_from_p", shift=True)}
    rows = lab_charts.rules_rows(results, {"exact": 1.834}, as_text=True)
    raw = lab_charts.rules_rows(results, {"exact": 1.834})
    assert [r["what it does"] for r in rows] == [r["what it does"] for r in raw]  # labels untouched
    assert rows[0]["p-value"] == "0.8" and rows[1]["p-value"] == "1e-40"
    assert rows[0]["tokens per iteration"] == "1.83" and rows[1]["tokens per iteration"] == "n/a"
