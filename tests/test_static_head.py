"""The draft head's static-shape step (specviz.engine.static_head) and its CUDA graphs (cuda_steps).

- on the shipped head over the offline target's true features, its f^ and subset logits (so q) equal
  the eager step's within HEAD_TOL: a catch-up, chain steps, a tree level, and steps after a
  roll-back that moved only its length. Not bit for bit, and why: it attends over the cache's whole
  capacity with the slots past its length masked; they add exact zeros, but the attention then sums
  over more slots in another order (the catch-up's keys and values, before any attention, are
  bit-identical);
- a decode with it writes the target alone's greedy tokens, and the eager head's drafts: the same
  drafted and accepted counts, with rejections (so roll-backs) among them, for chains, two-branch
  trees and the dynamic tree; at T=1 the eager head's tokens;
- its cache grows past its capacity (dropping its graphs) and a grown one serves the next run;
- on the CPU a loaded head keeps the eager step, and the device check (specviz.labs.bench_steps) times
  and checks its steps there;
- on CUDA only (skipped without a GPU): a captured step equals the eager static step bit for bit, and
  a head loaded there runs captured, its greedy decode equal to the target alone's.
"""

from __future__ import annotations

import gc

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters.head import HeadDrafter
from specviz.engine.draft_head import HeadCache, load_head
from specviz.engine.models import HEAD_DRAFT, offline_path
from specviz.engine.static_head import StaticHead
from specviz.engine.static_llama import CAPACITY_STEP, StaticCache

HEAD_TOL = {"atol": 1e-4, "rtol": 1e-5}  # float32 sums of the same terms in another order; f^ up to about 40
NO_CUDA = "needs a CUDA GPU: CUDA graphs capture only there (run it in a GPU session, scripts/gpu_check.sh)"
PROMPT = "Tell me a story about a brave small boat."


@pytest.fixture(scope="module")
def heads(offline_target):
    """(eager, static): two copies of the shipped head on the offline target, the second with its
    static step (no capture: this runs on the CPU)."""
    eager = load_head(offline_path(HEAD_DRAFT), offline_target.model)
    static = load_head(offline_path(HEAD_DRAFT), offline_target.model)
    static.static = StaticHead(static)
    return eager, static


def true_features(target, head, ids: torch.Tensor) -> torch.Tensor:
    """ids [n] -> the head's input features [n, D] from the target's pass over them."""
    _, features = target.lean.forward(ids, target.lean.new_cache(), 1, head.cfg.feature_layers)
    return head.fused(features)


def test_static_steps_match_the_eager_steps_after_a_roll_back(offline_target, heads):
    _, head = heads  # one head: its step runs the eager path on a HeadCache, the static one on a StaticCache
    ids = torch.tensor(offline_target.tokenizer(PROMPT)["input_ids"])
    n = ids.shape[0]
    with torch.inference_mode():
        features = true_features(offline_target, head, ids)
        eager, static = HeadCache(), head.new_cache()
        assert isinstance(static, StaticCache)

        def both(call):
            want, got = call(eager), call(static)
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, **HEAD_TOL)
            assert static.length == eager.length
            return want

        f, logits = both(lambda c: head.step(features[: n - 1], ids[1:], 1, c))  # the catch-up
        assert torch.equal(static.keys[0, :, : n - 1], eager.keys[0]) and torch.equal(
            static.values[0, :, : n - 1], eager.values[0]
        )
        for k in range(3):  # a chain, greedy
            token = head.subset[logits[-1].argmax()][None]
            f, logits = both(lambda c, f=f, token=token, k=k: head.step(f[-1:], token, n + k, c))
        for c in (eager, static):
            c.crop(n - 2)  # a rejection: the drafted entries go, and the last true one, redone below
        assert static.capacity == CAPACITY_STEP  # rolled back by its length, nothing reallocated
        firsts = head.subset[logits[-1].topk(2).indices]  # a two-branch tree's first level, then its second
        f2, logits2 = both(lambda c: head.step(features[n - 2 : n - 1], ids[n - 1 :], n - 1, c))
        both(lambda c: head.branch_step(f2[-1:].expand(2, -1), firsts, n, c, n - 1, 1))
        nxt = head.subset[logits2[-1].topk(2).indices]
        both(lambda c: head.branch_step(f2[-1:].expand(2, -1), nxt, n + 1, c, n - 1, 2))


@pytest.fixture(scope="module")
def greedy_alone(offline_target):
    """The target alone's greedy tokens for PROMPT, decoded once for the three trees below."""
    options = DecodeOptions(temperature=0.0, max_new_tokens=32)
    return autoregressive_generate(PROMPT, target=offline_target, options=options).output_token_ids


@pytest.mark.parametrize("tree", [False, "branches", "dynamic"])
def test_greedy_decodes_with_the_static_head_draft_as_the_eager_one(offline_target, heads, tree, greedy_alone):
    eager, static = heads
    options = DecodeOptions(gamma=4, temperature=0.0, max_new_tokens=32, tree=tree)
    want = speculative_generate(PROMPT, target=offline_target, draft=HeadDrafter(eager, "head"), options=options)
    drafter = HeadDrafter(static, "head")
    got = speculative_generate(PROMPT, target=offline_target, draft=drafter, options=options)
    assert isinstance(drafter.cache, StaticCache)
    assert got.output_token_ids == want.output_token_ids == greedy_alone
    for key in ("drafted", "accepted", "iterations"):
        assert got.summary[key] == want.summary[key], key
    assert got.summary["accepted"] < got.summary["drafted"]  # rejections: the head's cache rolled back


