"""The verification step of speculative sampling (Leviathan et al. 2023, Algorithm 1).

Pure functions of tensors. p is always the target's distribution, q the draft's.

    accept draft token x with probability min(1, p(x) / q(x))
    at the first rejection, resample from norm(max(0, p - q))   (the residual)
    if all gamma drafts pass, sample a bonus token from the target's next distribution

Beside the exact rule live variants a student might invent. They exist so the distribution lab
and the tests can show which of them change the output distribution: accepting on a token match
then resampling from the residual, and resampling from p, do; skipping the bonus does not (it
only wastes a target pass), which is itself worth seeing. Block verification (Sun et al. 2024),
exact and keeping as many drafts or more in expectation, lives in specviz.decoding.block.

A draft tree offers several first tokens (`choose_branch`, recursive rejection sampling as in
SpecInfer, Miao et al. 2024, and Jeon et al. 2024): candidate b, drawn from q_b, is tested with
min(1, p_b(x)/q_b(x)); at a rejection p_{b+1} = norm(max(0, p_b - q_b)), the residual, so each
test is the chain's test and resample in one. The first candidate to pass is kept; when all fail
the last is kept, rejected, and `verify` resamples from its residual. At every stage the output is
distributed as p_b, so as p: the tree is exact at any temperature when q_b is the distribution
candidate b was drawn from (at T=1 the head draws its candidates without replacement, so q_b is q
without the earlier candidates). At T=0 the test passes only the target's argmax and the residual
of a rejected guess is p itself, so the branch kept is the one starting with the target's choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from specviz.engine.sampling import draw

RULES = ("exact", "block", "accept_if_equal", "resample_from_p", "no_bonus")
WRONG_RULES = ("accept_if_equal", "resample_from_p")  # these change the output distribution
RULE_LABELS = {
    "exact": "Exact rule (Leviathan et al.): accept with min(1, p/q), resample from the residual",
    "block": "Block verification (Sun et al. 2024): the chain's drafts tested together, never fewer "
    "kept in expectation; exact too",
    "accept_if_equal": "WRONG: accept only when the draft token equals a sample from p, "
    "then resample from the residual",
    "resample_from_p": "WRONG: after a rejection, resample from p instead of the residual",
    # Not wrong after all: the token after a full acceptance then comes from the next iteration's
    # exact verification, so the output is still distributed as p; it only costs an extra
    # iteration. The lab shows it as a variant that is correct but slower.
    "no_bonus": "CORRECT BUT SLOWER: skip the bonus token; after all accepts, draft again",
}
RULE_NAMES = {  # the same rules named in a few words, for a menu; RULE_LABELS says what each does
    "exact": "Correct rule (Algorithm 1)",
    "block": "Correct and keeps more: block verification",
    "accept_if_equal": "Wrong: accept only if equal to a sample from p",
    "resample_from_p": "Wrong: resample from p, not the residual",
    "no_bonus": "Correct but slower: skip the bonus token",
}


@dataclass
class Verdict:
    """What one verification decided. Tensors stay on the model's device until recorded."""

    accepted_count: int  # n: drafts 0..n-1 were accepted, draft n (if any) was rejected
    accept_prob: torch.Tensor  # [gamma] min(1, p(x)/q(x)) for each draft token
    r: torch.Tensor | None  # [gamma] uniform draws; None when greedy (no randomness needed)
    correction_kind: str | None  # "resample", "block_resample", "bonus", or None (only for the no-bonus variant)
    correction_token: int | None
    residual: torch.Tensor | None  # [V] norm(max(0, p - q)) at the rejected position (block: its own residual)
    block: Any = None  # block verification's weights and stop probabilities (specviz.decoding.block.BlockNumbers)


def accept_probability(p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
    """min(1, p(x)/q(x)) elementwise. q(x) > 0 because the draft proposed x."""
    return torch.clamp(p_x / q_x, max=1.0)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) over the last axis.

    When p == q the residual is all zeros, but then a rejection has probability 0; we return p
    so the function is total (and exact: any distribution would do for a zero-probability event).
    """
    residual = torch.clamp(p - q, min=0.0)
    mass = residual.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, residual / mass.clamp(min=1e-30), p)


def beta(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """sum_x min(p(x), q(x)): the probability that the draft token is accepted. [..., V] -> [...]"""
    return torch.minimum(p, q).sum(dim=-1)


@dataclass
class FirstTest:
    """A draft tree's first token tested and rejected before the branch kept (see choose_branch)."""

    branch: int
    token: int
    p: float  # p_b(x): the stage's target distribution at the token
    q: float  # q_b(x): the distribution the candidate was drawn from
    accept_prob: float
    r: float | None  # None when greedy


