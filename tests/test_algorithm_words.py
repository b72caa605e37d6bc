"""Where the engine leaves the paper's Algorithm 1, said where it happens (issue 35): drafts made of
gamma and why the drafting stopped, the first iteration's missing draft, the tree's kept branch,
the bonus after the drafts actually made, timeline hovers that label durations and start times,
and the histogram's prediction for the drafts each iteration made. Also the trace's `drafting`
field's validation and the "paper" preset's settings and links."""

from __future__ import annotations

import copy
import json

import pytest
from test_charts import make_baseline, make_trace

from specviz.config import PAPER_DRAFT
from specviz.errors import TraceError
from specviz.labs.theory import tokens_per_iteration_distribution
from specviz.teaching import charts, glossary
from specviz.teaching.charts.acceptance import counted_iterations, predicted_lengths, predicted_mean_length
from specviz.teaching.charts.drafting import drafted_line, plural, run_summary, why_fewer
from specviz.teaching.charts.step import step_view
from specviz.teaching.charts.stream import token_stream_html
from specviz.teaching.charts.tokens import decision_text, iteration_tokens
from specviz.traces.trace import Trace, validate
from specviz_app import params

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

STOPPED = {"gamma": 3, "source": "head", "stop": "confidence", "confidence": 0.21, "threshold": 0.3}


def early_stop_trace() -> Trace:
    """make_trace with iteration 2 cut to one accepted draft and its bonus (an early stop at 0.21),
    and a first iteration with no draft (the head had no features yet)."""
    data = json.loads(make_trace().to_json())
    its = data["iterations"]
    its[1]["drafts"] = its[1]["drafts"][:1]
    its[1]["accepted_count"] = 1
    its[1]["drafting"] = dict(STOPPED)
    its[0]["drafting"] = {"gamma": 3, "source": "head", "stop": None, "confidence": None, "threshold": None}
    first = copy.deepcopy(its[2])
    first.update(drafts=[], accepted_count=0, drafting={**STOPPED, "stop": "no_features", "confidence": None,
                                                        "threshold": None})  # fmt: skip
    first["correction"]["kind"] = "bonus"  # as the recorder writes it; Trace calls it "target"
    data["iterations"] = [first, *its]
    for i, it in enumerate(data["iterations"]):
        it["index"] = i
    data["config"]["draft"] = "hybrid"
    return Trace(**{k: v for k, v in data.items() if k != "schema"})


def test_plurals():
    assert plural(1, "draft") == "1 draft" and plural(3, "draft") == "3 drafts"


def test_an_early_stop_says_how_many_of_gamma_and_the_confidence_against_its_threshold():
    it = early_stop_trace().iterations[2]
    line = drafted_line(it, 3)
    assert line.startswith("drafted 1 of γ = 3 by the draft head, then an early stop, as its confidence")
    assert "0.21, below its threshold 0.30" in line and "not in the paper's Algorithm 1" in line
    full = make_trace().iterations[1] | {"drafting": {**STOPPED, "stop": None, "confidence": None}}
    assert why_fewer(full, 3) is None and drafted_line(full, 3) == "drafted 3 of γ = 3 by the draft head"


def test_the_first_iteration_says_why_it_has_no_draft():
    trace = early_stop_trace()
    view = step_view(trace, 1)
    assert view.summary == "Iteration 1 of 4: no draft, so the target made one token alone."
    assert "this is the first iteration: the draft head reads" in view.drafting_note and "prefill" in view.drafting_note
    assert "this is the first iteration: the draft head reads" in view.correction.text
    # An older trace without `drafting` still says it, from its draft's kind (a head reads features).
    old = early_stop_trace()
    for it in old.iterations:
        it.pop("drafting", None)
    assert "this is the first iteration: the draft head reads" in step_view(old, 1).drafting_note


def test_the_bonus_says_how_many_drafts_this_iteration_made():
    trace = early_stop_trace()
    one = iteration_tokens(trace.iterations[2])[-1]
    three = iteration_tokens(make_trace().iterations[1])[-1]
    assert one["status"] == three["status"] == "bonus"
    assert decision_text(one).startswith("bonus: the one draft this iteration made was accepted")
    assert decision_text(three).startswith("bonus: all 3 drafts this iteration made were accepted")
    assert "all drafts" not in decision_text(one)
    view = step_view(trace, 3)
    assert view.correction.text.startswith("The one draft this iteration made passed")
    assert step_view(make_trace(), 2).correction.text.startswith("All 3 drafts this iteration made passed")
    assert "1 tokens" not in view.summary and "proposed 1 token," in view.summary


