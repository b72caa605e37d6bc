"""Logits to probabilities: temperature, top-k and top-p, always in float32.

The same function turns the target's logits into p and the draft's logits into q, so the
rejection rule compares distributions that were shaped identically. Temperature 0 is greedy:
the argmax gets probability 1, and the same rejection rule then accepts a draft token exactly
when it is the target's argmax.
"""

from __future__ import annotations

import torch

from specviz.config import SamplingConfig


def probabilities(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """logits [..., V] (any float dtype) -> probabilities [..., V] float32, rows sum to 1."""
    logits = logits.float()
    if sampling.greedy:
        # One-hot at the argmax; torch.argmax breaks ties by the lowest id, as transformers does.
        index = logits.argmax(dim=-1, keepdim=True)
        return torch.zeros_like(logits).scatter_(-1, index, 1.0)

    logits = logits / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p is not None and sampling.top_p < 1.0:
        probs = _keep_top_p(probs, sampling.top_p)
    return probs


def _keep_top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p, renormalised."""
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    # A token stays if the tokens more likely than it hold less than top_p (the first always stays).
    keep_sorted = mass_before < top_p
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def draw(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One token id drawn from probs [V] (rows need not sum to exactly 1).

    Inverse CDF: the first id whose cumulative probability exceeds u ~ U[0, total). A token of
    probability 0 adds nothing to the cumulative sum, so it can never be drawn. Much faster than
    torch.multinomial on a large vocabulary, which matters once per draft (docs/benchmarks.md,
    "Figures once kept in code comments", "Sampling").
    """
    cdf = probs.double().cumsum(-1)  # float64: no rounding drift over a large vocabulary
    u = torch.rand(1, generator=generator, device=generator.device, dtype=torch.float64).to(cdf.device) * cdf[-1]
    index = int(torch.searchsorted(cdf, u, right=True))
    if index >= probs.shape[-1]:  # u within rounding of the total: the last token with mass
        index = int(probs.nonzero()[-1, 0])
    return index
