"""The draft tree: a visible extension of Algorithm 1's chain (specviz.decoding.decoder).

The chain is the paper's case (`chain`): one branch of g drafts, verified by one target pass that
gives p before each draft and after the last; steps (3)-(5) judge it as it is, cut at a drafted
end of sequence.

A tree is the extension (`keep_branch`): a drafter may propose k branches of g drafts that start
with different first tokens (specviz.drafters.draft_tree). The target's single pass verifies
every branch (a tree attention mask: a draft sees the text and its own branch's earlier drafts),
and one branch is kept by recursive rejection sampling over the first tokens
(specviz.decoding.verify.choose_branch): the first candidate that passes its test, each test made
against what the earlier rejections left of p. At T=0 that is the branch starting with the
target's own choice. From there it is the chain algorithm on that branch, with p from the same
pass (its first row the p its first token was tested against), so steps (3)-(5) and every
recorded number keep their meaning; the rejected first tokens and the other branches are recorded
in the trace's `tree`.

`kept_drafts` is the one door: a chain keeps itself, a tree keeps one branch, and either comes
back as a KeptBranch for steps (3)-(5). `until_eos` cuts drafts at their first end of sequence:
nothing follows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.decoding.verify import FirstTest, choose_branch


@dataclass
class KeptBranch:
    """The branch of a draft tree that the iteration goes on with, as a chain (a chain keeps itself)."""

    index: int  # which branch (0: the drafter's first choice)
    drafts: torch.Tensor  # [g] its drafts, up to an end of sequence
    q: torch.Tensor  # [g, V] the distributions they were drawn from
    p: torch.Tensor  # [g + 1, V] row 0: what the first draft is tested against (what earlier rejections left)
    rows: torch.Tensor  # [g] its drafts' indices among the k*g drafts fed (level by level)
    first_r: torch.Tensor | None  # [1] the first draft's draw, made while choosing (None: verify draws it)
    others: torch.Tensor | None  # [k - 1, g] the branches not kept (None for a chain)
    rejected: list[FirstTest] | None  # the first tokens rejected before the kept one (None for a chain)


def kept_drafts(tree, q_tree, p_fed, generator, greedy: bool, eos) -> KeptBranch:
    """What steps (3)-(5) judge, from tree [k, g], q_tree [k, g, V] and the pass's p_fed [1 + k*g, V]."""
    if tree.shape[0] == 1:  # the paper's chain: p before each draft and after the last
        return chain(tree[0], q_tree[0], p_fed, eos)
    # the extension: a tree keeps one branch (recursive rejection sampling over its first tokens)
    return keep_branch(tree, q_tree, p_fed, generator, greedy, eos)


def chain(drafts: torch.Tensor, q: torch.Tensor, p_fed: torch.Tensor, eos) -> KeptBranch:
    """The paper's case: drafts [g] with q [g, V] and the pass's p_fed [1 + g, V] (row j: p before
    draft j; row g: after the last), cut at a drafted end of sequence."""
    drafts, q = until_eos(drafts, q, eos)
    g = drafts.shape[0]
    rows = torch.arange(g, device=drafts.device)  # [g] the drafts' rows among those fed
    return KeptBranch(0, drafts, q, p_fed[: g + 1], rows, None, None, None)


def keep_branch(tree, q_tree, p_fed, generator, greedy: bool, eos) -> KeptBranch:
    """Of tree [k, g] with q_tree [k, g, V] and the pass's p_fed [1 + k*g, V] (row 0: the position
    before the drafts, then the drafts level by level), keep one branch by recursive rejection
    sampling over the first drafts (specviz.decoding.verify.choose_branch; at T=0 the target's own choice)."""
    k, g = tree.shape
    if k == 1 or g == 0:
        index, p_first, first_r, rejected = 0, p_fed[0], None, []
    else:
        index, p_first, first_r, rejected = choose_branch(tree[:, 0], q_tree[:, 0], p_fed[0], generator, greedy)
    drafts, q = until_eos(tree[index], q_tree[index], eos)
    rows = (torch.arange(g, device=tree.device) * k + index)[: drafts.shape[0]]
    p = torch.cat([p_first[None], p_fed[1 + rows]])  # [g + 1, V]
    if k == 1:
        return KeptBranch(index, drafts, q, p, rows, first_r, None, None)
    others = tree[[b for b in range(k) if b != index]]
    return KeptBranch(index, drafts, q, p, rows, first_r, others, rejected)


def until_eos(drafts: torch.Tensor, q: torch.Tensor, eos: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """drafts [g], q [g, V] up to and including the first end of sequence: nothing follows it."""
    if eos is None:
        return drafts, q
    hits = (drafts == eos).nonzero()
    if hits.numel():
        end = int(hits[0, 0]) + 1
        return drafts[:end], q[:end]
    return drafts, q
