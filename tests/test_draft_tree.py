"""Draft trees on tiny random Llamas: one tree pass gives every branch the logits and features a
cache-free pass over that branch gives, keeping a branch leaves the cache a fresh pass would
build, greedy output stays the target's, and sampled trees keep the target's distribution."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_head import ALPHA_LEVEL, PROMPT, TRAINED_SUBSET, VOCAB, RecordingHeadDrafter, random_head

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter
from specviz.engine.lean_llama import LeanLlama
from specviz.engine.target import TargetState
from specviz.engine.toy import tiny_llama
from specviz.teaching.charts.step import step_view
from specviz.traces.trace import validate

TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.fixture(scope="module", params=["transformers", "lean"])
def target(request):
    """The tiny target through transformers' forward, and through the lean one (specviz.engine.lean_llama)."""
    tiny = tiny_llama(vocab_size=VOCAB, seed=5, init_scale=20.0)
    if request.param == "transformers":
        return tiny
    return dataclasses.replace(tiny, lean=LeanLlama(tiny.model), forward="lean")


def full_pass(target, ids: list[int]):
    """Cache-free: logits [L, V] and the final-norm features [L, D] of every position."""
    with torch.inference_mode():
        hidden = target.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
        return target.model.lm_head(hidden)[:, :VOCAB], hidden


def test_one_tree_pass_equals_a_cache_free_pass_over_each_branch(target):
    tree = torch.tensor([[7, 2, 9], [4, 4, 1], [11, 0, 2]])  # 3 branches x 3 drafts
    state = TargetState(target, PROMPT)
    with torch.inference_mode():
        logits, features = state.forward(tree, feature_layers=())  # [1 + 9, V], [8 + 9, D]
    n = len(PROMPT)
    for b in range(3):
        want_logits, want_features = full_pass(target, PROMPT + tree[b].tolist())
        rows = [0] + [1 + j * 3 + b for j in range(3)]  # the last prompt position, then the branch
        torch.testing.assert_close(logits[rows], want_logits[n - 1 :], **TOL)
        torch.testing.assert_close(features[:n], want_features[:n], **TOL)
        torch.testing.assert_close(features[[n + j * 3 + b for j in range(3)]], want_features[n:], **TOL)


@pytest.mark.parametrize(("branch", "accepted"), [(0, 0), (1, 2), (2, 3)])
def test_keeping_a_branch_leaves_the_cache_a_fresh_pass_builds(target, branch, accepted):
    tree = torch.tensor([[7, 2, 9], [4, 4, 1], [11, 0, 2]])
    state = TargetState(target, PROMPT)
    with torch.inference_mode():
        state.forward(tree, feature_layers=None)
        kept = torch.arange(accepted) * 3 + branch  # the branch's first drafts among those fed
        emitted = torch.cat([tree[branch, :accepted], torch.tensor([5])])  # accepted drafts + a correction
        state.accept(emitted, kept, k=3)
        assert state.cache.get_seq_length() == len(PROMPT) + accepted
        logits, _ = state.forward(torch.empty(1, 0, dtype=torch.long), feature_layers=None)  # feeds the correction
    want, _ = full_pass(target, state.seq.tolist())
    torch.testing.assert_close(logits[0], want[-1], **TOL)


