"""The lean Llama forward (specviz.engine.lean_llama) against transformers' own.

- logits and features equal transformers' within float32 rounding: a prefill, one-token steps,
  several rows at once and a draft tree's mask, on a tiny random Llama with grouped-query attention;
- its cache crops, keeps a tree's path and grows past its first capacity;
- models it was not checked on keep transformers' forward, with the reason recorded;
- on the offline target: the lean forward is what loads, and its greedy decodes equal those of
  the target through transformers' forward, except at a float32 near-tie.
"""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from specviz.config import DecodeOptions
from specviz.engine.lean_llama import LeanCache, LeanLlama, lean_unavailable
from specviz.engine.target import target_forward, tree_layout
from specviz.engine.toy import tiny_llama

TOL = {"atol": 2e-5, "rtol": 1e-5}


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama(vocab_size=64, seed=7, layers=3, init_scale=10.0, hidden=32)


def test_prefill_steps_and_rows_match_transformers(tiny):
    model, lean = tiny.model, LeanLlama(tiny.model)
    ids = torch.randint(0, 64, (30,), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        cache, lean_cache = DynamicCache(config=model.config), lean.new_cache()
        for chunk, layers in ((ids[:20], (0, 2)), (ids[20:21], (1,)), (ids[21:26], (0, 1)), (ids[26:], None)):
            want, want_f = target_forward(model, chunk, cache, chunk.shape[0], layers)
            got, got_f = lean.forward(chunk, lean_cache, chunk.shape[0], layers)
            torch.testing.assert_close(got, want, **TOL)
            if layers is None:
                assert got_f is None
            else:
                torch.testing.assert_close(got_f, want_f, **TOL)
            assert lean_cache.get_seq_length() == cache.get_seq_length()


def test_a_tree_pass_matches_transformers(tiny):
    model, lean = tiny.model, LeanLlama(tiny.model)
    prompt = torch.tensor([3, 14, 15, 9, 2, 6])
    tree = torch.tensor([[7, 2, 9], [4, 4, 1]])  # 2 branches x 3 drafts, fed level by level
    feed = torch.cat([prompt[-1:], tree.T.reshape(-1)])
    with torch.inference_mode():
        cache, lean_cache = DynamicCache(config=model.config), lean.new_cache()
        target_forward(model, prompt[:-1], cache, 1, None)
        lean.forward(prompt[:-1], lean_cache, 1, None)
        layout = tree_layout(5, 1, 2, 3, "cpu", torch.float32)
        want, _ = target_forward(model, feed, cache, 7, None, layout)
        got, _ = lean.forward(feed, lean_cache, 7, None, layout)
    torch.testing.assert_close(got, want, **TOL)


def test_the_cache_crops_selects_and_grows():
    cache = LeanCache(layers=2, kv_heads=1, head_dim=2, dtype=torch.float32, capacity=4)
    cache.reserve(3)
    cache.keys[:, :, :3] = torch.arange(3.0)[None, None, :, None]
    cache.length = 3
    cache.reserve(6)  # past the first capacity: the entries so far move with it
    assert cache.keys.shape[2] >= 9 and cache.keys[0, 0, :3, 0].tolist() == [0.0, 1.0, 2.0]
    cache.select(torch.tensor([0, 2]))
    assert cache.length == 2 and cache.keys[1, 0, :2, 1].tolist() == [0.0, 2.0]
    cache.crop(-1)
    assert cache.get_seq_length() == 1
    cache.crop(5)  # never past what it holds
    assert cache.length == 1


def test_models_it_was_not_checked_on_keep_transformers_forward(tiny):
    assert lean_unavailable(tiny.model) is None
    tiny.model.config.attention_bias = True
    try:
        assert lean_unavailable(tiny.model) == "biased projections"
        with pytest.raises(ValueError, match="biased"):
            LeanLlama(tiny.model)
    finally:
        tiny.model.config.attention_bias = False
    assert "not a LlamaForCausalLM" in lean_unavailable(torch.nn.Linear(2, 2))


@pytest.mark.slow
def test_offline_target_runs_lean_and_decodes_as_transformers_forward(offline_target):
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.engine.models import load_model
    from specviz.labs.bench import PROMPTS
    from specviz.traces.sameness import FLOAT32_NEAR_TIE_TOLERANCE, compare_runs

    assert offline_target.forward == "lean" and offline_target.lean is not None
    plain = load_model(lean=False)
    assert plain.lean is None and plain.forward == "transformers (lean=False)"
    for prompt in PROMPTS[:3]:
        lean_run = autoregressive_generate(
            prompt, target=offline_target, options=DecodeOptions(temperature=0, max_new_tokens=24)
        )
        spec = speculative_generate(
            prompt, target=offline_target, options=DecodeOptions(temperature=0, max_new_tokens=24)
        )
        reference = autoregressive_generate(
            prompt, target=plain, options=DecodeOptions(temperature=0, max_new_tokens=24)
        )
        assert lean_run.config["forward"] == "lean" and reference.config["forward"].startswith("transformers")
        for run in (lean_run, spec):
            same = compare_runs(run, reference, plain)
            assert same.verdict in ("identical", "near_tie"), same
            if same.verdict == "near_tie":
                assert same.logit_gap < FLOAT32_NEAR_TIE_TOLERANCE
