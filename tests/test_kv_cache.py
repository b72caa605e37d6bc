"""The KV cache, visible: each iteration's recorded cache lengths are the engine's own (spied on
the target's passes and the draft model's roll-backs), the rows the charts show follow from them,
the target's rows worked out for older traces agree with them on a chain and a tree, and the
comparison of no cache, cache and cache + speculative decoding makes one text three ways."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch
from test_head import PROMPT, TRAINED_SUBSET, VOCAB, random_head

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter
from specviz.drafters import model as model_drafter
from specviz.drafters.hybrid import HybridDrafter
from specviz.engine import target as target_module
from specviz.engine.lean_llama import LeanLlama
from specviz.engine.toy import TOY_PROMPT, tiny_llama, toy_pair
from specviz.labs import kv_cache
from specviz.teaching.charts import kv_cache as charts
from specviz.traces.trace import Trace, TraceError, validate


@pytest.fixture
def engine_rows(monkeypatch):
    """The target cache's length before and after every pass and after every roll-back, read from
    the engine itself, and the draft model's after each of its roll-backs."""
    seen = {"target": [], "draft": []}
    forward, accept, crop = (
        target_module.TargetState.forward,
        target_module.TargetState.accept,
        model_drafter.crop_cache,
    )

    def spy_forward(self, tree, feature_layers):
        before = self.cache.get_seq_length()
        out = forward(self, tree, feature_layers)
        seen["target"].append([before, self.cache.get_seq_length()])
        return out

    def spy_accept(self, *args):
        accept(self, *args)
        seen["target"][-1].append(self.cache.get_seq_length())

    def spy_crop(cache, keep):
        crop(cache, keep)
        seen["draft"].append(cache.get_seq_length())

    monkeypatch.setattr(target_module.TargetState, "forward", spy_forward)
    monkeypatch.setattr(target_module.TargetState, "accept", spy_accept)
    monkeypatch.setattr(model_drafter, "crop_cache", spy_crop)
    return seen


def _target_rows(trace: Trace) -> list[list[int]]:
    return [[it["cache"]["target"][k] for k in ("before", "after_pass", "after_rollback")] for it in trace.iterations]


def _check_rows(trace: Trace) -> None:
    """What every page reads: the trace validates, an older copy without `cache` still does, and
    the rows worked out from its tokens, the chart's rows and its caption agree with the record."""
    validate(trace.to_dict())
    old = copy.deepcopy(trace.to_dict())
    for it in old["iterations"]:
        del it["cache"]
    validate(old)
    old_trace = Trace.from_dict(old)
    for i, it in enumerate(trace.iterations):
        t = it["cache"]["target"]
        assert charts.derived_target(old_trace, i) == t, i
        rows = charts.iteration_cache(trace, i).target
        assert (rows.before, rows.written) == (t["before"], t["after_pass"] - t["before"])
        assert rows.kept == t["after_rollback"] - t["before"] and rows.rolled == t["after_pass"] - t["after_rollback"]
        wrote = (
            f"wrote {rows.written} row{'' if rows.written == 1 else 's'}: {rows.kept} kept, {rows.rolled} rolled back"
        )
        assert wrote in charts.cache_caption(trace, i)[0]
        assert charts.iteration_cache(old_trace, i).target == rows
        assert charts.iteration_cache(old_trace, i).draft_why == "unrecorded"