def test_greedy_tree_output_equals_the_target_alone_and_records_the_tree(target):
    base = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=40))
    kept_other = 0
    for gamma in (1, 3):
        head = random_head(target, subset=TRAINED_SUBSET, feature_layers=(0,), scale=0.3)
        drafter = RecordingHeadDrafter(head, "head", branches=3)
        spec = speculative_generate(
            PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=40)
        )
        assert spec.output_token_ids == base.output_token_ids, gamma
        assert spec.config["draft_tree"] == 3
        trees = [it["tree"] for it in spec.iterations if "tree" in it]
        assert trees and all(len(t["other_branches"]) == 2 for t in trees)
        lengths = [len(branch) for t in trees for branch in t["other_branches"]]
        assert max(lengths) == gamma and min(lengths) >= 1  # shorter only where the run's end is near
        kept_other += sum(t["kept_branch"] > 0 for t in trees)
        validate(spec.to_dict())
        # The head was handed the features of exactly the positions on the text, across tree
        # passes whose other branches were dropped from the target's cache.
        seq = spec.prompt_token_ids + spec.output_token_ids
        with torch.inference_mode():
            out = target.model.model(input_ids=torch.tensor([seq]), output_hidden_states=True)
        expected = torch.cat([out.hidden_states[1][0], out.last_hidden_state[0]], dim=-1)[:-1]
        kept = torch.empty(0, expected.shape[1])
        for features, start in zip(drafter.handed, drafter.starts, strict=True):
            kept = torch.cat([kept[:start], features])
        torch.testing.assert_close(kept, expected, **TOL)
    assert kept_other > 0  # the target chose a branch other than the head's first choice
    # The step view explains the tree: which branches were checked, and why this one was kept.
    i = next(j for j, it in enumerate(spec.iterations) if it.get("tree", {}).get("kept_branch", 0) > 0)
    note = step_view(spec, i + 1).tree_note
    assert note.startswith("Draft tree (not in the paper's Algorithm 1): the draft head proposed 3 branches")
    kept_words, not_kept = note.split("Kept: ", 1)[1].split("Not kept: ", 1)
    # The kept branch's tokens are named as kept, the others' as not kept (issue 35, item 11).
    it = spec.iterations[i]
    kept_text = "".join(d["token"] for d in it["drafts"]).strip()
    assert kept_words.startswith(f"branch {it['tree']['kept_branch'] + 1} ") and kept_text in kept_words
    other = it["tree"]["other_branches"][0]
    assert "".join(spec.extra["token_text"][str(t["token_id"])] for t in other).strip() in not_kept
    assert step_view(spec, 1).tree_note is None  # the first iteration drafts nothing


def test_branch_zero_is_the_chain_the_head_drafts(target):
    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    drafter = HeadDrafter(head, "head", branches=2)
    from specviz.config import SamplingConfig

    context = torch.tensor(PROMPT)
    _, features = full_pass(target, PROMPT)

    def fresh():  # the head having seen the target's features of the prompt, as after a prefill
        drafter.start(SamplingConfig(0.0), torch.Generator().manual_seed(0), VOCAB)
        drafter.observe(features[:-1], 0)
        return drafter

    with torch.inference_mode():
        chain, q_chain = fresh().propose(context, 4)
        tree, q_tree = fresh().propose_tree(context, 4)
    assert tree.shape == (2, 4) and q_tree.shape == (2, 4, VOCAB)
    assert tree[0].tolist() == chain.tolist()
    assert tree[1, 0] != tree[0, 0]  # the head's second choice at the first position
    torch.testing.assert_close(q_tree[0], q_chain)  # one-hot on the chain's tokens at T=0
    torch.testing.assert_close(q_tree.sum(-1), torch.ones(2, 4))


def test_sampled_tree_keeps_the_target_distribution_and_records_its_tests(target):
    """chi-square over the first three tokens with a two-branch tree at T=1: the first token comes
    from the prefill pass, the next two from the head's tree, chosen by recursive rejection."""
    from specviz.labs.lab import run_lab

    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    drafter = HeadDrafter(head, "head", branches=2)
    result = run_lab(PROMPT, target=target, draft=drafter, k=3, n=700, gamma=2, temperature=1.0, seed=0)
    assert result.impossible_spec == 0
    assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test

    spec = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=3, temperature=1.0, max_new_tokens=60)
    )
    validate(spec.to_dict())
    assert spec.config["draft_tree"] == 2
    trees = [it for it in spec.iterations if "tree" in it]
    assert trees
    second = [it for it in trees if it["tree"]["kept_branch"] == 1 and it["accepted_count"] > 0]
    assert second, "a second candidate was never accepted"
    for it in second:  # its first draft was tested against the residual left by the first's rejection
        (test,) = it["tree"]["rejected_first"]
        assert test["branch"] == 0 and test["r"] >= test["accept_prob"]
        assert test["token_id"] != it["drafts"][0]["token_id"]
    i = spec.iterations.index(second[0])
    note = step_view(spec, i + 1).tree_note
    assert "Kept: branch 2 (its choice number 2)" in note
    assert "Branch 1's first token" in note and "was tested first and failed" in note
    assert note.endswith("The first token of branch 2 (its choice number 2) passed its test, so that branch was kept.")


