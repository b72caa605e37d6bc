"""The Workloads page's charts (specviz.teaching.charts.workloads): one per measure by kind and
drafter with the prediction beside it, acceptance by position per kind, and the table."""

from __future__ import annotations

import pytest

from specviz.labs import workloads
from specviz.teaching.charts import workloads as charts


def _cell(kind: str, draft: str, alpha, speedup: float, predicted) -> dict:
    return workloads.clean_cell(
        {
            "kind": kind, "draft": draft, "label": workloads.draft_label(draft), "gamma": 3, "new_tokens": 24,
            "iterations": 10, "prompts": 2, "pairs": 2, "alpha": alpha, "tokens_per_iteration": 2.4,
            "predicted_tokens_per_iteration": None if alpha is None else 2.5, "speedup": speedup,
            "predicted_speedup": predicted, "acceptance_by_position": [0.8, 0.6, None],
        },
        "test",
    )  # fmt: skip


@pytest.fixture
def result() -> workloads.WorkloadsResult:
    cells = [
        _cell("story", "ngram", None, 0.95, None),  # out of KINDS' order, and nothing drafted: α is None
        _cell("code", "hybrid", 0.8, 1.6, 1.7),
        _cell("code", "ngram", 0.7, 1.3, 1.2),
        _cell("story", "hybrid", 0.4, 0.9, 1.0),
    ]
    return workloads.WorkloadsResult(config={}, cells=cells)


def test_one_bar_per_drafter_grouped_by_kind_with_predictions(result):
    fig = charts.measure_figure(result, "speedup")
    bars = [t for t in fig.data if t.type == "bar"]
    diamonds = [t for t in fig.data if t.type == "scatter"]
    assert [b.name for b in bars] == ["n-gram", "hybrid"]
    assert all(list(b.x) == ["code", "story"] for b in bars)  # KINDS' order, their one-word keys
    assert bars[0].customdata[1][0] == "open-ended story"  # the full name in the hover
    assert list(bars[0].y) == [1.3, 0.95] and list(diamonds[0].y) == [1.2, None]
    assert [d.showlegend for d in diamonds] == [True, False]  # one legend entry says what a diamond is
    assert fig.layout.shapes[0].y0 == 1.0 and "1× = no gain" in fig.layout.yaxis.title.text  # the 1× line
    assert "speedup" in fig.layout.title.text.lower() and "×" in fig.layout.yaxis.title.text
    assert fig.layout.xaxis.title.text


def test_alpha_has_no_prediction_and_a_rate_axis(result):
    fig = charts.measure_figure(result, "alpha")
    assert {t.type for t in fig.data} == {"bar"}
    assert tuple(fig.layout.yaxis.range) == (0, 1.05) and "0 to 1" in fig.layout.yaxis.title.text
    tokens = charts.measure_figure(result, "tokens_per_iteration")
    assert "tokens" in tokens.layout.yaxis.title.text and any(t.type == "scatter" for t in tokens.data)


def test_an_unknown_measure_is_refused(result):
    with pytest.raises(ValueError, match="measure must be one of"):
        charts.measure_figure(result, "wall_ms")


def test_acceptance_by_position_has_one_line_per_kind(result):
    fig = charts.position_figure(result, "hybrid")
    assert [t.name for t in fig.data] == ["code", "open-ended story"]
    assert list(fig.data[0].x) == [1, 2, 3] and list(fig.data[0].y) == [0.8, 0.6, None]
    assert fig.data[0].line.dash != fig.data[1].line.dash  # lines that meet stay apart
    assert "hybrid" in fig.layout.title.text and fig.layout.xaxis.title.text


def test_the_table_has_a_row_per_cell_in_kind_order(result):
    table = charts.workloads_table(result)
    assert [(r["kind"], r["drafter"]) for r in table] == [
        ("code", "hybrid"), ("code", "n-gram"), ("open-ended story", "n-gram"), ("open-ended story", "hybrid"),
    ]  # fmt: skip
    assert table[0]["speedup ×"] == 1.6 and table[0]["predicted ×"] == 1.7


def test_the_shipped_recording_draws_every_chart():
    result = workloads.shipped()
    assert result is not None
    for measure in charts.MEASURES:
        fig = charts.measure_figure(result, measure)
        assert sum(t.type == "bar" for t in fig.data) == len(workloads.OFFLINE_DRAFTS)
    assert len(charts.position_figure(result, result.drafts()[0]).data) == len(workloads.KINDS)