def test_an_older_trace_without_gamma_claims_no_gamma():
    it = make_trace().iterations[0]
    assert drafted_line(it) == "drafted 3 tokens" and drafted_line(it, 4).startswith("drafted 3 of γ = 4")


def test_the_hover_card_ends_with_its_iterations_drafting():
    html = token_stream_html(early_stop_trace().iterations, {}, gamma=3)
    assert html.count("iteration 3: drafted 1 of γ = 3 by the draft head, then an early stop") == 2  # draft + bonus
    assert "iteration 1: no draft (γ = 3): this is the first iteration" in html
    assert "iteration 2: drafted 3 of γ = 3 by the draft head<" in html


def test_a_tree_iteration_names_the_kept_branch_in_the_hover_card_and_the_inspector():
    trace = make_trace()
    it = trace.iterations[2]
    it["tree"] = {"kept_branch": 1, "other_branches": [[{"token_id": 40, "token": " known"},
                                                         {"token_id": 41, "token": " as"}]],
                  "rejected_first": []}  # fmt: skip
    html = token_stream_html(trace.iterations, trace.extra)
    walked = "a draft tree: 2 branches checked in one target pass; the target walked branch 2, “. And then”, and "
    assert walked + f"accepted {it['accepted_count']} of its {len(it['drafts'])} drafts" in html
    assert "“. And then” kept" not in html  # a card on a rejected draft never says its branch's drafts were kept
    note = step_view(trace, 3).tree_note
    kept, not_kept = note.split("Kept: ", 1)[1].split("Not kept: ", 1)
    assert "“. And then”" in kept and "“known as”" in not_kept and "known" not in kept


def test_timeline_hover_shows_durations_as_durations_and_start_times_as_such():
    trace = early_stop_trace()
    fig = charts.timeline_figure(trace, make_baseline())
    draft, verify, base = fig.data
    # iteration 3 (index 2) started at 100 ms here, its draft lasted 10 ms and its verify 80 ms
    assert list(verify.customdata[2][:3]) == [3, 80.0, 110.0]
    assert list(draft.customdata[2][:3]) == [3, 10.0, 100.0]
    for bar in (draft, verify, base):
        assert "lasted %{customdata[1]" in bar.hovertemplate and "started at %{customdata[2]" in bar.hovertemplate
        assert "%{x" not in bar.hovertemplate  # a bar's x is where it ends, never its length
    assert "accepted 1 of the 1 draft made" in verify.customdata[2][3] and "early stop" in verify.customdata[2][3]
    assert "no draft to check" in verify.customdata[0][3]
    assert "this is the first iteration: the draft head reads" in draft.customdata[0][3].replace("<br>", " ")


def test_histogram_prediction_is_the_truncated_geometric_for_the_drafts_each_iteration_made():
    alpha = 0.4
    mixed = predicted_lengths(alpha, [1, 3], 3)
    one, three = tokens_per_iteration_distribution(alpha, 1), tokens_per_iteration_distribution(alpha, 3)
    assert mixed == pytest.approx([(one[0] + three[0]) / 2, (one[1] + three[1]) / 2, three[2] / 2, three[3] / 2])
    assert sum(mixed) == pytest.approx(1.0)
    # Every iteration drafted gamma (the paper's case): the paper's own prediction.
    assert predicted_lengths(alpha, [3, 3], 3) == pytest.approx(three)
    assert predicted_mean_length(alpha, [1, 3]) == pytest.approx((1.4 + (1 + 0.4 + 0.16 + 0.064)) / 2)
    trace = early_stop_trace()
    assert [len(it["drafts"]) for it in counted_iterations(trace)] == [3, 1, 3]  # the draft-less one left out
    rows = charts.length_table(trace)
    assert [r["iterations"] for r in rows] == [1, 1, 1, 0]
    want = predicted_lengths(trace.summary["alpha"], [3, 1, 3], 3)
    assert [r["predicted fraction"] for r in rows] == pytest.approx(want)
    fig = charts.accept_length_figure(trace)
    assert fig.data[0].name == "measured (3 iterations with a draft; 2 drafted all γ = 3)"
    assert "for the drafts each made" in fig.data[1].name


