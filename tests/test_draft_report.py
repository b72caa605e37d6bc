"""The draft report's arithmetic (specviz.labs.draft_report) on iterations whose answers are known."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specviz.labs import draft_report

pytestmark = pytest.mark.quick


def draft(token: int, target_choice: int, q_order: list[int], beta: float, accepted: bool) -> dict:
    return {
        "token_id": token, "beta": beta, "accepted": accepted,
        "p_top": [[target_choice, 0.9]], "q_top": [[t, 0.1] for t in q_order],
    }  # fmt: skip


def iteration(drafts: list[dict], accepted: int, source: str = "head") -> dict:
    return {"drafts": drafts, "accepted_count": accepted, "drafting": {"source": source}}


ITERATIONS = [
    iteration([draft(5, 5, [5, 6], 0.9, True), draft(7, 8, [7, 8], 0.4, False)], 1),  # top-1 hit
    iteration([draft(6, 9, [6, 1, 2, 9], 0.2, False)], 0),  # the target's choice is the draft's 4th
    iteration([draft(3, 3, [3], 1.0, True), draft(4, 4, [4], 1.0, True)], 2, source="ngram"),
    iteration([], 0),  # the prefill: no draft
]


def test_coverage_counts_where_the_targets_choice_stands_in_the_drafts_top_list():
    assert draft_report.top_k_coverage(ITERATIONS) == {"top1": 2 / 3, "top2": 2 / 3, "top4": 1.0, "top8": 1.0}


def test_lookups_fire_in_one_of_three_drafting_iterations_and_all_their_drafts_pass():
    assert draft_report.lookup_share(ITERATIONS) == {"fired": 1 / 3, "accepted": 1.0}


def test_stats_count_tokens_per_pass_and_acceptance_by_position():
    trace = SimpleNamespace(iterations=ITERATIONS, summary={"new_tokens": 2 + 1 + 3 + 1}, config={"temperature": 1.0})
    stats = draft_report.draft_stats([trace], gamma=2)
    assert stats["tau"] == 7 / 4 and stats["drafts_per_iteration"] == 5 / 4
    assert stats["reached_at"] == [3, 2] and stats["accept_at"] == [2 / 3, 1 / 2]
    assert stats["alpha_at"] == pytest.approx([(0.9 + 0.2 + 1.0) / 3, (0.4 + 1.0) / 2])
    assert stats["coverage"]["top4"] == 1.0
    greedy = SimpleNamespace(iterations=ITERATIONS, summary={"new_tokens": 7}, config={"temperature": 0.0})
    assert draft_report.draft_stats([greedy], gamma=2)["coverage"] is None  # q is one-hot at T = 0


def run(new_tokens, wall_ms, iterations=1, drafted=0, draft_ms=0.0, verify_ms=0.0):
    summary = {"new_tokens": new_tokens, "wall_ms": wall_ms, "iterations": iterations, "drafted": drafted}
    return SimpleNamespace(summary={**summary, "draft_ms": draft_ms, "verify_ms": verify_ms})


def test_speedups_measured_from_the_runs_and_predicted_from_their_c_and_v():
    alone = [run(10, 100.0, iterations=10)]  # a step: 10 ms
    spec = [run(10, 50.0, iterations=4, drafted=8, draft_ms=8.0, verify_ms=48.0)]  # c = 0.1, v = 1.2
    assert draft_report.measured_speedup(spec, alone) == pytest.approx(2.0)
    assert draft_report.predicted_speedup(spec, alone) == pytest.approx(2.5 / (2 * 0.1 + 1.2))


def test_the_table_names_the_cpu_and_every_drafter():
    trace = SimpleNamespace(iterations=ITERATIONS, summary={"new_tokens": 7}, config={"temperature": 0.0})
    stats = draft_report.draft_stats([trace], 2)
    rep = {
        "cpu": "AMD EPYC", "date": "2026-12-04", "gamma": 2, "max_new_tokens": 8, "prompts": ["a"],
        "v_rows": {"1": 1.0, "4": 1.1},
        "rows": [{"drafter": "hybrid", "temperature": 0.0, **stats, "speedup_measured": 1.5,
                  "speedup_predicted": None}],
    }  # fmt: skip
    table = draft_report.markdown(rep)
    assert (
        "AMD EPYC" in table
        and "| hybrid | 0 | 1.75 |" in table
        and "1.50×" in table
        and "| v(rows) | 1.00 | 1.10 |" in table
    )


def test_each_prompt_is_decoded_by_the_drafter_and_by_the_target_alone_on_the_same_options(tiny_pair):
    target, _draft = tiny_pair
    spec, alone = draft_report.decode_pairs(target, "ngram", [[5, 6, 7], [8, 9]], 0.0, 6, lambda _m: None)
    assert len(spec) == len(alone) == 2
    assert all(t.mode == "speculative" and t.config["draft"] == "ngram" for t in spec)
    assert all(t.mode == "autoregressive" for t in alone)
    assert all(t.summary["new_tokens"] == 6 and t.config["temperature"] == 0.0 for t in spec + alone)
    # Greedy: the draft changes how fast, never what the target writes.
    assert [t.output_token_ids for t in spec] == [t.output_token_ids for t in alone]