def test_a_chain_records_the_engine_s_cache_lengths(engine_rows):
    target, draft = toy_pair()  # a draft close to the target: drafts pass and fail
    trace = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=4, temperature=0, max_new_tokens=30)
    )
    assert _target_rows(trace) == engine_rows["target"]
    # The draft model rolls back at the start of each proposal: its recorded after_rollback is the
    # engine's length right after that crop, and it then writes what it had not seen and g - 1 drafts.
    # (An iteration with no room for a draft does not call the drafter: nothing moves.)
    asked = [it for it in trace.iterations if it["drafting"]["gamma"] > 0]
    assert [it["cache"]["draft"]["after_rollback"] for it in asked] == engine_rows["draft"]
    text = len(PROMPT)
    for it in trace.iterations:
        d, g = it["cache"]["draft"], len(it["drafts"])
        assert d["after_draft"] == (text + g - 1 if it in asked else d["before"])
        text += it["accepted_count"] + (it["correction"] is not None)
    _check_rows(trace)
    # Rows the chart says the draft kept are those its next roll-back left.
    assert 0 < sum(it["accepted_count"] for it in trace.iterations) < sum(len(it["drafts"]) for it in trace.iterations)
    for i in range(len(asked) - 1):
        c, nxt = charts.iteration_cache(trace, i), trace.iterations[i + 1]["cache"]["draft"]
        assert c.draft.before + c.draft.kept == nxt["after_rollback"]
        assert c.draft.before + c.draft.written == nxt["before"]
    assert (
        trace.output_token_ids
        == autoregressive_generate(
            PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=30)
        ).output_token_ids
    )


@pytest.mark.parametrize("forward", ["transformers", "lean"])
def test_a_tree_records_its_branches_rows_and_keeps_one(forward, engine_rows):
    tiny = tiny_llama(vocab_size=VOCAB, seed=5, init_scale=20.0)
    target = (
        tiny if forward == "transformers" else dataclasses.replace(tiny, lean=LeanLlama(tiny.model), forward="lean")
    )
    head = random_head(target, subset=TRAINED_SUBSET, feature_layers=(0,), scale=0.3)
    drafter = HeadDrafter(head, "head", branches=3, min_confidence=0.0)
    trace = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=3, temperature=0, max_new_tokens=30)
    )
    assert _target_rows(trace) == engine_rows["target"]
    trees = [i for i, it in enumerate(trace.iterations) if "tree" in it]
    assert trees
    for i in trees:
        it, rows = trace.iterations[i], charts.iteration_cache(trace, i)
        k, g = 1 + len(it["tree"]["other_branches"]), len(it["tree"]["other_branches"][0])
        unseen = len(PROMPT) + it["drafts"][0]["position"] - it["cache"]["target"]["before"]
        assert rows.target.written == unseen + k * g  # every branch's drafts were written
        assert rows.target.tree == (k - 1) * g and rows.target.kept == unseen + it["accepted_count"]
        line = charts.cache_caption(trace, i)[0]
        assert f"{(k - 1) * g} of the rolled-back rows held the draft tree's other branches" in line
        d = it["cache"]["draft"]  # the head's own cache: rolled back to its true entries, then written
        assert d["after_rollback"] <= d["before"] and d["after_draft"] > d["after_rollback"]
    assert trace.iterations[0]["cache"]["target"] == {
        "before": 0,
        "after_pass": len(PROMPT),
        "after_rollback": len(PROMPT),
    }
    _check_rows(trace)
    figure = charts.cache_figure(trace, trees[0])
    by_name = {bar.name: list(bar.x) for bar in figure.data}
    assert by_name["the tree's other branches (rolled back)"][0] == charts.iteration_cache(trace, trees[0]).target.tree


def test_the_hybrid_s_head_cache_stands_still_while_the_lookup_drafts():
    tiny = tiny_llama(vocab_size=VOCAB, seed=5, init_scale=20.0)
    head = random_head(tiny, subset=TRAINED_SUBSET, feature_layers=(0,), scale=0.3)
    drafter = HybridDrafter(HeadDrafter(head, "head", branches=2, min_confidence=0.0), "hybrid")
    prompt = [3, 1, 4, 1, 5, 3, 1, 4, 1, 5, 3, 1, 4]  # repeats: the lookup finds matches
    trace = speculative_generate(
        prompt, target=tiny, draft=drafter, options=DecodeOptions(gamma=3, temperature=0, max_new_tokens=30)
    )
    sources = [it["drafting"]["source"] for it in trace.iterations]
    assert "ngram" in sources and "head" in sources
    for i, it in enumerate(trace.iterations):
        d = it["cache"]["draft"]
        if it["drafting"]["source"] == "ngram":
            assert d["before"] == d["after_rollback"] == d["after_draft"]
            assert "the n-gram draft drafted this iteration" in charts.cache_caption(trace, i)[1]
        else:
            assert d["after_rollback"] <= min(d["before"], d["after_draft"])  # rolled back, then wrote
    _check_rows(trace)


