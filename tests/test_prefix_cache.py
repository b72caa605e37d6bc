"""Prompts' shared beginnings computed once (specviz.engine.prefix_cache) give the very numbers each
prompt's whole pass gives: logits, keys, values and the drafter's features, bit for bit."""

from __future__ import annotations

import pytest
import torch

from specviz.decoding.prompting import prompt_token_ids
from specviz.engine import native
from specviz.engine.lean_llama import LeanRequest
from specviz.engine.prefix_cache import MIN_SHARED, PrefixStore, common_length

PROMPTS = ["Name a river.", "Write one sentence about a comet.", "List three fruits.", "Say hello."]
FEATURES = (2, 15)  # two layers' outputs, as a draft head asks for them


@pytest.fixture(scope="module")
def lean(offline_target):
    if reason := native.unavailable():
        pytest.skip(f"the native step does not run here: {reason}")
    lean = offline_target.lean
    assert lean.native is not None and lean.prefixes is not None  # the default target keeps beginnings
    return lean


def _prefill(lean, store, ids_list, feature_layers=FEATURES):
    """Every prompt's first pass together, with `store` (None: each prompt computed whole)."""
    saved, lean.prefixes = lean.prefixes, store
    try:
        requests = [LeanRequest(torch.tensor(ids), lean.new_cache(), 1, feature_layers) for ids in ids_list]
        results = lean.forward_many(requests, reuse_prefixes=True)
    finally:
        lean.prefixes = saved
    return [
        (logits, features, r.cache.keys[:, :, : r.cache.length], r.cache.values[:, :, : r.cache.length])
        for (logits, features), r in zip(results, requests, strict=True)
    ]


def _same(a, b) -> bool:
    """Every tensor equal bit for bit (None, no features wanted, on both sides)."""
    return all(x is y is None or torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_class_of_prompts_computes_its_shared_beginning_once_with_the_same_numbers(offline_target, lean):
    ids_list = [prompt_token_ids(offline_target.tokenizer, p) for p in PROMPTS]
    shared = min(common_length(tuple(ids_list[0]), tuple(other)) for other in ids_list[1:])
    assert shared >= MIN_SHARED  # the chat template's head: what a class's prompts share
    store = PrefixStore()
    whole, reused = _prefill(lean, None, ids_list), _prefill(lean, store, ids_list)
    for w, r in zip(whole, reused, strict=True):
        assert _same(w, r)  # logits, features, keys and values: every bit
        assert r[1].shape[0] == r[2].shape[2]  # features for every prompt position, the copied ones too
    assert store.reused_tokens >= shared * len(PROMPTS)


def test_a_later_prompt_continues_from_a_kept_one_and_features_are_kept_per_layer_set(offline_target, lean):
    tokenizer = offline_target.tokenizer
    store = PrefixStore(capacity=2)
    _prefill(lean, store, [prompt_token_ids(tokenizer, "Name a river.")])
    later = [prompt_token_ids(tokenizer, "Name a mountain.")]
    before = store.reused_tokens
    assert _same(_prefill(lean, store, later)[0], _prefill(lean, None, later)[0])
    assert store.reused_tokens - before >= MIN_SHARED
    # A drafter that reads other layers cannot use features kept for these: that prompt is computed whole.
    before = store.reused_tokens
    other = [prompt_token_ids(tokenizer, "Name a lake.")]
    assert _same(_prefill(lean, store, other, (5,))[0], _prefill(lean, None, other, (5,))[0])
    assert store.reused_tokens == before
    # Without features wanted, any kept prompt serves.
    plain = [prompt_token_ids(tokenizer, "Name a sea.")]
    assert _same(_prefill(lean, store, plain, None)[0], _prefill(lean, None, plain, None)[0])
    assert store.reused_tokens > before


def test_the_store_keeps_its_last_prompts_only():
    store = PrefixStore(capacity=2)

    class Cache:  # what keep() reads of a LeanCache
        keys = values = torch.zeros(1, 1, 12, 2)

    for first in (1, 2, 3):
        store.keep(tuple(range(first, first + 12)), Cache, None, None)
    assert store.longest(tuple(range(1, 13)), None)[0] == 0  # the oldest was dropped
    assert store.longest(tuple(range(3, 15)), None)[0] == 11  # all but its last token: a pass needs a row


def test_a_solo_pass_never_reuses_a_kept_prompt(offline_target, lean):
    """A solo decode (a timed pair's half) computes its whole prompt: its time is compared with its
    partner's, which may have just computed the same prompt."""
    ids = prompt_token_ids(offline_target.tokenizer, "Name a river.")
    store = PrefixStore()
    saved, lean.prefixes = lean.prefixes, store
    try:
        for _ in range(2):
            lean.forward_many([LeanRequest(torch.tensor(ids), lean.new_cache(), 1)])
        assert store.reused_tokens == 0
        lean.forward_many([LeanRequest(torch.tensor(ids), lean.new_cache(), 1)], reuse_prefixes=True)
        assert store.reused_tokens == 0  # nothing was kept by the solo passes either
    finally:
        lean.prefixes = saved