def choose_branch(
    first_tokens: torch.Tensor,  # [k] int64: each branch's first draft
    q_first: torch.Tensor,  # [k, V] q_b: the distribution candidate b was drawn from
    p_first: torch.Tensor,  # [V] the target's p at the first draft position
    generator: torch.Generator,
    greedy: bool,
) -> tuple[int, torch.Tensor, torch.Tensor | None, list[FirstTest]]:
    """Recursive rejection sampling over the first tokens of a draft tree's k branches.

    -> (the branch kept, p_b [V] its first token is tested against, r_b [1] the draw of that test
    (None when greedy), the tests of the branches rejected before it). `verify` then runs the
    kept branch as a chain with p_b as its first row and r_b as its first draw: if candidate b
    passed it passes again there; if it was the last and failed, verify resamples from
    norm(max(0, p_b - q_b)). Both outcomes are the b-th stage of the rule, so the output is exact."""
    p_b, rejected = p_first, []
    k = first_tokens.shape[0]
    for b in range(k):
        x = int(first_tokens[b])
        accept_prob = accept_probability(p_b[x], q_first[b, x])
        r = None if greedy else torch.rand(1, generator=generator, device=p_b.device)
        passed = bool(accept_prob >= 1.0) if greedy else bool(r[0] < accept_prob)
        if passed or b == k - 1:
            return b, p_b, r, rejected
        rejected.append(
            FirstTest(b, x, float(p_b[x]), float(q_first[b, x]), float(accept_prob), None if r is None else float(r[0]))
        )
        p_b = residual_distribution(p_b, q_first[b])
    raise ValueError("a draft tree needs at least one branch")


def verify(
    draft_tokens: torch.Tensor,  # [gamma] int64
    q: torch.Tensor,  # [gamma, V] draft probabilities at each draft position
    p: torch.Tensor,  # [gamma + 1, V] target probabilities; row gamma is for the bonus
    generator: torch.Generator,
    greedy: bool,
    rule: str = "exact",
    first_r: torch.Tensor | None = None,  # [1] the first draft's draw, already made (choose_branch)
) -> Verdict:
    """Decide how many drafts to keep and which token ends the iteration (rule "block" is
    specviz.decoding.block.verify_block, which the decoder calls instead)."""
    if rule == "block":
        raise ValueError("block verification is specviz.decoding.block.verify_block, not verify")
    gamma = draft_tokens.shape[0]
    positions = torch.arange(gamma, device=draft_tokens.device)
    p_x = p[positions, draft_tokens]  # [gamma]
    q_x = q[positions, draft_tokens]  # [gamma]
    accept_prob = accept_probability(p_x, q_x)

    if rule == "accept_if_equal":
        return _verify_accept_if_equal(draft_tokens, q, p, accept_prob, generator)

    if greedy:
        # p and q are one-hot, so accept_prob is exactly 1 or 0: no draw is needed.
        r = None
        accepted = accept_prob >= 1.0
    else:
        if first_r is None:
            r = torch.rand(gamma, generator=generator, device=p.device)
        else:  # the first test was drawn when the branch was chosen; the rest are drawn now
            r = torch.cat([first_r, torch.rand(gamma - 1, generator=generator, device=p.device)])
        accepted = r < accept_prob
    # n = index of the first rejection (gamma when every draft passed).
    rejected = (~accepted).nonzero()
    n = int(rejected[0, 0]) if rejected.numel() else gamma

    if n < gamma:
        if rule == "resample_from_p":
            corrected = p[n]
        else:
            corrected = residual_distribution(p[n], q[n])
        token = _draw(corrected, generator, greedy)
        return Verdict(n, accept_prob, r, "resample", token, corrected)
    if rule == "no_bonus" and gamma > 0:
        return Verdict(n, accept_prob, r, None, None, None)
    return Verdict(n, accept_prob, r, "bonus", _draw(p[gamma], generator, greedy), None)


def _draw(probs: torch.Tensor, generator: torch.Generator, greedy: bool) -> int:
    if greedy:
        return int(probs.argmax())
    return draw(probs, generator)


def _verify_accept_if_equal(
    draft_tokens: torch.Tensor,
    q: torch.Tensor,
    p: torch.Tensor,
    accept_prob: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """WRONG rule: keep a draft only if it equals a token drawn from p; on a mismatch, resample
    from the residual as the exact rule does.

    It mixes two schemes. Keeping x with probability p(x) (instead of min(1, p(x)/q(x))) and then
    drawing from norm(max(0, p - q)) over-weights tokens the draft dislikes, so the output is
    no longer distributed as p. (Emitting the target's own sample at a mismatch would be exact:
    the output would always be that sample. The residual is the mistake.)
    """
    gamma = draft_tokens.shape[0]
    for i in range(gamma):
        target_token = draw(p[i], generator)
        if target_token != int(draft_tokens[i]):
            corrected = residual_distribution(p[i], q[i])
            return Verdict(i, accept_prob, None, "resample", draw(corrected, generator), corrected)
    return Verdict(gamma, accept_prob, None, "bonus", draw(p[gamma], generator), None)
