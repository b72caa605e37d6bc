"""EAGLE-2's dynamic draft tree on tiny random Llamas: the head's batched level pass gives each node
what running its own path gives, greedy output stays the target's (transformers' forward and the lean
one), sampled output keeps the target's distribution (batched, through the serving path), and the
trace records the tree, validates, and is refused when broken."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from test_head import ALPHA_LEVEL, PROMPT, TRAINED_SUBSET, VOCAB, random_head

from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter
from specviz.drafters.head_tree import expand
from specviz.engine.draft_head import HeadCache
from specviz.engine.lean_llama import LeanLlama
from specviz.engine.toy import tiny_llama
from specviz.errors import TraceError
from specviz.teaching.charts.drafting import reason_words, run_summary, stop_reason, tree_line
from specviz.teaching.charts.kv_cache import iteration_cache
from specviz.teaching.charts.step import step_view
from specviz.traces.trace import validate

TOL = {"atol": 1e-5, "rtol": 1e-5}


@pytest.fixture(scope="module", params=["transformers", "lean"])
def target(request):
    tiny = tiny_llama(vocab_size=VOCAB, seed=5, init_scale=20.0)
    if request.param == "transformers":
        return tiny
    return dataclasses.replace(tiny, lean=LeanLlama(tiny.model), forward="lean")


def dynamic(target, gamma: int, temperature: float, max_new_tokens: int = 40, seed: int = 0):
    head = random_head(target, subset=TRAINED_SUBSET, feature_layers=(0,), scale=0.3)
    options = DecodeOptions(gamma=gamma, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    drafter = HeadDrafter(head, "head")
    return speculative_generate(
        PROMPT, target=target, draft=drafter, options=dataclasses.replace(options, tree="dynamic")
    )


def test_the_level_pass_equals_each_node_run_on_its_own_path(target):
    """Within float tolerance (1e-5), not bitwise: a batched pass sums attention over masked rows in
    another order than a pass over one path."""
    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    with torch.inference_mode():
        hidden = target.model.model(input_ids=torch.tensor([PROMPT])).last_hidden_state[0]
        prefix = HeadCache()
        f, logits = head.step(hidden[:-1], torch.tensor(PROMPT[1:]), 1, prefix)
        cache = copy.deepcopy(prefix)
        tree = expand(head, f[-1], logits[-1], len(PROMPT), 3, cache, 3, SamplingConfig(1.0))
        assert tree.size == 3 + 9 + 9 and cache.length == prefix.length + 3 + 3  # two level passes of 3 nodes
        # Each expanded node (3 per level; the last level is drafted, not run) along its own path, as a
        # chain of head steps: the probabilities its children came from.
        expanded = [node for node in range(tree.size) if (tree.parents == node).any()]
        assert len(expanded) == 6
        for node in expanded:
            path, at = [], node
            while at >= 0:
                path.insert(0, at)
                at = int(tree.parents[at])
            alone = copy.deepcopy(prefix)
            feature = f[-1:]
            for depth, u in enumerate(path):
                feature, own = head.step(feature, tree.tokens[u : u + 1], len(PROMPT) + depth, alone)
            children = (tree.parents == node).nonzero()[:, 0]
            probs = own[0].softmax(-1)
            want = probs.topk(3).values
            got = tree.score[children] / tree.score[node]
            torch.testing.assert_close(got, want, **TOL)
            assert tree.tokens[children].tolist() == head.subset[probs.topk(3).indices].tolist()


@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_dynamic_tree_output_equals_the_target_alone(target, gamma):
    base = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=40))
    spec = dynamic(target, gamma, 0.0)
    assert spec.output_token_ids == base.output_token_ids
    validate(spec.to_dict())
    assert spec.config["tree_mode"] == "dynamic"
    trees = [it["tree"] for it in spec.iterations if "tree" in it]
    assert trees and all(len(t["nodes"]) <= 16 and max(n["depth"] for n in t["nodes"]) <= gamma for t in trees)


def test_sampled_dynamic_tree_keeps_the_target_distribution(target):
    """chi-square over the first three tokens at T=1, the samples decoded batched (specviz.serving)."""
    from specviz.labs.lab import run_lab

    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    drafter = HeadDrafter(head, "head")
    result = run_lab(PROMPT, target=target, draft=drafter, k=3, n=700, gamma=2, temperature=1.0, tree="dynamic")
    assert result.impossible_spec == 0
    assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test


def test_the_trace_records_the_tree_and_the_pages_read_it(target):
    spec = dynamic(target, 3, 1.0, max_new_tokens=60, seed=1)
    data = spec.to_dict()
    validate(data)
    its = [it for it in spec.iterations if "tree" in it]
    deep = [it for it in its if it["accepted_count"] >= 1]
    assert deep, "no draft was accepted"
    it = deep[0]
    tree = it["tree"]
    assert [tree["nodes"][u]["token_id"] for u in tree["path"]] == [d["token_id"] for d in it["drafts"]][
        : len(tree["path"])
    ]
    i = spec.iterations.index(it)
    assert f"{len(tree['nodes'])} nodes" in tree_line(it)
    assert f"{len(tree['nodes'])} nodes" in tree_line(it, "zh") or str(len(tree["nodes"])) in tree_line(it, "zh")
    assert "EAGLE-2" in step_view(spec, i + 1).tree_note
    rows = iteration_cache(spec, i).target
    assert rows.tree == len(tree["nodes"]) - len(it["drafts"])
    # A path shorter than gamma is said to be the tree's, never a reason "this older trace does not keep".
    short = [x for x in its if 0 < len(x["drafts"]) < 3]
    reasons = {stop_reason(x, 3, True) for x in short}
    assert "tree" in reasons and not reasons & {None, "unrecorded"}, reasons
    for lang in ("en", "zh"):
        summary = run_summary(spec, lang)
        assert reason_words(lang)["tree"] in summary and reason_words(lang)["unrecorded"] not in summary


def test_at_t1_the_tree_is_drawn_and_every_test_keeps_its_q(target):
    """At T>0 the head draws its tree (specviz.drafters.sampled_tree): nodes keep the q_b they were drawn
    from, and the trace records each test and draft with it, not a point mass."""
    spec = dynamic(target, 3, 1.0, max_new_tokens=40, seed=2)
    its = [it for it in spec.iterations if "tree" in it]
    tests = [t for it in its for level in it["tree"]["tests"] for t in level]
    assert tests and all(0 < t["q"] <= 1 for t in tests) and any(t["q"] < 0.99 for t in tests)
    assert any(d["q"] < 0.99 for it in its for d in it["drafts"])
    for it in its:  # the drafts' recorded test is min(1, p/q) with that q
        for d in it["drafts"]:
            assert abs(d["accept_prob"] - min(1.0, d["p"] / d["q"])) < 1e-4


def broken(data: dict, change) -> dict:
    data = copy.deepcopy(data)
    it = next(it for it in data["iterations"] if "tree" in it and it["accepted_count"] >= 1)
    change(it["tree"], it)
    return data


def test_a_broken_dynamic_tree_is_refused(target):
    data = dynamic(target, 3, 1.0, max_new_tokens=60, seed=1).to_dict()

    def parent_after(tree, it):  # a node whose parent comes after it
        tree["nodes"][0]["parent"] = len(tree["nodes"]) - 1

    def path_off_tree(tree, it):  # the accepted path is not a path of the tree
        tree["path"][0] = next(i for i, n in enumerate(tree["nodes"]) if n["parent"] >= 0)

    def path_too_short(tree, it):  # accepted_count is not the path's length
        tree["path"].pop()

    def test_passed(tree, it):  # a "rejected" test whose r was below its accept probability
        tests = [t for level in tree["tests"] for t in level]
        tests[0]["r"] = 0.0 if tests else None

    for change in (parent_after, path_off_tree, path_too_short, test_passed):
        with pytest.raises(TraceError):
            validate(broken(data, change))


def test_the_budget_reads_a_cached_v_that_never_falls_as_rows_grow(tmp_path, monkeypatch):
    """verify_cost keeps what it measured and hands the budget its running maximum: a dip of timing
    noise (5 rows cheaper than 3) would otherwise make the budget send the dip's rows and not fewer.
    A cached record is read back and nothing is measured."""
    import json
    from types import SimpleNamespace

    from specviz.engine import verify_cost
    from specviz.engine.kernels import describe, machine_key

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    target = SimpleNamespace(name="tiny", dtype="float32", kernels="packed", forward="lean", model=object())
    raw = [0.0, 1.0, 0.9, 1.3, 1.1, 1.2, *[1.0 + r / 10 for r in range(6, verify_cost.ROWS_MAX + 1)]]
    key = f"{machine_key(target.name)} | float32 | {describe('packed')} | lean"
    (tmp_path / "verify_cost.json").write_text(json.dumps({key: {"v": raw, "one_row_s": 0.02}}))
    monkeypatch.setattr(verify_cost, "measure", lambda *a, **k: pytest.fail("a cached v was measured again"))
    v, one = verify_cost.pass_costs(target)
    assert one == 0.02 and v[:6] == [0.0, 1.0, 1.0, 1.3, 1.3, 1.3]
    assert all(a <= b for a, b in zip(v, v[1:], strict=False)) and v[-1] == raw[-1]
    assert json.loads((tmp_path / "verify_cost.json").read_text())[key]["v"] == raw  # the measurement kept