def test_an_ngram_draft_says_it_has_no_cache(tiny_pair):
    target, _ = tiny_pair
    trace = speculative_generate(
        [1, 2, 3, 1, 2, 3, 1, 2], target=target, draft="ngram", options=DecodeOptions(gamma=3, max_new_tokens=12)
    )
    assert all(it["cache"]["draft"] is None for it in trace.iterations)
    assert "keeps no KV cache" in charts.cache_caption(trace, 0)[1]
    assert [bar.name for bar in charts.cache_figure(trace, 0).data if bar.y[-1] == "draft"] == []


def test_a_damaged_cache_record_is_refused(tiny_pair):
    target, draft = tiny_pair
    data = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=2, max_new_tokens=8)
    ).to_dict()
    data["iterations"][0]["cache"]["target"]["after_pass"] = -1
    with pytest.raises(TraceError, match="after_pass"):
        validate(data)
    data["iterations"][0]["cache"]["target"]["after_pass"] = 0  # fewer rows after the pass than before it
    data["iterations"][0]["cache"]["target"]["before"] = 3
    with pytest.raises(TraceError, match="at least before"):
        validate(data)


def test_no_cache_cache_and_speculative_make_the_same_tokens(tiny_pair):
    target, draft = tiny_pair
    result = kv_cache.compare(target, draft, TOY_PROMPT, max_new_tokens=24, rounds=2)
    assert [r.mode for r in result.runs] == list(kv_cache.MODES)
    assert result.identical and len(result.run("no_cache").tokens) == 24
    assert all(len(r.wall_ms) == 2 for r in result.runs)
    # no cache at all is the engine's forward from an empty cache: the same text as the target alone
    alone = autoregressive_generate(TOY_PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=24))
    assert result.run("no_cache").tokens == alone.output_token_ids
    again = kv_cache.KVComparison.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    figure = charts.comparison_figure(again, "zh")
    assert list(figure.data[0].x) == [r.tokens_per_s for r in result.runs]
    assert "相同" in figure.layout.title.text


def test_the_recording_loads_and_bad_files_are_refused(tmp_path):
    shipped = kv_cache.load_comparison()
    assert shipped.identical and sorted(r.mode for r in shipped.runs) == sorted(kv_cache.MODES)
    assert shipped.run("kv_cache").ms_per_token < shipped.run("no_cache").ms_per_token
    text = charts.comparison_figure(shipped).data[0].text
    assert all(f"{r.tokens_per_s:.1f} tok/s" in t for r, t in zip(shipped.runs, text, strict=True))
    bad = tmp_path / "bad.json"
    for content, message in (
        ("not json", "not JSON"),
        ('{"schema": "other"}', "Not a KV-cache comparison"),
        (json.dumps({**shipped.to_dict(), "runs": shipped.to_dict()["runs"][:2]}), "one run of each"),
    ):
        bad.write_text(content)
        with pytest.raises(kv_cache.ComparisonError, match=message):
            kv_cache.load_comparison(bad)
    with pytest.raises(kv_cache.ComparisonError, match="Cannot read"):
        kv_cache.load_comparison(tmp_path / "missing.json")


def test_the_charts_import_without_torch():
    import subprocess
    import sys

    code = (
        "import sys; import specviz.teaching.charts.kv_cache, specviz.labs.kv_cache; assert 'torch' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    assert torch is not None
