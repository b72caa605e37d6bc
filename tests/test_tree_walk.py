"""The exact walk over a general draft tree (specviz.decoding.tree_walk), checked on synthetic p.

A tree whose tokens are chosen (q a point mass on each) is verified by testing a node's children in
order, each against what the earlier rejections left of p. The output of that walk has a closed form,
enumerated here over a tiny vocabulary: the first token, and the first two (through a depth-2 node),
must be distributed as p, and testing every child against p itself must not be. Then the real
`walk_tree` is sampled and compared with p by chi-square, and at T=0 it must keep the greedy path.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from specviz.decoding.tree_walk import walk_tree
from specviz.decoding.verify import residual_distribution
from specviz.drafters.token_tree import TokenTree, choose_budget, rerank

pytestmark = pytest.mark.quick

V = 5
# root -> tokens 0, 1, 2 (in order of score); node 0 (token 0) -> tokens 1, 3; node 1 (token 1) -> token 0.
# Token 3 and 4 are never a first draft, so the correction path runs too.
TOKENS = [0, 1, 2, 1, 3, 0]
PARENTS = [-1, -1, -1, 0, 0, 1]


def tree(tokens=TOKENS, parents=PARENTS) -> TokenTree:
    depth = []
    for p in parents:
        depth.append(1 if p < 0 else depth[p] + 1)
    n = len(tokens)
    return TokenTree(torch.tensor(tokens), torch.tensor(parents), torch.tensor(depth), torch.linspace(0.9, 0.1, n))


def tables(seed: int):
    """p after the text [V], and p after a first token y [V, V] (row y), float64."""
    gen = torch.Generator().manual_seed(seed)
    p1 = torch.rand(V, generator=gen, dtype=torch.float64) ** 2
    p2 = torch.rand(V, V, generator=gen, dtype=torch.float64) ** 2
    return p1 / p1.sum(), p2 / p2.sum(-1, keepdim=True)


def level_output(p: torch.Tensor, children: list[int], residual_update: bool = True):
    """The closed form of one level: {token: P(the walk moves to that child)} and the correction's
    mass [V] (all children rejected, then a draw from the last residual). residual_update=False tests
    every child against p itself (wrong)."""
    moves, p_b, reach = {}, p, 1.0
    for x in children:
        a = float(p_b[x])  # min(1, p_b(x) / 1)
        moves[x] = reach * a
        reach *= 1 - a
        if residual_update:
            one_hot = torch.zeros_like(p)
            one_hot[x] = 1.0
            p_b = residual_distribution(p_b, one_hot)
    return moves, reach * p_b


def first_two_output(p1, p2, residual_update=True) -> torch.Tensor:
    """Exact joint distribution [V, V] of the first two tokens the walk emits on TOKENS/PARENTS (after
    a correction at the root, the second token is the next iteration's: drawn from p2)."""
    t = tree()
    out = torch.zeros(V, V, dtype=torch.float64)
    moves, corr = level_output(p1, [TOKENS[i] for i in t.children(-1)], residual_update)
    out += corr[:, None] * p2
    for node in t.children(-1):
        y1 = TOKENS[node]
        kids = [TOKENS[i] for i in t.children(node)]
        moves2, corr2 = level_output(p2[y1], kids, residual_update) if kids else ({}, p2[y1])
        out[y1] += moves[y1] * corr2
        for y2, m in moves2.items():
            out[y1, y2] += moves[y1] * m
    return out


@pytest.mark.parametrize("seed", range(20))
def test_the_walk_emits_the_first_two_tokens_as_p(seed):
    p1, p2 = tables(seed)
    joint = first_two_output(p1, p2)
    torch.testing.assert_close(joint.sum(1), p1, atol=1e-12, rtol=0)  # the first token
    torch.testing.assert_close(joint, p1[:, None] * p2, atol=1e-12, rtol=0)  # through a depth-2 node


def test_testing_every_child_against_p_itself_breaks_the_formula():
    wrong = [first_two_output(*tables(s), residual_update=False).sum(1) - tables(s)[0] for s in range(20)]
    broken = [s for s, w in enumerate(wrong) if w.abs().max() > 1e-3]
    assert len(broken) > 15


def walk_samples(p1, p2, n: int, seed: int) -> tuple[torch.Tensor, int]:
    """The real walk_tree sampled n times: counts [V, V] of the first two tokens emitted, and how often
    the walk accepted a depth-2 node."""
    t, gen = tree(), torch.Generator().manual_seed(seed)
    p_fed = torch.stack([p1] + [p2[y] for y in TOKENS[:3]] + [p1] * 3).float()  # depth-2 rows: unused here
    counts, deep = torch.zeros(V, V), 0
    for _ in range(n):
        kept, verdict, walk = walk_tree(t, p_fed, gen, greedy=False)
        emitted = kept.drafts[: verdict.accepted_count].tolist() + [verdict.correction_token]
        if len(emitted) < 2:  # the next iteration's first token, from the target's exact p
            emitted.append(int(torch.multinomial(p2[emitted[0]].float(), 1, generator=gen)))
        counts[emitted[0], emitted[1]] += 1
        deep += len(walk.path) == 2
        assert len(walk.tests) == len(walk.path) + 1
    return counts, deep


def test_the_real_walk_samples_p():
    scipy_stats = pytest.importorskip("scipy.stats")
    p1, p2 = tables(3)
    n = 6000
    counts, deep = walk_samples(p1, p2, n, seed=7)
    expected = (p1[:, None] * p2 * n).flatten()
    keep = expected > 5  # chi-square needs expected counts of a few at least
    observed = counts.flatten()[keep].double()
    want = expected[keep] * observed.sum() / expected[keep].sum()
    assert scipy_stats.chisquare(observed.numpy(), want.numpy()).pvalue > 0.001
    # the walk reaches depth 2 as often as the closed form says
    t = tree()
    moves, _ = level_output(p1, TOKENS[:3])
    reach2 = sum(
        moves[TOKENS[i]] * sum(level_output(p2[TOKENS[i]], [TOKENS[j] for j in t.children(i)])[0].values())
        for i in range(3)
    )
    assert deep > 0 and abs(deep - n * reach2) < 5 * (n * reach2) ** 0.5


def test_at_t0_the_walk_keeps_the_greedy_path():
    t = tree()
    for first, second in itertools.product(range(V), range(V)):
        p_fed = torch.zeros(1 + t.size, V)
        p_fed[0, first] = 1.0
        p_fed[1:, second] = 1.0  # after any node the target's choice is `second`
        kept, verdict, walk = walk_tree(t, p_fed, torch.Generator(), greedy=True)
        emitted = kept.drafts[: verdict.accepted_count].tolist() + [verdict.correction_token]
        on_tree = first in TOKENS[:3]
        assert emitted[0] == first
        if on_tree:
            node = TOKENS[:3].index(first)
            below = [TOKENS[i] for i in t.children(node)]
            assert emitted[1] == second  # accepted from the tree, or the correction: the target's choice
            assert len(walk.path) == 1 + (second in below)
        else:
            assert walk.path == [] and verdict.correction_kind == "resample"
        assert verdict.r is None


def test_the_recorded_chain_is_the_path_then_the_last_rejected_child():
    p1 = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0])  # none of the first drafts can pass
    p_fed = torch.cat([p1[None], torch.full((6, V), 0.2)])
    kept, verdict, walk = walk_tree(tree(), p_fed, torch.Generator().manual_seed(0), greedy=False)
    assert verdict.accepted_count == 0 and verdict.correction_token == 3
    assert [t.branch for t in walk.tests[0]] == [0, 1, 2]  # every child of the root, in order
    assert kept.drafts.tolist() == [2] and kept.rows.tolist() == [2]  # the last one tested
    torch.testing.assert_close(kept.p[0], p1)  # tested against what the first two left of p: p itself


def test_rerank_keeps_parents_with_children_and_the_budget_follows_the_cost():
    t = TokenTree(
        torch.tensor([5, 6, 7, 8]), torch.tensor([-1, -1, 0, 2]), torch.tensor([1, 1, 2, 3]),
        torch.tensor([0.5, 0.4, 0.45, 0.45]),
    )  # fmt: skip
    kept = rerank(t, 3)
    assert kept.tokens.tolist() == [5, 7, 8] and kept.parents.tolist() == [-1, 0, 1]
    flat = [0.0] + [1.0] * 20  # v(rows) = 1: every node is free, take the most allowed
    assert choose_budget([0.5, 0.4, 0.3, 0.1], flat, 0.0, 3) == 3
    steep = [0.0] + [float(r) for r in range(21)]  # v(rows) = rows: each node costs a whole step
    assert choose_budget([0.5, 0.4, 0.3, 0.1], steep, 0.0, 4) == 1