def test_a_sampled_decode_with_the_static_head_writes_the_eager_heads_tokens(offline_target, heads):
    eager, static = heads
    options = DecodeOptions(gamma=3, temperature=1.0, seed=11, max_new_tokens=24)
    want = speculative_generate(PROMPT, target=offline_target, draft=HeadDrafter(eager, "head"), options=options)
    got = speculative_generate(PROMPT, target=offline_target, draft=HeadDrafter(static, "head"), options=options)
    assert got.output_token_ids == want.output_token_ids


def test_the_head_cache_grows_and_a_grown_one_serves_the_next_run(heads):
    _, head = heads
    owner = HeadDrafter(head, "head")
    cache = head.new_cache(owner=owner)
    cache.graphs["stand-in"] = object()
    d = head.cfg.hidden
    with torch.inference_mode():
        head.step(torch.zeros(CAPACITY_STEP - 1, d), head.subset[: CAPACITY_STEP - 1], 1, cache)
        head.step(torch.zeros(3, d), head.subset[:3], CAPACITY_STEP, cache)  # past the capacity
    assert cache.capacity > CAPACITY_STEP and cache.length == CAPACITY_STEP + 2 and not cache.graphs
    del owner
    gc.collect()
    again = head.new_cache()
    assert again is cache and again.length == 0  # the grown one, emptied


def test_on_the_cpu_a_loaded_head_keeps_the_eager_step(offline_target):
    head = load_head(offline_path(HEAD_DRAFT), offline_target.model)
    assert head.static is None and isinstance(head.new_cache(), HeadCache)
    with pytest.raises(ValueError, match="CUDA"):
        StaticHead(head, capture=lambda *_: None)


def test_the_device_check_times_and_checks_the_head_steps_on_the_cpu(heads, monkeypatch):
    from specviz.labs import bench_steps

    monkeypatch.setattr(bench_steps, "REPS", 1)
    monkeypatch.setattr(bench_steps, "INNER", 1)
    eager, _ = heads  # loaded on the CPU: no captured step to time
    with torch.inference_mode():
        steps = bench_steps.time_head_steps(eager, [1, 3])
        exact = bench_steps.head_exactness(eager, 3)
    assert set(steps) == {"head step, eager", "head static step, eager"} and all(
        set(s) == {1, 3} for s in steps.values()
    )
    check = exact["head static step, eager"]
    assert check["against"] == "head step, eager" and check["same_argmax"] and check["max_abs_diff"] <= HEAD_TOL["atol"]
    assert "head static step, eager against the head step, eager" in bench_steps.render_head_steps(steps, exact)


def cuda_head():
    """(target, head) on CUDA in float32: a target of the offline target's shapes with random weights
    (specviz.labs.bench_device; no conftest fixture, as scripts/gpu_check.sh runs these without it) and
    the shipped head loaded on it."""
    from specviz.labs.bench_device import build_target

    target, model = build_target("smollm2-135m", "cuda", "float32")
    return target, load_head(offline_path(HEAD_DRAFT), model)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_a_captured_head_step_equals_the_eager_static_step_bit_for_bit():
    from specviz.engine.cuda_steps import captured_head_step

    _, head = cuda_head()
    eager, captured = StaticHead(head), StaticHead(head, capture=captured_head_step)
    sub = head.subset
    features = torch.randn(40, head.cfg.hidden, generator=torch.Generator().manual_seed(0)).cuda()
    positions = torch.tensor([31, 31], device="cuda")
    allowed = torch.ones(2, 33, dtype=torch.bool, device="cuda")
    with torch.inference_mode():
        caches = eager.new_cache(64), captured.new_cache(64)
        for runner, cache in zip((eager, captured), caches, strict=True):
            runner.step(features[:30], sub[1:31], 1, cache)  # a catch-up of 30 rows: eager in both
        for _ in range(2):  # the first time captures, the second replays
            for rows in (1, 3):
                want = eager.step(features[30 : 30 + rows], sub[:rows], 31, caches[0])
                got = captured.step(features[30 : 30 + rows], sub[:rows], 31, caches[1])
                assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
                for cache in caches:
                    cache.crop(30)
            want = eager.tree_step(features[:2], sub[:2], positions, caches[0], allowed[:, :32])
            got = captured.tree_step(features[:2], sub[:2], positions, caches[1], allowed[:, :32])
            assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
            for cache in caches:
                cache.crop(30)
    assert set(caches[1].graphs) == {"pool", ("head", 1, False), ("head", 3, False), ("head", 2, True)}


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_on_cuda_a_loaded_head_runs_captured_and_greedy_output_equals_the_target_alone():
    from specviz.engine.cuda_steps import captured_head_step

    target, head = cuda_head()
    assert head.static is not None and head.static.capture is captured_head_step
    prompt = list(range(100, 132))
    options = DecodeOptions(gamma=3, temperature=0.0, max_new_tokens=32)
    base = autoregressive_generate(prompt, target=target, options=options)
    drafter = HeadDrafter(head, "head")
    spec = speculative_generate(prompt, target=target, draft=drafter, options=options)
    assert spec.output_token_ids == base.output_token_ids
    assert any(key[0] == "head" for key in drafter.cache.graphs)
