"""The draft's quality for the run on show and the shipped record of the shipped drafters on held-out
text (specviz.traces.draft_quality, laid out by specviz.teaching.charts.quality), and the two pages
that show them: the Drafters page's tab and the Acceptance page's table."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from specviz.config import DEFAULT_DRAFT, drafter_named
from specviz.errors import SpecvizError
from specviz.shipped import ASSETS
from specviz.teaching import glossary
from specviz.teaching.charts import quality
from specviz.teaching.charts.acceptance import position_table
from specviz.teaching.charts.headline import headline_metrics
from specviz.traces import draft_quality
from specviz.traces.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
HEAD = drafter_named("head")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def example(name: str) -> Trace:
    return Trace.from_json((ASSETS / "examples" / f"{name}.json").read_bytes())


def first_draft(choice: int, q_order: list[int], beta: float = 0.5) -> dict:
    q = [[t, 0.9 if i == 0 else 0.01] for i, t in enumerate(q_order)]
    return {"token_id": q_order[0], "beta": beta, "accepted": True, "p_top": [[choice, 0.8]], "q_top": q}


def trace_of(iterations: list[dict], temperature: float, new_tokens: int, gamma: int = 2) -> SimpleNamespace:
    config = {"temperature": temperature, "gamma": gamma}
    return SimpleNamespace(iterations=iterations, config=config, summary={"new_tokens": new_tokens})


# Three drafting iterations: the target's choice is the draft's 1st, 3rd and 9th guess; one prefill.
ITERATIONS = [
    {"drafts": [first_draft(5, [5, 6, 7]), first_draft(1, [1, 2])], "accepted_count": 2},
    {"drafts": [first_draft(9, [6, 2, 9, 4], beta=0.25)], "accepted_count": 0},
    {"drafts": [first_draft(8, list(range(10, 18)) + [8])], "accepted_count": 1},
    {"drafts": [], "accepted_count": 0},
]


# ----- the record ----------------------------------------------------------------------------------


def test_the_shipped_record_measured_the_shipped_head():
    """Fails when the head is trained again and the record was not: the pages would show another
    head's figures. Regenerate it with draft_quality.SHIP_COMMAND (docs/benchmarks.md)."""
    record = draft_quality.read_record()
    assert record["head"]["sha256"] == draft_quality.head_digest(), (
        f"specviz/assets/draft_report.json measured another head: run `{draft_quality.SHIP_COMMAND}`"
    )
    assert not draft_quality.record_is_stale(record)


def test_the_shipped_record_names_its_cpu_date_settings_and_both_drafters_at_both_temperatures():
    record = draft_quality.read_record()
    assert record["cpu"] and record["date"] and record["threads"] >= 1 and "--ship" in record["command"]
    assert record["max_new_tokens"] > 0 and len(record["prompts"]) >= 4 and record["gamma"] >= 1
    for name in (DEFAULT_DRAFT, HEAD):
        greedy, sampled = (draft_quality.record_row(record, name, t) for t in (0.0, 1.0))
        assert greedy["temperature"] == 0.0 and sampled["temperature"] == 1.0
        assert greedy["coverage"] is None  # q is one-hot at T = 0
        top = [sampled["coverage"][f"top{k}"] for k in draft_quality.COVERAGE_K]
        assert top == sorted(top) and 0 < top[0] <= top[-1] <= 1  # a wider top list holds the choice more often
        for row in (greedy, sampled):
            assert 1 <= row["tau"] <= record["gamma"] + 1 and len(row["accept_at"]) == record["gamma"]


def test_a_head_trained_again_leaves_the_record_stale(tmp_path):
    weights = tmp_path / "head.safetensors"
    weights.write_bytes(b"first head")
    record = {"head": {"sha256": draft_quality.head_digest(weights)}}
    assert not draft_quality.record_is_stale(record, weights)
    weights.write_bytes(b"the head trained again")
    assert draft_quality.record_is_stale(record, weights)


