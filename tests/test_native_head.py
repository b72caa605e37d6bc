"""The draft head's step in one native call (specviz.engine.native_head) and the head's stops by cost
(specviz.drafters.head.HeadDrafter._chain_budget, _branches_pay) on the offline pair as it loads.

The native step must compute what the eager step computes (to float32's last bits) for a catch-up, a
chained step and a tree level under its mask; the cost rule must run a chain to γ where the measured
verification pass is flat, stop and say why where it is steep, and choose the tree only where its rows
are cheap. Exactness under these stops is held by tests/test_offline_exactness.py (greedy equal to
transformers, χ² of the default pair, which stops by cost as it loads)."""

from __future__ import annotations

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.drafters import head_tree
from specviz.drafters.head import HeadDrafter
from specviz.engine import native
from specviz.engine.draft_head import HeadCache
from specviz.engine.models import HEAD_DRAFT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def head(offline_target, tmp_path_factory):
    """The offline head with its layers' kernels native, as a machine that measures them so loads it (the
    suite fixes them to "packed", SPECVIZ_KERNELS): its own copy, so other tests' head is untouched."""
    from specviz.engine.draft_head import load_head
    from specviz.engine.kernels import choose_for_head
    from specviz.engine.models import offline_path
    from specviz.engine.native_head import NativeHead

    if reason := native.unavailable():
        pytest.fail(reason)
    head = load_head(offline_path(HEAD_DRAFT), offline_target.model)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECVIZ_KERNELS", "native")
        head.kernels = choose_for_head(head, HEAD_DRAFT, tmp_path_factory.mktemp("kernels") / "kernels.json")
    head.native = NativeHead.of(head)
    assert head.native is not None
    return head


def _features(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 576, generator=torch.Generator().manual_seed(seed))


def test_the_native_head_step_computes_what_the_eager_step_computes(head):
    fast, eager = head.new_cache(), HeadCache()
    tokens = head.subset[:40]
    with torch.inference_mode():
        got = head.step(_features(40), tokens, 1, fast)  # a prompt's catch-up
        want = head.step(_features(40), tokens, 1, eager)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        got = head.step(got[0][-1:], tokens[:1], 41, fast)  # one chained step
        want = head.step(want[0][-1:], tokens[:1], 41, eager)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        assert fast.length == eager.length == 41
        allowed = torch.ones(3, 44, dtype=torch.bool)
        allowed[0, 42:] = False  # node 0 sees the shared prefix and itself only
        allowed[0, 41] = True
        allowed[1, 43] = False
        positions = torch.tensor([42, 42, 43])
        got = head.tree_step(_features(3, 1), tokens[:3], positions, fast, allowed)
        want = head.tree_step(_features(3, 1), tokens[:3], positions, eager, allowed)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_the_mask_decides_what_a_tree_node_sees(head):
    """A node that may not see an entry gets other numbers than one that may: the mask is honoured."""
    cache = head.new_cache()
    tokens = head.subset[:20]
    with torch.inference_mode():
        head.step(_features(20), tokens, 1, cache)
        sees_all = torch.ones(1, 21, dtype=torch.bool)
        sees_less = sees_all.clone()
        sees_less[0, :10] = False
        a = head.tree_step(_features(1, 2), tokens[:1], torch.tensor([21]), cache, sees_all)[1]
        cache.crop(20)
        b = head.tree_step(_features(1, 2), tokens[:1], torch.tensor([21]), cache, sees_less)[1]
    assert (a - b).abs().max() > 1e-3


def test_python_step_keeps_the_eager_head(head, monkeypatch):
    from specviz.engine.native_head import NativeHead

    monkeypatch.setenv("SPECVIZ_STEP", "python")
    assert NativeHead.of(head) is None


def _drafter(head, v: list[float], step_s: float = 1e-3) -> HeadDrafter:
    head.level_seconds = {1: step_s, **{w: step_s for w in range(2, 9)}}  # what level_seconds reads back
    return HeadDrafter(head, HEAD_DRAFT, costs=lambda: (v, 0.01))


def _draft_after_prefill(offline_target, drafter, gamma: int, tree: bool):
    """The drafter's proposal after a real first pass of the target (its features observed)."""
    from specviz.decoding.prompting import prompt_token_ids
    from specviz.engine.target import TargetState

    ids = prompt_token_ids(offline_target.tokenizer, "Name three colours of the rainbow.")
    sampling = DecodeOptions(temperature=0).sampling
    drafter.start(sampling, torch.Generator().manual_seed(0), offline_target.vocab_size)
    state = TargetState(offline_target, ids)
    with torch.inference_mode():
        logits, features = state.forward(torch.empty(1, 0, dtype=torch.long), drafter.feature_layers)  # the prefill
        drafter.observe(features, 0)
        context = torch.tensor(ids + [int(logits[-1].argmax())])
        return drafter.propose_tree(context, gamma) if tree else drafter.propose(context, gamma)


def test_a_flat_pass_drafts_the_whole_chain_and_the_tree(offline_target, head):
    flat = [0.0] + [1.0] * 20  # every extra row free: every draft pays
    tokens, _q = _draft_after_prefill(offline_target, _drafter(head, flat), 4, tree=False)
    assert tokens.shape[0] == 4
    tree, _q = _draft_after_prefill(offline_target, _drafter(head, flat), 3, tree=True)
    assert tree.shape[0] == 2  # the tree's second branch costs nothing


def test_a_steep_pass_stops_by_cost_and_says_why(offline_target, head):
    # Each row past the first costs as much as a whole step: a draft pays only if the head is nearly sure.
    steep = [0.0] + [float(r) for r in range(1, 21)]
    drafter = _drafter(head, steep)
    tokens, q = _draft_after_prefill(offline_target, drafter, 8, tree=False)
    assert tokens.shape[0] < 8 and q.shape[0] == tokens.shape[0]
    report = drafter.report
    assert report.stop == "cost" and report.confidence < report.threshold <= 1.0
    # A row costing ten steps: no draft could pay, so none is sent, and the trace says so.
    hopeless = [0.0, 1.0] + [10.0 * r for r in range(2, 21)]
    drafter = _drafter(head, hopeless)
    tokens, _q = _draft_after_prefill(offline_target, drafter, 4, tree=False)
    assert tokens.shape[0] == 0 and drafter.report.stop == "cost" and drafter.report.threshold == 1.0
    tree, _q = _draft_after_prefill(offline_target, _drafter(head, steep), 3, tree=True)
    assert tree.shape[0] == 1  # the tree's extra rows do not pay: the chain


def test_the_head_step_cost_is_kept_per_machine(head, monkeypatch, tmp_path):
    """Measured once per machine and read back after a restart, so a seed drafts the same on the next load."""
    from specviz.engine import models

    monkeypatch.setattr(models, "cache_dir", lambda: tmp_path)
    head.__dict__.pop("level_seconds", None)
    first = head_tree.level_seconds(head, 1)
    head.__dict__.pop("level_seconds", None)  # a new load of the head: nothing kept on it
    monkeypatch.setattr(head_tree, "_measured_level", lambda *_: pytest.fail("measured again"))
    assert head_tree.level_seconds(head, 1) == first