def test_glossary_words_stay_true_with_trees_and_early_stops():
    assert "fewer than γ" in glossary.MEAN_ACCEPTED_LENGTH.definition
    assert "kept" in glossary.ACCEPTANCE_RATE.definition
    assert "above α" in glossary.WHY_RATE_AND_ALPHA_DIFFER and "below α" in glossary.WHY_RATE_AND_ALPHA_DIFFER
    assert "drafts each iteration actually made" in glossary.HISTOGRAM_PREDICTION.definition
    assert "no tree" in glossary.ALGORITHM_PAPER.definition and "no early stop" in glossary.ALGORITHM_PAPER.definition


def _traced_dict() -> dict:
    data = json.loads(make_trace().to_json())
    for it in data["iterations"]:
        it["drafting"] = {"gamma": 3, "source": "head", "stop": None, "confidence": None, "threshold": None}
    return data


def test_the_drafting_field_validates_and_older_traces_still_read():
    validate(_traced_dict())
    validate(json.loads(make_trace().to_json()))  # no drafting: an older trace


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gamma": 4, "stop": "confidence", "confidence": None, "threshold": 0.3}, "confidence: expected a finite"),
        ({"stop": "sleepy"}, "stop"),
        ({"stop": "confidence"}, "null when all gamma drafts were made"),
        ({"gamma": 2}, "at least the 3 drafts made"),
        ({"source": "oracle"}, "source"),
        ({"confidence": 0.5}, 'null unless stop is "confidence"'),
    ],
)
def test_a_damaged_drafting_field_is_refused_with_its_place(change, message):
    data = _traced_dict()
    data["iterations"][0]["drafting"].update(change)
    with pytest.raises(TraceError, match="iterations\\[0\\].drafting") as err:
        validate(data)
    assert message in str(err.value)


def test_an_early_stop_above_its_threshold_is_refused():
    data = _traced_dict()
    it = data["iterations"][1]
    it["drafting"] = {**STOPPED, "gamma": 4, "confidence": 0.35}
    with pytest.raises(TraceError, match="below the threshold"):
        validate(data)


def test_the_paper_preset_in_settings_and_links():
    s, msgs = params.from_query({"algorithm": "paper"})
    assert msgs == [] and s.algorithm == "paper"
    assert s.model_names()[1] == PAPER_DRAFT  # the default pair's hybrid becomes the paper's head chain
    assert params.Settings(pair="offline-head", algorithm="paper").model_names()[1] == PAPER_DRAFT
    assert params.Settings(pair="offline-ngram", algorithm="paper").model_names()[1] == "ngram"  # already a chain
    assert s.run_key() != params.DEFAULTS.run_key()
    assert s.to_query()["algorithm"] == "paper"
    assert params.from_query(s.to_query())[0] == s
    bad, msgs = params.from_query({"algorithm": "magic"})
    assert bad.algorithm == "fastest" and "algorithm: 'magic' should be one of fastest, paper" in msgs[0]
    config = {"target": params.models.OFFLINE_TARGET, "draft": PAPER_DRAFT, "gamma": 4, "temperature": 1.0}
    back, msgs = params.from_trace_config(config, "hi", True)
    assert msgs == [] and back.pair == "offline" and back.algorithm == "paper" and back.gamma == 4


def test_the_run_says_when_its_iterations_drafted_fewer_than_gamma():
    assert run_summary(make_trace()) is None  # every iteration drafted all γ = 3
    text = run_summary(early_stop_trace())
    assert text.startswith("2 of 4 iterations drafted fewer than γ = 3 (")
    assert "1 by an early stop of the draft head" in text and "1 by the first iteration" in text
    assert "the run drafted 1.75 of γ per iteration on average" in text