@pytest.mark.parametrize(
    "data, message",
    [("{", "Cannot read"), ({"rows": []}, "no 'rows'"), ({"head": {}, "rows": [{"drafter": "hybrid"}]}, "row 1")],
)
def test_a_bad_record_says_what_is_wrong(tmp_path, data, message):
    path = tmp_path / "draft_report.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    with pytest.raises(SpecvizError, match=message):
        draft_quality.read_record(path)


def test_the_record_row_is_the_one_nearest_the_runs_temperature():
    record = {"rows": [{"drafter": "hybrid", "temperature": t, "tree": "branches"} for t in (0.0, 1.0)]}
    assert draft_quality.record_row(record, "hybrid", 0.3)["temperature"] == 0.0
    assert draft_quality.record_row(record, "hybrid", 0.8)["temperature"] == 1.0
    assert draft_quality.record_row(record, "ngram", 0.8) is None


# ----- the run on show ------------------------------------------------------------------------------


def test_a_runs_coverage_counts_where_the_targets_choice_stands_in_the_drafts_top_list():
    run = draft_quality.run_quality(trace_of(ITERATIONS, 1.0, new_tokens=3 + 1 + 2 + 1))
    assert run["coverage"] == {"top1": 1 / 3, "top2": 1 / 3, "top4": 2 / 3, "top8": 2 / 3}  # the 9th: never
    assert run["coverage_caveat"] is None and run["temperature"] == 1.0
    assert run["tau"] == 7 / 4 and run["iterations"] == 4
    assert run["accept_at"] == [2 / 3, 1.0] and run["alpha_at"] == pytest.approx([(0.5 + 0.25 + 0.5) / 3, 0.5])


def test_a_greedy_or_one_hot_run_has_no_coverage_and_says_why():
    greedy = draft_quality.run_quality(trace_of(ITERATIONS, 0.0, new_tokens=7))
    assert greedy["coverage"] is None and greedy["coverage_caveat"] == "greedy"
    one_hot = [{"drafts": [{**first_draft(5, [5]), "q_top": [[5, 1.0]]}], "accepted_count": 1}]
    assert draft_quality.run_quality(trace_of(one_hot, 1.0, 2))["coverage_caveat"] == "one_hot"
    assert draft_quality.run_quality(trace_of([{"drafts": [], "accepted_count": 0}], 1.0, 1))["coverage"] is None


@pytest.mark.parametrize("name", ["01-default", "02-sampled", "04-ngram-gamma6"])
def test_a_runs_tau_is_the_headlines_tokens_per_iteration_and_its_acceptance_the_acceptance_table(name):
    trace = example(name)
    run = draft_quality.run_quality(trace)
    shown = {m.label: m.value for row in headline_metrics(trace, None) for m in row}
    assert f"{run['tau']:.2f}" == shown["Tokens per iteration"]
    assert run["accept_at"] == [row[glossary.ACCEPTANCE_AT_POSITION.label] for row in position_table(trace)]
    assert run["alpha_at"] == [row["mean β"] for row in position_table(trace)]


# ----- the table -----------------------------------------------------------------------------------

RECORD = {
    "cpu": "AMD EPYC", "date": "2026-12-05", "gamma": 3, "max_new_tokens": 96, "prompts": ["a"] * 8,
    "command": "python -m specviz draft-report --ship --threads 1", "head": {"sha256": "ab" * 32},
    "rows": [
        {"drafter": name, "tree": "branches", "temperature": t, "tau": tau, "drafts_per_iteration": 1.5,
         "accept_at": [0.5, 0.4, 0.3], "alpha_at": [0.45, 0.35, 0.25],
         "coverage": None if t == 0 else {"top1": 0.3, "top2": 0.4, "top4": 0.5, "top8": 0.6}}
        for name, tau in ((DEFAULT_DRAFT, 1.8), (HEAD, 1.7)) for t in (0.0, 1.0)
    ],
}  # fmt: skip


