"""Block verification (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh 2024, "Block
verification accelerates speculative decoding", arXiv 2403.10444, Algorithm 2).

Pure functions of tensors, like specviz.decoding.verify. p is always the target's distribution, q
the draft's. Token-by-token verification (Algorithm 1) tests each draft on its own: draft i passes
with min(1, p/q) and the first failure ends the iteration. Block verification looks at the g drafts
of a chain together. It carries a weight along the chain,

    w_0 = 1,   w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i))        (x_i: the i-th draft)

(w_i is how much of the target's mass for the prefix x_1..x_i the drafts still cover: a draft with
p > q stores its surplus for the drafts after it, where token-by-token throws it away), and a stop
probability for each prefix,

    h_i = m_i / (m_i + 1 - w_i),   m_i = sum_x max(0, w_i p_i(x) - q_i(x))   (i < g),   h_g = w_g.

Then it draws eta_1..eta_g ~ U(0, 1), keeps tau = the largest i with eta_i < h_i (0 when none), and
ends the iteration with a token drawn from the block residual max(0, w_tau p_tau - q_tau) / m_tau,
or, when tau = g, with the bonus from p_g. At tau = 0 (w_0 = 1) the block residual is the token
rule's norm(max(0, p - q)); further along it is not, so the trace calls that correction
"block_resample".

Why it is exact. (a) P(tau >= i | x_1..x_i) = w_i: at i = g by the last draw, and below by
induction, since the drafts after i keep going with probability sum_y min(w_i p_i(y), q_i(y)) =
w_i - m_i, and otherwise (probability 1 - w_i + m_i) the stop at i is taken with h_i, adding m_i.
(b) So the iteration emits at least i + 1 tokens starting with x_1..x_i, followed by y, with
probability Q(x_1..x_i) (min(w_i p_i(y), q_i(y)) + max(0, w_i p_i(y) - q_i(y))) =
Q(x_1..x_i) w_i p_i(y): the token after any kept prefix is distributed as p. (c) When the block
ends after a prefix, the next iteration's first token is p's, which is (b) at i = 0. So every token
of the text is drawn from p given the text before it. tests/test_block_verify.py checks this by
exact enumeration, with a wrong weight as its negative control.

Why it accepts as much or more. The token rule keeps x_1..x_i with probability
prod_j min(1, p/q) <= w_i, and (a) says block keeps it with probability w_i; the paper proves it is
the most any rule that sees only the chain's p and q can keep in expectation.

Greedy (T = 0): p and q are one-hot, so every w and h is 0 or 1 and tau is the first draft that is not
the target's argmax, whose block residual is the argmax itself: the target's greedy text. A draft
tree keeps the exact rule (recursive rejection sampling); with rule "block" the decoder drafts a chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.decoding.verify import Verdict, _draw, accept_probability


@dataclass
class BlockNumbers:
    """The per-prefix numbers of block verification for one chain of g drafts."""

    weights: torch.Tensor  # [g + 1] w_0 = 1, ..., w_g
    masses: torch.Tensor  # [g] m_i = sum_x max(0, w_i p_i(x) - q_i(x)) for i < g
    h: torch.Tensor  # [g + 1] the probability of stopping after prefix i (h_0 = 1: tau >= 0 always)


def block_numbers(draft_tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor) -> BlockNumbers:
    """draft_tokens [g], q [g, V], p [g + 1, V] -> the weights, residual masses and stop probabilities.

    Where m_i + 1 - w_i is 0 (w_i = 1 and p_i = q_i) the chain continues past i with probability 1, so
    h_i is never consulted; it is set to 1 to keep the function total."""
    g = draft_tokens.shape[0]
    rows = torch.arange(g, device=draft_tokens.device)
    ratio = p[rows, draft_tokens] / q[rows, draft_tokens]  # [g]; q(x) > 0: the draft proposed x
    weights = [torch.ones((), dtype=p.dtype, device=p.device)]
    for i in range(g):
        weights.append(torch.clamp(weights[-1] * ratio[i], max=1.0))
    w = torch.stack(weights)  # [g + 1]
    masses = torch.clamp(w[:g, None] * p[:g] - q, min=0.0).sum(dim=-1)  # [g]
    denominator = masses + 1.0 - w[:g]
    inner = torch.where(denominator > 0, masses / denominator.clamp(min=1e-30), torch.ones_like(masses))
    h = torch.cat([inner, w[g:]]).clamp(0.0, 1.0)  # [g + 1]
    return BlockNumbers(w, masses, h)


def block_residual(p_row: torch.Tensor, q_row: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """max(0, w p - q), normalised: [V]. Empty only when stopping there has probability 0; then p."""
    residual = torch.clamp(weight * p_row - q_row, min=0.0)
    mass = residual.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, residual / mass.clamp(min=1e-30), p_row)


def stop_probabilities(h: torch.Tensor) -> torch.Tensor:
    """h [g + 1] -> P(tau = i | the chain) [g + 1]: h_i times the chance that every later stop failed
    (h_0 is 1, so tau = 0 takes what is left)."""
    from_i = torch.flip(torch.cumprod(torch.flip(1.0 - h, [0]), 0), [0])  # [g + 1] prod_{j >= i} (1 - h_j)
    after = torch.cat([from_i[1:], torch.ones(1, dtype=h.dtype, device=h.device)])  # prod_{j > i}
    return h * after


def verify_block(
    draft_tokens: torch.Tensor,  # [g] int64
    q: torch.Tensor,  # [g, V] draft probabilities at each draft position
    p: torch.Tensor,  # [g + 1, V] target probabilities; row g is for the bonus
    generator: torch.Generator,
    greedy: bool,
) -> Verdict:
    """Block verification of one chain: how many drafts to keep and the token that ends the iteration.

    The Verdict's accept_prob stays the token rule's min(1, p/q) (the trace's meaning of it); r holds
    eta_1..eta_g, draft j's being the test of stopping after it (eta_{j+1} < h_{j+1}); `block` holds
    the weights and h; `residual` the block residual the correction was drawn from."""
    g = draft_tokens.shape[0]
    rows = torch.arange(g, device=draft_tokens.device)
    accept_prob = accept_probability(p[rows, draft_tokens], q[rows, draft_tokens])  # [g]
    numbers = block_numbers(draft_tokens, q, p)
    if greedy:  # every h is exactly 0 or 1: no draw is needed
        r = None
        stops = numbers.h[1:] >= 1.0
    else:
        r = torch.rand(g, generator=generator, device=p.device)
        stops = r < numbers.h[1:]
    passed = stops.nonzero()
    tau = int(passed[-1, 0]) + 1 if passed.numel() else 0
    if tau == g:
        return Verdict(g, accept_prob, r, "bonus", _draw(p[g], generator, greedy), None, numbers)
    residual = block_residual(p[tau], q[tau], numbers.weights[tau])
    token = _draw(residual, generator, greedy)
    return Verdict(tau, accept_prob, r, "block_resample", token, residual, numbers)
