"""The draft head's dynamic tree at T>0 (EAGLE-2's shape, SpecInfer's sampling): each node's children
are drawn from the head's q at that node without replacement, and how many a node gets is decided
before any of them is drawn.

    level 1     the root (the position after the text) gets c children, c from its q as a distribution
    level d+1   the nodes drawn at level d (at most `width`) are run through the head in ONE pass
                (head_tree.level_pass); each gets a child count from its path score and its q, then
                its children are drawn
    children    candidate b of a node is drawn from q_b: its q with the earlier candidates removed,
                renormalised; the node keeps q_b, and the exact walk (specviz.decoding.tree_walk)
                tests it with min(1, p_b(x) / q_b(x))

Why the counts come first: the walk's rule is exact when each candidate is a draw from the q_b it is
tested with, given everything that decided it exists. A count that read the children's own values
(a rerank dropping a drawn child because its q(x) was low, as EAGLE-2 does at T=0) keeps only some
draws, and those are no longer draws from q_b (tests/test_sampled_tree.py shows the output moving).
So nothing drawn is ever dropped; which nodes are expanded, and with how many children, reads only
what was drafted before: path scores, q as a distribution, the nodes so far and the budget.

The budget (`LevelBudget`) is choose_budget's rule applied level by level: the expected tokens of the
tree, 1 + the sum of its nodes' path scores, per unit of time, v(1 + nodes) + the drafting's cost. A
child slot's worth is estimated before the draw as its parent's path score times the chance that the
c-th draw from q is a new token the target would pick, were the target's token drawn from q too
(`coverage_gains`); a level takes the slots (at most `width`) that maximise the rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.drafters.head_tree import Nodes, level_pass
from specviz.engine.sampling import draw


def coverage_gains(q: torch.Tensor, width: int) -> torch.Tensor:
    """q [m, V] -> [m, width]: entry c - 1 estimates what a node's c-th child adds to the chance that
    the target's token is among its children, taking that token drawn from q: sum_i q_i^2 (1 - q_i)^(c-1)
    (c draws with replacement cover sum_i q_i (1 - (1 - q_i)^c); without replacement they cover a little
    more, so this is a slight underestimate). 0 beyond the tokens q holds."""
    q = q.double()
    if width <= 0:
        return q.new_zeros(q.shape[0], 0).float()
    # One product per c, not a power of an [m, width, V] tensor: the power over the whole vocabulary in
    # float64 was a large share of the drafting (docs/benchmarks.md, "Both trees again").
    term, columns = q * q, []  # [m, V] q_i^2 (1 - q_i)^(c-1), from c = 1
    for _ in range(width):
        columns.append(term.sum(-1))
        term = term * (1 - q)
    gains = torch.stack(columns, dim=-1)  # [m, width]
    ordinal = torch.arange(width, device=q.device)  # [width] c - 1
    support = (q > 0).sum(-1, keepdim=True)  # [m, 1] at most that many distinct children
    return torch.where(ordinal[None, :] < support, gains, torch.zeros_like(gains)).float()


@dataclass
class LevelBudget:
    """The node budget of one sampled tree, spent level by level. v[r]: the measured cost of a target
    pass of r rows in one-row steps (specviz.engine.verify_cost); draft_cost the drafting's, in the
    same unit; most: the most nodes; width: the most nodes one level adds, and children one node gets."""

    v: list[float]
    draft_cost: float
    most: int
    width: int
    nodes: int = 0
    expected: float = 1.0  # 1 + the path scores of the nodes drawn so far

    def counts(self, scores: list[float], q: torch.Tensor) -> list[int]:
        """How many children each of a level's nodes gets (path scores [m], their q [m, V]), decided
        before any of them is drawn: the k best slots (node, c) by score x coverage gain, k maximising
        (expected + their worth) / (v(1 + nodes + k) + draft_cost); at least one at the root."""
        gains = coverage_gains(q, self.width) * torch.tensor(scores, dtype=torch.float32)[:, None]  # [m, width]
        room = max(0, min(self.width, self.most - self.nodes, len(self.v) - 2 - self.nodes))
        worth, slots = gains.flatten().sort(descending=True)
        worth, slots = worth[:room].tolist(), slots[:room].tolist()
        best_k, best_rate, total = 0, -1.0, self.expected
        for k in range(len(worth) + 1):
            if k and worth[k - 1] <= 0:  # a token q cannot draw again: worth nothing
                break
            total += worth[k - 1] if k else 0.0
            rate = total / (self.v[self.nodes + 1 + k] + self.draft_cost)
            if rate > best_rate and (k or self.nodes):  # the root always gets a child
                best_k, best_rate = k, rate
        counts = [0] * len(scores)
        for slot in slots[:best_k]:  # a node's slots fall in c, so it takes its first ones
            counts[slot // self.width] += 1
        return counts

    def spend(self, scores: list[float]) -> None:
        """The nodes just drawn, by path score."""
        self.nodes += len(scores)
        self.expected += sum(scores)


def without_replacement(q: torch.Tensor, count: int, generator: torch.Generator) -> list[tuple[int, torch.Tensor]]:
    """Up to `count` different tokens drawn from q [V] one after another, each from q with the earlier
    ones removed, renormalised -> [(token, q_b [V] it was drawn from)]. Fewer when q holds fewer."""
    out, remaining = [], q
    for _ in range(count):
        token = draw(remaining, generator)
        out.append((token, remaining))
        remaining = remaining.clone()
        remaining[token] = 0.0
        mass = remaining.sum()
        if not mass > 0:
            break
        remaining = remaining / mass
    return out


def sample_tree(head, f_last, logits_last, length: int, depth: int, cache, budget: LevelBudget, q_of, generator):
    """The head's sampled tree to `depth` levels: f_last [D] and logits_last [S] its last catch-up row,
    `length` the text's length, `cache` the head's cache after the catch-up (the levels' entries are
    appended), q_of: subset logits [..., S] -> q [..., V] at the run's sampling -> a TokenTree with q."""
    nodes, prefix = Nodes(), cache.length
    level, q = [-1], q_of(logits_last)[None]  # the root; q [1, V]
    for d in range(1, depth + 1):
        if d > 1:  # the head's q after each node of the last level: one pass for the whole level
            features, logits = level_pass(head, nodes, level, f_last, length + d - 2, cache, prefix)
            for row, node in enumerate(level):
                nodes.feature[node] = features[row]
            q = q_of(logits)  # [m, V]
        scores = [1.0 if u < 0 else nodes.score[u] for u in level]
        counts = budget.counts(scores, q)  # decided before any child is drawn
        first_new = len(nodes.tokens)
        for row, (node, count) in enumerate(zip(level, counts, strict=True)):
            for token, q_b in without_replacement(q[row], count, generator):
                nodes.add(node, token, scores[row] * float(q[row, token]), q_b)
        level = list(range(first_new, len(nodes.tokens)))
        budget.spend(nodes.score[first_new:])
        if not level:
            break
    return nodes.tree(f_last.device)