def test_the_sampled_run_stands_beside_the_records_nearest_temperature_with_its_own_numbers():
    trace = example("02-sampled")  # T = 0.8, γ = 4
    rows, notes = quality.run_beside_record(trace, RECORD, "en")
    table = {row["figure"]: row for row in rows}
    columns = list(rows[0])
    assert columns == [
        "figure",
        "this run, T = 0.8",
        "hybrid, T = 1, held-out text",  # the run's own drafter first
        "draft head, T = 1, held-out text",
    ]
    run = draft_quality.run_quality(trace)
    assert table["τ: tokens per target pass"]["this run, T = 0.8"] == f"{trace.summary['mean_accepted_length']:.2f}"
    assert table["τ: tokens per target pass"]["hybrid, T = 1, held-out text"] == "1.80"
    assert table["acceptance at position 4"]["draft head, T = 1, held-out text"] == "–"  # the record's γ is 3
    assert table["target's choice in the draft's top 8"]["this run, T = 0.8"] == f"{run['coverage']['top8']:.2f}"
    assert table["target's choice in the draft's top 2"]["draft head, T = 1, held-out text"] == "0.40"
    assert any("the record's T = 1, the nearest" in n for n in notes)
    assert any(f"{trace.summary['new_tokens']} new tokens ÷ {len(trace.iterations)} iterations" in n for n in notes)


def test_a_greedy_run_says_why_no_column_has_coverage_in_both_languages():
    trace = example("01-default")
    for lang, word in (("en", "one-hot"), ("zh", "独热")):
        rows, notes = quality.run_beside_record(trace, RECORD, lang)
        assert any(word in n for n in notes) and not any("nearest" in n or "最接近" in n for n in notes)
        assert all(set(row.values()) - {next(iter(row.values()))} == {"–"} for row in rows[-4:])
    en, zh = (quality.run_beside_record(trace, RECORD, lang)[0] for lang in ("en", "zh"))
    assert [list(r.values())[1:] for r in en] == [list(r.values())[1:] for r in zh]  # the same numbers


def test_the_drafters_table_sets_the_default_and_the_head_at_each_temperature_side_by_side():
    columns = quality.shipped_columns(RECORD, "en")
    assert [name for name, _ in columns] == ["hybrid, T = 0", "hybrid, T = 1", "draft head, T = 0", "draft head, T = 1"]
    rows = quality.quality_rows(columns, 3, "en")
    assert rows[0] == {
        "figure": "τ: tokens per target pass",
        **dict(zip([c for c, _ in columns], ["1.80", "1.80", "1.70", "1.70"], strict=True)),
    }
    assert "AMD EPYC" in quality.record_words(RECORD) and "abababababab" in quality.record_words(RECORD)


# ----- the pages -----------------------------------------------------------------------------------


def open_page(page: str, lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_drafters_page_shows_the_shipped_record():
    at = open_page("app_pages/drafts.py")
    record = draft_quality.read_record()
    frames = [f.value for f in at.dataframe if "figure" in f.value.columns]
    assert len(frames) == 1
    head_t1 = draft_quality.record_row(record, HEAD, 1.0)
    assert f"{head_t1['tau']:.2f}" in frames[0]["draft head, T = 1"].tolist()
    assert any(record["cpu"] in c.value for c in at.caption)


def test_the_acceptance_page_sets_the_run_beside_the_shipped_head_in_chinese():
    at = open_page("app_pages/acceptance.py", "zh")
    frames = [f.value for f in at.dataframe if "指标" in f.value.columns]
    assert len(frames) == 1 and "本次运行，T = 0" in frames[0].columns
    assert any("独热" in c.value for c in at.caption)  # the first visit's example is greedy


def test_the_pages_say_so_when_the_record_measured_another_head(monkeypatch):
    from specviz_app.runs import gallery

    monkeypatch.setattr(gallery, "shipped_draft_report", lambda: (None, "stale"))
    at = open_page("app_pages/acceptance.py")
    assert any("measured another draft head" in i.value for i in at.info)