def test_an_early_stop_just_below_its_threshold_prints_two_different_numbers():
    it = early_stop_trace().iterations[2]
    it["drafting"] = {**STOPPED, "confidence": 0.2961}
    line = drafted_line(it, 3)
    assert "was 0.296, below its threshold 0.300" in line and "0.30, below its threshold 0.30" not in line
    it["drafting"] = {**STOPPED, "confidence": 0.29996}
    assert "was 0.29996, below its threshold 0.30000" in drafted_line(it, 3)
    assert "was 0.21, below its threshold 0.30" in drafted_line(early_stop_trace().iterations[2], 3)


def tree_trace(kept: int) -> Trace:
    trace = make_trace()
    trace.iterations[2]["tree"] = {"kept_branch": kept, "other_branches": [[{"token_id": 40, "token": " known"}]],
                                   "rejected_first": []}  # fmt: skip
    return trace


def test_the_tree_note_uses_one_apostrophe():
    for kept in (0, 1):
        note = step_view(tree_trace(kept), 3).tree_note
        assert "’" not in note and "'" in note
    assert "the draft head's first choice" in step_view(tree_trace(0), 3).tree_note


def test_page_intros_say_up_to_gamma():
    from specviz_app.render import PAGE_INTROS

    assert "proposes up to γ tokens" in PAGE_INTROS["playground"][1]
    assert "drafts up to γ tokens" in PAGE_INTROS["timeline"][1]


def test_the_tree_words_count_the_configured_branches(monkeypatch):
    import importlib

    from specviz import config

    assert f"drafts {glossary.count_word(config.TREE_BRANCHES)} branches" in glossary.DRAFT_TREE.definition
    monkeypatch.setattr(config, "TREE_BRANCHES", 3)
    try:
        three = importlib.reload(glossary)
        assert "drafts three branches" in three.DRAFT_TREE.definition and "two" not in three.DRAFT_TREE.definition
        assert "three-branch draft tree" in three.ALGORITHM_FASTEST.definition
    finally:
        monkeypatch.undo()
        importlib.reload(glossary)


def test_a_draft_reads_features_only_when_it_runs_on_a_draft_head(tmp_path):
    from specviz.engine.models import HEAD_DRAFT
    from specviz.teaching.charts.drafting import reads_features

    for draft in ("hybrid", PAPER_DRAFT, HEAD_DRAFT):
        assert reads_features({"draft": draft}), draft
    # A model whose name merely contains "head" is a draft model: its first iteration drafts.
    for draft in ("x/arrowhead-160m", "someone/headline-gpt2", "ngram", "self", None):
        assert not reads_features({"draft": draft}), draft
    (tmp_path / "head.json").write_text("{}")  # a trained head's folder
    assert reads_features({"draft": str(tmp_path)})


def test_the_papers_preset_says_where_it_drafts_fewer_than_gamma_and_the_lesson_bears_it_out():
    words = glossary.ALGORITHM_PAPER.definition
    assert "exactly γ" not in words and "only the first iteration" not in words
    assert "first iteration" in words and "max new tokens" in words and "ends the text" in words
    trace = Trace.from_json((charts_assets() / "lesson_trace.json").read_text())
    assert trace.config["draft"] == PAPER_DRAFT
    gamma = trace.config["gamma"]
    short = [it for it in trace.iterations if len(it["drafts"]) < gamma]
    last = len(trace.iterations) - 1
    near_the_end = [it["index"] for it in short[1:]]
    assert short[0]["index"] == 0  # the first, then only the last ones (near max new tokens), if any
    assert near_the_end == list(range(last - len(near_the_end) + 1, last + 1)), near_the_end
    for it in short:  # each for a reason the definition names
        d = it["drafting"]
        assert d["stop"] in ("no_features", "eos") or (d["stop"] is None and d["gamma"] == len(it["drafts"]) < gamma)


def charts_assets():
    from pathlib import Path

    import specviz

    return Path(specviz.__file__).parent / "assets"


def example(name: str) -> Trace:
    return Trace.from_json((charts_assets() / "examples" / f"{name}.json").read_text())


def frozen(name: str) -> Trace:
    """A recording kept in tests/fixtures for its shape (a tree in most iterations, a last iteration
    with no room for a draft): the shipped recordings change whenever they are made again."""
    from pathlib import Path

    return Trace.from_json((Path(__file__).parent / "fixtures" / f"{name}.json").read_text())


