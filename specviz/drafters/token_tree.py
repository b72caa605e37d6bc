"""A general draft tree (EAGLE-2, Li et al. 2024): nodes in level order given by a parent array, and
how many of them to send to the target.

    node i   token t_i, parent parent_i (-1: the root, the position after the text), depth d_i
             (1 for the root's children: the number of drafts on its path), score s_i (its path
             score: the product of the draft's probabilities along the path)

Parents precede children. At T=0 the tokens are chosen (the head's top ones), each node's q is a point
mass on its token and the children of one node come in order of score; at T>0 they are drawn
(specviz.drafters.sampled_tree), each node keeps the distribution it was drawn from (`q`), and the
children of one node come in the order they were drawn. The exact walk (specviz.decoding.tree_walk)
tests them in that order.

`rerank` keeps the best n nodes by score (a node only with its parent: a child's score is at most
its parent's), `choose_budget` picks n from the measured cost of a pass of n + 1 rows, and
`without_descendants_of` drops what follows an end of sequence. Everything here reads only the
draft's scores, never p, so the output stays exact whatever tree is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TokenTree:
    """A draft tree in level order. All tensors [N] on one device."""

    tokens: torch.Tensor  # [N] int64
    parents: torch.Tensor  # [N] int64, -1 for the root's children, else an earlier node
    depth: torch.Tensor  # [N] int64, 1 for the root's children
    score: torch.Tensor  # [N] float32, the path score
    q: torch.Tensor | None = None  # [N, V] q_b: the distribution node i was drawn from; None: point masses

    @property
    def size(self) -> int:
        return int(self.tokens.shape[0])

    def children(self, node: int) -> list[int]:
        """The children of `node` (-1: the root), in order of score (as stored)."""
        return (self.parents == node).nonzero()[:, 0].tolist()

    def to(self, device) -> TokenTree:
        q = None if self.q is None else self.q.to(device)
        moved = (self.tokens.to(device), self.parents.to(device), self.depth.to(device), self.score.to(device))
        return TokenTree(*moved, q)

    def subset(self, keep: list[int]) -> TokenTree:
        """The nodes `keep` (parent-closed), in level order, parents renumbered; children by score when
        chosen, in the order drawn when sampled (each one's q_b leaves out the siblings drawn before it)."""
        if self.q is None:
            order = sorted(keep, key=lambda i: (int(self.depth[i]), -float(self.score[i]), i))
        else:
            order = sorted(keep, key=lambda i: (int(self.depth[i]), i))
        new_index = {old: new for new, old in enumerate(order)}
        idx = torch.tensor(order, dtype=torch.long, device=self.tokens.device)
        parents = [new_index[p] if p >= 0 else -1 for p in self.parents[idx].tolist()]
        return TokenTree(
            self.tokens[idx],
            torch.tensor(parents, dtype=torch.long, device=idx.device),
            self.depth[idx],
            self.score[idx],
            None if self.q is None else self.q[idx],
        )

    def without_descendants_of(self, token: int | None) -> TokenTree:
        """The tree with nothing below a node of `token` (an end of sequence: nothing follows it). Exact
        for a drawn tree too: it sets a node's child count to 0 from the node's own token, never from
        the values of its children."""
        if token is None:
            return self
        dropped: set[int] = set()
        for i, p in enumerate(self.parents.tolist()):
            if p >= 0 and (p in dropped or int(self.tokens[p]) == token):
                dropped.add(i)
        return self if not dropped else self.subset([i for i in range(self.size) if i not in dropped])


def rerank(tree: TokenTree, n: int) -> TokenTree:
    """The best `n` nodes by path score, a node only with its parent (EAGLE-2's reranking)."""
    return tree.subset(ranked(tree)[:n])


def ranked(tree: TokenTree) -> list[int]:
    """Node indices best first. A child's score is at most its parent's and ties go to the shallower
    node, so every prefix of this order is parent-closed."""
    return sorted(range(tree.size), key=lambda i: (-float(tree.score[i]), int(tree.depth[i]), i))


def choose_budget(scores: list[float], v: list[float], draft_cost: float, most: int) -> int:
    """How many nodes to send, n in 1..min(most, len(scores)): the n that maximises the expected tokens
    per unit of time, (1 + the n best path scores) / (v(1 + n) + draft_cost). scores best first; v[r]
    the measured cost of a target pass of r new rows in one-row steps (specviz.engine.verify_cost);
    draft_cost the drafting's, in the same unit."""
    best, best_rate, total = 1, -1.0, 1.0
    for n in range(1, min(most, len(scores), len(v) - 2) + 1):
        total += scores[n - 1]
        rate = total / (v[n + 1] + draft_cost)
        if rate > best_rate:
            best, best_rate = n, rate
    return best


def chain_parents(g: int, device=None) -> torch.Tensor:
    """The parent array of a chain of g drafts: [-1, 0, 1, ..., g - 2]."""
    return torch.arange(-1, g - 1, device=device)
