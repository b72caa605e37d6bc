"""The lean forward's static-shape step (specviz.engine.static_llama) and its CUDA graphs (cuda_steps).

- its logits and features equal the lean forward's within ATTENTION_TOL: a prefill, one-row steps,
  several rows, a draft tree's branches and a parent-array tree, after a roll-back and after a
  tree's path is kept; on a tiny random Llama and on the offline target. Not bit for bit, and why:
  the static step attends over the cache's whole capacity with the slots past its length masked.
  Those slots add exact zeros, but the attention kernel then sums over more slots in another order
  (a first layer's keys and values, before any attention, are bit-identical);
- its cache grows past its capacity (dropping the graphs that held the old buffers) and goes back to
  be reused once its run's TargetState is gone;
- a decode through it writes the lean forward's tokens (greedy and sampled);
- on CUDA only (skipped without a GPU): a captured step equals the eager static step bit for bit,
  and greedy decodes through the captured steps equal transformers' generate() in float32.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.engine.lean_llama import LeanLlama
from specviz.engine.static_llama import CAPACITY_STEP, StaticLlama
from specviz.engine.target import TargetState, node_layout, tree_layout
from specviz.engine.toy import tiny_llama

ATTENTION_TOL = {"atol": 2e-5, "rtol": 1e-5}  # float32 sums of the same terms in another order
OFFLINE_TOL = {"atol": 2e-4, "rtol": 1e-5}  # the same through 30 layers, logits up to about 20
NO_CUDA = "needs a CUDA GPU: CUDA graphs capture only there (run it in a GPU session, scripts/gpu_check.sh)"


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama(vocab_size=64, seed=7, layers=3, init_scale=10.0, hidden=32)


def both(model):
    lean = LeanLlama(model)
    return lean, StaticLlama(lean)


def test_prefill_steps_and_rows_match_the_lean_forward(tiny):
    lean, static = both(tiny.model)
    ids = torch.randint(0, 64, (30,), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        want_cache, got_cache = lean.new_cache(), static.new_cache(40)
        for chunk, layers in ((ids[:20], (0, 2)), (ids[20:21], (1,)), (ids[21:26], (0, 1)), (ids[26:], None)):
            want, want_f = lean.forward(chunk, want_cache, chunk.shape[0], layers)
            got, got_f = static.forward(chunk, got_cache, chunk.shape[0], layers)
            torch.testing.assert_close(got, want, **ATTENTION_TOL)
            if layers is None:
                assert got_f is None
            else:
                torch.testing.assert_close(got_f, want_f, **ATTENTION_TOL)
            assert (
                got_cache.length == want_cache.length and int(got_cache.length_t) + chunk.shape[0] == got_cache.length
            )
        n = want_cache.length  # layer 0's entries come before any attention: the same products, bit for bit
        assert torch.equal(got_cache.keys[0, :, :n], want_cache.keys[0, :, :n])
        assert torch.equal(got_cache.values[0, :, :n], want_cache.values[0, :, :n])


def test_tree_passes_roll_back_and_kept_paths_match(tiny):
    lean, static = both(tiny.model)
    prompt = torch.tensor([3, 14, 15, 9, 2, 6])
    tree = torch.tensor([[7, 2, 9], [4, 4, 1]])  # 2 branches x 3 drafts, fed level by level
    feed = torch.cat([prompt[-1:], tree.T.reshape(-1)])
    parents = torch.tensor([-1, -1, 0, 0, 1, 2])  # a parent-array tree (EAGLE-2's dynamic tree)
    nodes = torch.tensor([5, 8, 1, 3, 3, 12])
    with torch.inference_mode():
        want_cache, got_cache = lean.new_cache(), static.new_cache(10)
        for forward, cache in ((lean.forward, want_cache), (static.forward, got_cache)):
            forward(prompt[:-1], cache, 1)
        layout = tree_layout(5, 1, 2, 3, "cpu", torch.float32)
        want, _ = lean.forward(feed, want_cache, 7, None, layout)
        got, _ = static.forward(feed, got_cache, 7, None, layout)
        torch.testing.assert_close(got, want, **ATTENTION_TOL)
        for cache in (want_cache, got_cache):  # keep branch 1's first two drafts, as TargetState.accept does
            cache.select(torch.tensor([0, 1, 2, 3, 4, 5, 7, 9]))
        layout = node_layout(8, 1, parents, "cpu", torch.float32)
        fed = torch.cat([torch.tensor([11]), nodes])
        want, _ = lean.forward(fed, want_cache, 7, (1,), layout)
        got, _ = static.forward(fed, got_cache, 7, (1,), layout)
        torch.testing.assert_close(got, want, **ATTENTION_TOL)
        for cache in (want_cache, got_cache):
            cache.crop(-5)  # roll back by moving the length only
        want, _ = lean.forward(torch.tensor([2, 2]), want_cache, 2)
        got, _ = static.forward(torch.tensor([2, 2]), got_cache, 2)
        torch.testing.assert_close(got, want, **ATTENTION_TOL)


def test_the_cache_grows_and_is_reused_after_its_run(tiny):
    lean, static = both(tiny.model)
    cache = static.new_cache(3)
    assert cache.capacity == CAPACITY_STEP
    cache.graphs["stand-in"] = object()
    with torch.inference_mode():
        static.forward(torch.arange(CAPACITY_STEP - 1) % 64, cache, 1)
        static.forward(torch.tensor([1, 2, 3]), cache, 3)  # past the capacity: it grows, its graphs go
    assert cache.capacity >= CAPACITY_STEP + 2 and cache.length == CAPACITY_STEP + 2 and not cache.graphs
    target = dataclasses.replace(tiny, lean=None, static=static)
    state = TargetState(target, [1, 2, 3], new_tokens=20)
    first = state.cache
    del state
    gc.collect()
    again = TargetState(target, [4, 5], new_tokens=40)
    assert again.cache is first and again.cache.length == 0  # same rounded capacity: reused, emptied


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_decode_through_the_static_step_writes_the_lean_forwards_tokens(tiny_pair, temperature):
    from specviz.decoding.decoder import speculative_generate

    target, draft = tiny_pair
    lean_target = dataclasses.replace(target, lean=LeanLlama(target.model))
    static_target = dataclasses.replace(target, lean=None, static=StaticLlama(LeanLlama(target.model)))
    options = DecodeOptions(gamma=3, temperature=temperature, seed=5, max_new_tokens=24)
    want = speculative_generate([3, 1, 4, 1, 5], target=lean_target, draft=draft, options=options)
    got = speculative_generate([3, 1, 4, 1, 5], target=static_target, draft=draft, options=options)
    assert got.output_token_ids == want.output_token_ids


def test_on_the_offline_target_the_static_step_keeps_the_lean_logits_and_tokens(offline_target):
    from specviz.decoding.decoder import speculative_generate

    lean = offline_target.lean
    static = StaticLlama(lean)
    ids = torch.tensor(offline_target.tokenizer("Tell me a story about a brave small boat.")["input_ids"])
    with torch.inference_mode():
        want_cache, got_cache = lean.new_cache(), static.new_cache(64)
        torch.testing.assert_close(
            static.forward(ids, got_cache, 1)[0], lean.forward(ids, want_cache, 1)[0], **OFFLINE_TOL
        )
        for row in ([42], [7, 300, 9, 1200]):
            t = torch.tensor(row)
            want, want_f = lean.forward(t, want_cache, len(row), (10,))
            got, got_f = static.forward(t, got_cache, len(row), (10,))
            torch.testing.assert_close(got, want, **OFFLINE_TOL)
            torch.testing.assert_close(got_f, want_f, **OFFLINE_TOL)
    target = dataclasses.replace(offline_target, lean=None, static=static)
    options = DecodeOptions(temperature=0.0, max_new_tokens=24)  # the default draft: the head's two-branch tree
    want = speculative_generate("Write a haiku about the sea.", target=offline_target, options=options)
    got = speculative_generate("Write a haiku about the sea.", target=target, options=options)
    assert got.output_token_ids == want.output_token_ids


def test_on_the_cpu_the_loaded_target_keeps_the_lean_forward(tiny):
    from specviz.engine.models import ready_model

    loaded = ready_model("tiny", tiny.model, None, "float32", pack=False)
    assert loaded.forward == "lean" and loaded.static is None
    with pytest.raises(ValueError, match="CUDA"):
        StaticLlama(loaded.lean, capture=lambda *_: None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_a_captured_step_equals_the_eager_static_step_bit_for_bit():
    from specviz.engine.cuda_steps import captured_step

    model = tiny_llama(vocab_size=64, seed=7, layers=3, init_scale=10.0, hidden=32).model.cuda()
    lean = LeanLlama(model, cpu_only=False)
    eager, captured = StaticLlama(lean), StaticLlama(lean, capture=captured_step)
    ids = torch.arange(20, device="cuda") % 64
    with torch.inference_mode():
        eager_cache, captured_cache = eager.new_cache(40), captured.new_cache(40)
        for forward, cache in ((eager.forward, eager_cache), (captured.forward, captured_cache)):
            forward(ids, cache, 1)
        for rows, layers in (([5], None), ([9, 3, 1, 7], (1,)), ([2], None), ([4, 4, 8, 1], (1,))):
            t = torch.tensor(rows, device="cuda")
            want, want_f = eager.forward(t, eager_cache, len(rows), layers)
            got, got_f = captured.forward(t, captured_cache, len(rows), layers)  # captured once per shape
            assert torch.equal(got, want)
            assert (got_f is None and want_f is None) or torch.equal(got_f, want_f)
        assert set(captured_cache.graphs) == {"pool", (1, None), (4, (1,))}


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_greedy_through_captured_steps_equals_transformers_generate_in_float32():
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.engine.models import ready_model
    from specviz.labs.bench_device import hf_generate

    model = tiny_llama(vocab_size=64, seed=1, layers=2, init_scale=40.0, hidden=32).model.cuda()
    target = ready_model("tiny-cuda", model, None, "float32", pack=False)
    assert target.forward == "static (CUDA graphs)"
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    want = hf_generate(model, prompt, 32, static=False)
    options = DecodeOptions(temperature=0.0, max_new_tokens=32)
    assert autoregressive_generate(prompt, target=target, options=options).output_token_ids == want
    assert speculative_generate(prompt, target=target, draft="ngram", options=options).output_token_ids == want
