"""The dynamic tree at T>0 (specviz.drafters.sampled_tree), checked on synthetic p and q.

Each node's children are drawn from q without replacement, the node's child count decided before
they are drawn, and the walk tests child b with min(1, p_b(x) / q_b(x)). Over a tiny vocabulary the
output has a closed form, enumerated here over every draw: the first token, and the first two through
a depth-2 node, must be distributed as p, with the child counts of the real budget; and a rerank that
drops a drawn child because its q(x) was low must not be. Then the real sample_tree (a stand-in head
giving known q) and walk_tree are sampled and compared with p by chi-square.
"""

from __future__ import annotations

import pytest
import torch

from specviz.decoding.tree_walk import walk_tree
from specviz.decoding.verify import residual_distribution
from specviz.drafters.head_tree import Nodes
from specviz.drafters.sampled_tree import LevelBudget, coverage_gains, sample_tree, without_replacement

pytestmark = pytest.mark.quick

V = 5
WIDTH = 3
# v(rows) in one-row steps: flat to 6 rows, then steep, so the budget gives the second level one or two
# children, to the nodes whose drawn values make them the best: counts that vary with the draws
KNEE = [0.0, 1.0, 1.02, 1.04, 1.06, 1.08, 1.1] + [2.5 + 0.3 * i for i in range(11)]


def tables(seed: int):
    """p and q after the text [V] and after a first token y [V, V] (row y), float64."""
    gen = torch.Generator().manual_seed(seed)

    def dist(*shape):
        x = torch.rand(*shape, V, generator=gen, dtype=torch.float64) ** 2
        return x / x.sum(-1, keepdim=True)

    return dist(), dist(V), dist(), dist(V)  # p1, p2, q1, q2


def budget(v=KNEE) -> LevelBudget:
    return LevelBudget(list(v), draft_cost=0.5, most=16, width=WIDTH)


def draws(q: torch.Tensor, count: int, taken=()):
    """Every ordered draw of up to `count` different tokens from q without replacement ->
    (tokens, q_b of each, probability)."""
    if count == 0 or len(taken) == V:
        yield [], [], 1.0
        return
    q_b = q.clone()
    q_b[list(taken)] = 0.0
    q_b = q_b / q_b.sum()
    for x in range(V):
        if q_b[x] > 0:
            for rest, qs, prob in draws(q, count - 1, (*taken, x)):
                yield [x, *rest], [q_b, *qs], float(q_b[x]) * prob


def level_output(p: torch.Tensor, tokens: list[int], qs: list[torch.Tensor]):
    """One node's closed form: {token: P(the walk moves to that child)} and the correction's mass [V]
    (every child rejected, then a draw from the last residual)."""
    moves, p_b, reach = {}, p, 1.0
    for x, q_b in zip(tokens, qs, strict=True):
        a = min(1.0, float(p_b[x] / q_b[x]))
        moves[x] = reach * a
        reach *= 1 - a
        p_b = residual_distribution(p_b, q_b)
    return moves, reach * p_b


def first_two_output(p1, p2, q1, q2, drop_below: float = 0.0) -> torch.Tensor:
    """Exact joint distribution [V, V] of the first two tokens emitted, over every draw of the tree:
    the root's children drawn from q1, the count of each, and of each child's children (drawn from
    q2[y]), from the real LevelBudget, decided before they are drawn. drop_below > 0: a rerank by value
    drops a drawn child of the root whose q(x) is below it (wrong). After a correction at the root the
    second token is the next iteration's, from p2; at a leaf it is the bonus, from p2 too."""
    out = torch.zeros(V, V, dtype=torch.float64)
    plan = budget()
    root = plan.counts([1.0], q1[None])[0]
    for tokens, qs, prob in draws(q1, root):
        kept = [(x, q_b) for x, q_b in zip(tokens, qs, strict=True) if q1[x] >= drop_below]
        level = budget()
        level.spend([float(q1[x]) for x, _ in kept])
        counts = level.counts([float(q1[x]) for x, _ in kept], q2[[x for x, _ in kept]]) if kept else []
        moves, correction = level_output(p1, [x for x, _ in kept], [q_b for _, q_b in kept])
        out += prob * correction[:, None] * p2
        for (y1, _), count in zip(kept, counts, strict=True):
            for tokens2, qs2, prob2 in draws(q2[y1], count):
                moves2, correction2 = level_output(p2[y1], tokens2, qs2)  # a leaf: no moves, the bonus
                out[y1] += prob * moves[y1] * prob2 * correction2
                for y2, m in moves2.items():
                    out[y1, y2] += prob * moves[y1] * prob2 * m
    return out


@pytest.mark.parametrize("seed", range(8))
def test_children_drawn_without_replacement_emit_the_first_two_tokens_as_p(seed):
    p1, p2, q1, q2 = tables(seed)
    joint = first_two_output(p1, p2, q1, q2)
    torch.testing.assert_close(joint.sum(1), p1, atol=1e-12, rtol=0)  # the first token
    torch.testing.assert_close(joint, p1[:, None] * p2, atol=1e-12, rtol=0)  # through a depth-2 node


def test_the_budget_gives_different_counts_in_the_enumeration():
    """So the enumeration above covers counts that vary with what was drawn, not one fixed shape."""
    p1, p2, q1, q2 = tables(0)
    root = budget().counts([1.0], q1[None])[0]
    shapes = set()
    for tokens, _, _ in draws(q1, root):
        level = budget()
        level.spend([float(q1[x]) for x in tokens])
        shapes.add(tuple(level.counts([float(q1[x]) for x in tokens], q2[tokens])))
    assert root == 3 and len(shapes) > 3 and any(2 in s for s in shapes) and all(0 in s for s in shapes)