def test_the_wrong_rule_variants_draft_chains(target):
    """The lab's variants are defined for a chain; a tree drafter drafts one under them."""
    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    drafter = HeadDrafter(head, "head", branches=2)
    for rule in ("resample_from_p", "no_bonus"):
        spec = speculative_generate(
            PROMPT,
            target=target,
            draft=drafter,
            options=DecodeOptions(gamma=3, temperature=1.0, rule=rule, max_new_tokens=20),
        )
        assert spec.config["draft_tree"] == 1 and not any("tree" in it for it in spec.iterations), rule
        assert sum(len(it["drafts"]) for it in spec.iterations) > 0, rule


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_early_stop_is_recorded_with_its_confidence_and_threshold(target, temperature):
    """Each iteration records how many of gamma it drafted and why it stopped; an early stop names the
    head's confidence, below the threshold it stopped at; the first iteration has no features yet."""
    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    drafter = HeadDrafter(head, "head", branches=2, min_confidence=0.9)
    spec = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=4, temperature=temperature, max_new_tokens=40)
    )
    validate(spec.to_dict())
    first = spec.iterations[0]
    assert first["drafts"] == [] and first["drafting"]["stop"] == "no_features"
    assert "this is the first iteration: the draft head reads" in step_view(spec, 1).drafting_note
    stopped = [it for it in spec.iterations if it["drafting"]["stop"] == "confidence"]
    assert stopped, "a random head should be unsure at 0.9"
    for it in stopped:
        d = it["drafting"]
        assert len(it["drafts"]) < d["gamma"] <= 4 and d["confidence"] < d["threshold"] == 0.9
    it = stopped[0]
    note = step_view(spec, it["index"] + 1).drafting_note
    assert note.startswith(f"Drafted {len(it['drafts'])} of γ = 4 by the draft head, then an early stop")
    assert f"{it['drafting']['confidence']:.2f}, below its threshold 0.90" in note
    for it in spec.iterations:  # every other iteration drafted all it could
        if it["drafting"]["stop"] is None:
            assert len(it["drafts"]) == it["drafting"]["gamma"]


def test_the_paper_preset_drafts_one_chain_of_gamma(target):
    """With one branch and no early stop (config.PAPER_DRAFT's settings) every iteration after the
    first drafts exactly gamma, as a chain, and records no stop: Algorithm 1 as the paper states it."""
    head = random_head(target, subset=TRAINED_SUBSET, scale=0.3)
    drafter = HeadDrafter(head, "head", branches=1, min_confidence=0.0)
    spec = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=3, temperature=1.0, max_new_tokens=40)
    )
    validate(spec.to_dict())
    assert spec.config["draft_tree"] == 1
    assert all("tree" not in it for it in spec.iterations)
    for it in spec.iterations[1:]:
        d = it["drafting"]
        assert d["stop"] is None or d["stop"] == "eos"
        if d["stop"] is None:
            assert len(it["drafts"]) == d["gamma"]
    asked_all = [it for it in spec.iterations[1:] if it["drafting"]["gamma"] == 3 and it["drafting"]["stop"] is None]
    assert len(asked_all) > len(spec.iterations) // 2 and all(len(it["drafts"]) == 3 for it in asked_all)
