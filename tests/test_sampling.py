"""specviz.engine.sampling.probabilities: greedy, temperature, top-k, top-p, and equal treatment of rows."""

from __future__ import annotations

import math

import pytest
import torch

from specviz.config import SamplingConfig
from specviz.engine.sampling import probabilities

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

SETTINGS = [
    SamplingConfig(0.0),
    SamplingConfig(1.0),
    SamplingConfig(0.3),
    SamplingConfig(2.5),
    SamplingConfig(1.0, top_k=1),
    SamplingConfig(0.7, top_k=5),
    SamplingConfig(1.0, top_p=0.5),
    SamplingConfig(1.3, top_k=8, top_p=0.9),
]


def _logits(rows=16, v=40, seed=0, scale=3.0):
    return torch.randn(rows, v, generator=torch.Generator().manual_seed(seed)) * scale


def test_temperature_zero_is_one_hot_at_the_argmax():
    logits = _logits()
    probs = probabilities(logits, SamplingConfig(0.0))
    assert torch.equal(probs.argmax(-1), logits.argmax(-1))
    assert torch.equal(probs.sum(-1), torch.ones(logits.shape[0]))
    assert torch.equal((probs > 0).sum(-1), torch.ones(logits.shape[0], dtype=torch.long))
    # ties go to the lowest id, as transformers' greedy search does
    tied = torch.tensor([[1.0, 5.0, 5.0, 2.0]])
    assert probabilities(tied, SamplingConfig(0.0)).tolist() == [[0.0, 1.0, 0.0, 0.0]]


def test_temperature_one_is_softmax_and_temperature_scales_logits():
    logits = _logits()
    assert torch.allclose(probabilities(logits, SamplingConfig(1.0)), torch.softmax(logits, -1), atol=1e-7)
    assert torch.allclose(probabilities(logits, SamplingConfig(0.5)), torch.softmax(logits / 0.5, -1), atol=1e-7)


@pytest.mark.parametrize("k", [1, 2, 5, 39, 40, 100])
def test_top_k_keeps_exactly_k_tokens(k):
    logits = _logits()  # continuous random logits: no ties
    probs = probabilities(logits, SamplingConfig(1.0, top_k=k))
    kept = probs > 0
    assert torch.equal(kept.sum(-1), torch.full((logits.shape[0],), min(k, logits.shape[1])))
    top = torch.topk(logits, min(k, logits.shape[1]), dim=-1).indices
    assert torch.equal(kept, torch.zeros_like(kept).scatter_(-1, top, True))
    # the kept tokens keep their relative odds (renormalised softmax)
    expected = torch.softmax(logits.masked_fill(~kept, float("-inf")), -1)
    assert torch.allclose(probs, expected, atol=1e-7)


def test_top_p_keeps_the_smallest_set_reaching_the_mass():
    base = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = base.log()[None]
    cases = {0.1: 1, 0.5: 1, 0.51: 2, 0.75: 2, 0.85: 3, 0.97: 4, 1.0: 4}
    for top_p, size in cases.items():
        probs = probabilities(logits, SamplingConfig(1.0, top_p=top_p))[0]
        assert int((probs > 0).sum()) == size, top_p
        assert torch.allclose(probs[:size], base[:size] / base[:size].sum(), atol=1e-6), top_p


def test_top_p_on_random_rows_is_minimal_and_sufficient():
    logits = _logits(rows=32, seed=3)
    full = torch.softmax(logits, -1)
    for top_p in (0.2, 0.6, 0.9):
        probs = probabilities(logits, SamplingConfig(1.0, top_p=top_p))
        for row_full, row in zip(full, probs, strict=True):
            kept = row > 0
            kept_mass = float(row_full[kept].sum())
            assert kept_mass >= top_p - 1e-6  # reaches the mass
            # minimal: without its least likely kept token, the set falls short of top_p
            smallest_kept = float(row_full[kept].min())
            assert kept_mass - smallest_kept < top_p
            # and it is a top set: everything kept is at least as likely as everything dropped
            if (~kept).any():
                assert smallest_kept >= float(row_full[~kept].max())


@pytest.mark.parametrize("sampling", SETTINGS, ids=str)
def test_rows_sum_to_one_in_float32(sampling):
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        probs = probabilities(_logits(seed=5).to(dtype), sampling)
        assert probs.dtype == torch.float32
        assert torch.allclose(probs.sum(-1), torch.ones(probs.shape[0]), atol=1e-5)
        assert (probs >= 0).all() and torch.isfinite(probs).all()


@pytest.mark.parametrize("sampling", SETTINGS, ids=str)
def test_identical_rows_are_treated_identically(sampling):
    # p and q are shaped by the same function: a row must not depend on its neighbours or position.
    row = _logits(rows=1, seed=9)[0]
    others = _logits(rows=5, seed=10)
    batch = torch.stack([row, others[0], row, others[1], row])
    probs = probabilities(batch, sampling)
    alone = probabilities(row[None], sampling)[0]
    for i in (0, 2, 4):
        assert torch.equal(probs[i], probs[0])
        assert torch.allclose(probs[i], alone, atol=1e-7)
    # any leading shape works: [..., V]
    assert torch.allclose(probabilities(batch.reshape(5, 1, -1), sampling).reshape(5, -1), probs)


def test_large_logits_stay_finite():
    logits = torch.tensor([[1e4, -1e4, 0.0, 3e4]])
    for sampling in SETTINGS:
        probs = probabilities(logits, sampling)
        assert torch.isfinite(probs).all()
        assert math.isclose(float(probs.sum()), 1.0, abs_tol=1e-6)