def test_a_rerank_that_drops_a_drawn_child_by_its_q_breaks_the_output():
    wrong = [first_two_output(*tables(s), drop_below=0.15).sum(1) - tables(s)[0] for s in range(6)]
    broken = [s for s, w in enumerate(wrong) if w.abs().max() > 1e-3]
    assert len(broken) >= 5


def test_draws_without_replacement_keep_the_q_they_came_from():
    q = torch.tensor([0.5, 0.3, 0.2, 0.0])
    drawn = without_replacement(q, 4, torch.Generator().manual_seed(0))
    assert len(drawn) == 3 and len({t for t, _ in drawn}) == 3  # q holds three tokens
    torch.testing.assert_close(drawn[0][1], q)
    first = drawn[0][0]
    want = q.clone()
    want[first] = 0
    torch.testing.assert_close(drawn[1][1], want / want.sum())


def test_a_childs_coverage_gain_is_the_sum_of_q_squared_times_its_misses():
    """Entry c - 1 is sum_i q_i^2 (1 - q_i)^(c-1), for every node of a level."""
    q = torch.softmax(torch.randn(3, 50, generator=torch.Generator().manual_seed(1)) * 3, dim=-1).double()
    q[2, 5:] = 0.0  # a node whose q holds five tokens: a sixth child can add nothing
    q[2] /= q[2].sum()
    gains = coverage_gains(q, 6)
    for node in range(3):
        for c in range(1, 7):
            held = int((q[node] > 0).sum())  # no more distinct children than tokens q holds
            want = float((q[node] ** 2 * (1 - q[node]) ** (c - 1)).sum()) if c <= held else 0.0
            assert abs(float(gains[node, c - 1]) - want) < 1e-6, (node, c)
    assert float(gains[2, 5]) == 0.0 and float(gains[2, 4]) > 0.0


def test_the_budget_follows_the_cost_and_reads_q_as_a_distribution():
    q = torch.tensor([[0.7, 0.2, 0.1, 0.0, 0.0]])
    gains = coverage_gains(q, 4)[0]
    assert abs(float(gains[0]) - float((q * q).sum())) < 1e-6  # a first draw: sum q^2
    assert float(gains[3]) == 0.0 and bool((gains[:3] > 0).all())  # q holds three tokens
    flat = LevelBudget([0.0] + [1.0] * 18, 0.0, most=16, width=4)
    assert flat.counts([1.0], q) == [3]  # every row free: as many as q can give
    wall = LevelBudget([float(r) for r in range(19)], 0.0, most=16, width=4)
    assert wall.counts([1.0], q) == [1]  # each row a whole step: the root still gets one
    wall.spend([0.7])
    assert wall.counts([0.7], q) == [0]


class StandInHead:
    """A head whose q after node token y is Q2[y]: the tree_step level_pass calls."""

    def __init__(self, q2: torch.Tensor):
        self.logits = q2.float().log()

    def tree_step(self, features, tokens, positions, cache, allowed):
        return features, self.logits[tokens]  # [m, D], [m, S]


class NoCache:
    length = 0


def test_the_real_sampled_tree_and_walk_sample_p():
    scipy_stats = pytest.importorskip("scipy.stats")
    p1, p2, q1, q2 = tables(3)
    head, gen = StandInHead(q2), torch.Generator().manual_seed(11)
    p_rows = torch.cat([p1[None], p2]).float()  # row 0: after the text, row 1 + y: after token y
    n, counts, deep = 2500, torch.zeros(V, V), 0
    for _ in range(n):
        tree = sample_tree(
            head, torch.zeros(1), q1.float().log(), 4, 2, NoCache(), budget(), lambda lg: lg.softmax(-1), gen
        )
        assert tree.q is not None and int(tree.depth.max()) <= 2
        parent_tokens = torch.where(tree.parents >= 0, tree.tokens[tree.parents.clamp(min=0)], -1)
        p_fed = torch.cat([p_rows[:1], p_rows[1 + tree.tokens]])  # depth-1 rows; depth-2 rows unused here
        kept, verdict, walk = walk_tree(tree, p_fed, gen, greedy=False)
        emitted = kept.drafts[: verdict.accepted_count].tolist() + [verdict.correction_token]
        if len(emitted) < 2:
            emitted.append(int(torch.multinomial(p2[emitted[0]].float(), 1, generator=gen)))
        counts[emitted[0], emitted[1]] += 1
        deep += len(walk.path) == 2
        for level in walk.tests:  # every test recorded with the q_b its token came from
            for test in level:
                assert abs(test.q - float(tree.q[test.branch, test.token])) < 1e-6 and test.q < 1
        assert bool((parent_tokens[tree.depth == 1] == -1).all())
    expected = (p1[:, None] * p2 * n).flatten()
    keep = expected > 5
    observed = counts.flatten()[keep].double()
    want = expected[keep] * observed.sum() / expected[keep].sum()
    assert scipy_stats.chisquare(observed.numpy(), want.numpy()).pvalue > 0.001
    assert deep > 0


def test_nodes_keep_the_draw_order():
    nodes = Nodes()
    q = torch.tensor([0.1, 0.6, 0.3])
    for token in (2, 1, 0):  # drawn in this order, scores not falling
        nodes.add(-1, token, float(q[token]), q)
    tree = nodes.tree("cpu")
    assert tree.children(-1) == [0, 1, 2] and tree.tokens.tolist() == [2, 1, 0]
    assert tree.subset([0, 1, 2]).tokens.tolist() == [2, 1, 0]  # not re-sorted by score