def test_the_tree_caption_says_each_comparison_as_the_numbers_have_it():
    from specviz.teaching.charts.drafting import tree_effect

    assert tree_effect(make_trace()) is None  # no tree: nothing to say
    greedy = tree_effect(example("01-default"))  # 1 tree in 6 iterations, position 1 at its mean β, fewer tokens
    assert greedy.startswith("1 of 6 iterations drafted a tree.")
    assert "passes more often" not in greedy and "make more tokens" not in greedy
    assert "position 1 passed 0.800 of the times it was reached, level with its mean β 0.800" in greedy
    assert "made 2.75 tokens each, fewer than the 3.05 predicted" in greedy
    sampled = tree_effect(frozen("sampled_tree"))  # 22 trees in 25 iterations: both lifted
    assert sampled.startswith("22 of 25 iterations drafted a tree.")
    assert "passed 0.522 of the times it was reached, above its mean β 0.379" in sampled
    assert "made 1.65 tokens each, more than the 1.49 predicted" in sampled


def test_the_last_iteration_says_no_room_was_left_the_same_on_every_page():
    from specviz.teaching import notebook

    trace = frozen("no_room_at_the_end")  # the lesson as once recorded
    last, before = trace.iterations[-1], trace.iterations[-2]
    n = len(trace.iterations)
    assert last["drafting"]["gamma"] == 0 and last["drafts"] == []  # max new tokens left room for none
    room = len(before["drafts"])
    assert before["drafting"]["gamma"] == room < 3  # the one before it had room for fewer than γ
    said = "no draft (γ = 3): no room left for a draft before max new tokens: this pass makes the run's last token"
    assert drafted_line(last, 3) == said
    for html in (token_stream_html(trace.iterations, trace.extra, gamma=3), notebook.trace_html(trace)):
        assert f"iteration {n}: {said}".replace("'", "&#x27;") in html and "of γ = 0" not in html
    draft_s = "draft" if room == 1 else "drafts"
    only = f"only room for {room} {draft_s} before max new tokens"
    assert f"iteration {n - 1}: drafted {room} of γ = 3 by the draft head: {only}" in html
    view = step_view(trace, n)
    assert view.drafting_note == said[0].upper() + said[1:] + "."
    assert view.correction.text.startswith("No draft was asked for here (no room left for a draft")
    assert "nothing to propose" not in view.correction.text
    # The first iteration's draft was asked and could give nothing: said as such.
    assert step_view(early_stop_trace(), 1).correction.text.startswith("The draft had nothing to propose here")


def test_every_token_stream_is_given_the_runs_gamma():
    """A stream drawn without γ falls back to each iteration's own most, which shrinks near max new
    tokens ('drafted 0 of γ = 0'), so every caller passes the run's."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    calls = []
    for path in [*(root / "specviz").rglob("*.py"), *(root / "specviz_app").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "token_stream_html"
            ):
                calls.append((path.name, node.lineno, any(k.arg == "gamma" for k in node.keywords)))
    assert len(calls) >= 6, calls  # playground, inspector, lesson, running, notebook (2)
    assert [c for c in calls if not c[2]] == []


def test_the_chinese_lesson_says_how_its_iteration_drafted_in_chinese():
    trace = early_stop_trace()
    html = token_stream_html(trace.iterations, {}, gamma=3, lang="zh")
    assert "第 3 轮：由草稿头起草了 1 个（γ = 3），随后提前停止：它对最新草稿的置信度为 0.21，低于阈值 0.30" in html
    assert "第 1 轮：没有草稿（γ = 3）：这是第一轮" in html
    assert "drafted" not in html and "iteration 3:" not in html and "early stop" not in html
    tree = tree_trace(1)
    zh = token_stream_html(tree.iterations, {}, gamma=3, lang="zh")
    assert "草稿树：2 个分支在目标模型的一次前向中一起检验；目标模型沿第 2 个分支 “. And then” 检验" in zh
    last = frozen("no_room_at_the_end").iterations[-1]
    assert "没有草稿（γ = 3）：在达到最大新 token 数之前已没有起草的空间" in token_stream_html(
        [last], {}, gamma=3, lang="zh"
    )
    # English stays the default, word for word.
    assert "iteration 3: drafted 1 of γ = 3 by the draft head, then an early stop" in token_stream_html(
        trace.iterations, {}, gamma=3
    )
