"""The lean step in one native call (specviz.engine.native_step, csrc/step.cpp) on the offline target: it
computes what the lean forward's Python loop computes (to float32's last bits), a row gets the same bits
alone or among others, a draft tree's mask is honoured, and the weights as shipped and the float32
weights give bit-identical logits through the whole model."""

from __future__ import annotations

import pytest
import torch

from specviz.engine import native

pytestmark = pytest.mark.slow

PROMPT = torch.tensor([1, 9690, 198, 2683, 457, 253, 1789, 30, 2, 198, 1, 4093, 198, 19161, 282, 4384])


@pytest.fixture(scope="module")
def lean(offline_target):
    if reason := native.unavailable():
        pytest.fail(reason)
    assert offline_target.lean.native is not None  # the default target runs it
    return offline_target.lean


def _forward(lean, ids, cache, keep, native_step: bool, **kwargs):
    saved = lean.native
    lean.native = saved if native_step else None
    try:
        with torch.inference_mode():
            return lean.forward(ids, cache, keep=keep, **kwargs)
    finally:
        lean.native = saved


def test_the_native_step_computes_what_the_loop_computes(lean):
    fast, loop = lean.new_cache(), lean.new_cache()
    got, got_f = _forward(lean, PROMPT, fast, 5, True, feature_layers=(2, 15))
    want, want_f = _forward(lean, PROMPT, loop, 5, False, feature_layers=(2, 15))
    torch.testing.assert_close(got, want, atol=2e-4, rtol=0)  # [5, V]
    torch.testing.assert_close(got_f, want_f, atol=1e-2, rtol=1e-4)  # residual streams reach the hundreds
    torch.testing.assert_close(fast.keys[:, :, : fast.length], loop.keys[:, :, : loop.length], atol=1e-4, rtol=1e-4)
    assert fast.length == loop.length == PROMPT.shape[0]
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_a_row_gets_the_same_bits_alone_or_among_others(lean):
    together = _forward(lean, PROMPT, lean.new_cache(), PROMPT.shape[0], True)[0]
    cache = lean.new_cache()
    _forward(lean, PROMPT[:-3], cache, 1, True)
    for i in range(3):  # the last three rows one at a time, as the target alone decodes them
        alone = _forward(lean, PROMPT[-3 + i :][:1], cache, 1, True)[0]
        assert torch.equal(alone[0], together[-3 + i])


def test_a_tree_mask_is_honoured(lean):
    """Two branches after the prompt: a row sees the prompt and its own branch only, so each branch's
    logits equal that branch decoded alone."""
    from specviz.engine.target import node_layout

    a, b = torch.tensor([1234, 567]), torch.tensor([89, 4321])
    parents = torch.tensor([-1, -1, 0, 1])  # level order: a0, b0, a1 (after a0), b1 (after b0)
    feed = torch.cat([PROMPT[-1:], torch.stack([a[0], b[0], a[1], b[1]])])  # the unseen last token, then the tree
    tree_cache = lean.new_cache()
    _forward(lean, PROMPT[:-1], tree_cache, 1, True)
    layout = node_layout(tree_cache.length, 1, parents, "cpu", torch.float32)
    tree = _forward(lean, feed, tree_cache, 5, True, tree=layout)[0]  # [5, V]
    for branch, rows in ((a, [1, 3]), (b, [2, 4])):
        alone = lean.new_cache()
        _forward(lean, PROMPT[:-1], alone, 1, True)
        chain = _forward(lean, torch.cat([PROMPT[-1:], branch]), alone, 3, True)[0]  # [3, V]
        torch.testing.assert_close(tree[[0, *rows]], chain, atol=1e-4, rtol=0)


def test_shipped_and_float32_weights_give_bit_identical_logits(lean, monkeypatch):
    """The float32 weights on the native kernel (fused, so the native step runs them too) against the
    blocks: the same weights, the same sums, the same logits bit for bit, prompt and step."""
    from specviz.engine.models import load_model

    monkeypatch.setenv("SPECVIZ_KERNELS", "native")
    float32 = load_model(weights="float32")
    assert float32.weights == "float32" and float32.lean.native is not None
    for model in (lean, float32.lean):
        assert model.native is not None
    caches = [lean.new_cache(), float32.lean.new_cache()]
    first = [_forward(m, PROMPT, c, 3, True)[0] for m, c in zip((lean, float32.lean), caches, strict=True)]
    assert torch.equal(first[0], first[1])
    step = [_forward(m, torch.tensor([42]), c, 1, True)[0] for m, c in zip((lean, float32.lean), caches, strict=True)]
    assert torch.equal(step[0], step[1])


def test_a_batched_pass_gives_each_run_its_solo_numbers(lean):
    """Two runs' passes in one call (each its own cache, one a draft tree) give each run the bits its solo
    pass gives: the linears stream once for both, everything else is per run and in a fixed order."""
    from specviz.engine.lean_llama import LeanRequest
    from specviz.engine.target import node_layout

    solo_a, solo_b, both_a, both_b = (lean.new_cache() for _ in range(4))
    for cache in (solo_a, both_a):
        _forward(lean, PROMPT, cache, 1, True)
    for cache in (solo_b, both_b):
        _forward(lean, PROMPT[:9], cache, 1, True)
    step = torch.tensor([42])
    nodes, parents = torch.tensor([7, 11, 13]), torch.tensor([-1, -1, 0])
    tree = node_layout(solo_b.length, 1, parents, "cpu", torch.float32)
    feed_b = torch.cat([torch.tensor([99]), nodes])
    want_a = _forward(lean, step, solo_a, 1, True, feature_layers=(2,))
    want_b = _forward(lean, feed_b, solo_b, 4, True, tree=tree)
    with torch.inference_mode():
        got_a, got_b = lean.forward_many(
            [LeanRequest(step, both_a, 1, (2,)), LeanRequest(feed_b, both_b, 4, None, tree)]
        )
    assert torch.equal(got_a[0], want_a[0]) and torch.equal(got_a[1], want_a[1])
    assert torch.equal(got_b[0], want_b[0])
    assert torch.equal(both_b.keys[:, :, : both_b.length], solo_b.keys[:, :, : solo_b.length])
