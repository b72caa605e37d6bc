"""Exact verification of a general draft tree (EAGLE-2's dynamic tree, specviz.drafters.token_tree).

One target pass gives p after the text (the root) and after every node. The walk starts at the root;
at node u with target distribution p_u it tests u's children in their stored order with the recursive
rule of `verify.choose_branch`, child b against q_b, the distribution it came from:

    child x is accepted with probability min(1, p_b(x) / q_b(x)); on a rejection
    p_{b+1} = norm(max(0, p_b - q_b))

At T=0 the tokens are chosen (the head's top ones, in order of score), q_b is a point mass on x, so x
passes with probability p_b(x) and a rejection removes x from p_b. At T>0 they are drawn from the
head's q without replacement (specviz.drafters.sampled_tree): q_b is q without the earlier siblings,
renormalised. If a child passes, the walk moves to it and repeats; if every child fails, the correction
is drawn from the last residual; at a leaf (its whole path accepted) the bonus is drawn from p there.

Why it is exact. Per node, each stage b is the chain's test and resample: given the history, x ~ q_b
then accept with min(1, p_b/q_b), else go on with norm(max(0, p_b - q_b)), emits a token distributed as
p_b (Leviathan et al.'s argument), so by induction over the stages "draw y from p_u; go to the child y
if there is one, else emit y". That needs x to be a draw from q_b given everything that decided it was
drawn: the number of u's children must be a stopping time of the draws, decided before them (from
u's path score, its q, the tree so far, the budget; never from the values of u's own children). A
rerank that drops a drawn child because its q(x) was low breaks it: the survivors are not draws from
their q_b. Which nodes are expanded next may read anything already drawn, their values included: that
only fixes their own child counts, before their children are drawn, and the draft's randomness is
independent of the test's r. At T=0 (p one-hot) the walk keeps exactly the target's greedy path.

`walk_tree` hands steps (3)-(5) what they judge as a chain (a specviz.decoding.branches.KeptBranch
and its Verdict): the accepted path, and after it the last child tested and rejected (the one whose
residual the correction is drawn from), each with the p and q it was tested with. Every test, at
every level, is in the TreeWalk for the trace, with its real q_b(x).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.decoding.branches import KeptBranch
from specviz.decoding.verify import FirstTest, Verdict, accept_probability, choose_branch, residual_distribution
from specviz.drafters.token_tree import TokenTree
from specviz.engine.sampling import draw


@dataclass
class TreeWalk:
    """What the walk did, for the trace: the tree sent, the accepted nodes and every rejected test."""

    tree: TokenTree
    path: list[int]  # the accepted nodes, root to leaf (its length is the accepted count)
    tests: list[list[FirstTest]]  # per level reached (len(path) + 1): the children rejected, in order;
    # FirstTest.branch is the node's index in the tree


@dataclass
class _Chain:
    """The chain being recorded: one row per draft (the accepted path, then the last rejected test)."""

    tokens: list[int]
    nodes: list[int]
    p: list[torch.Tensor]  # [V] each: what the draft was tested against
    q: list[torch.Tensor]  # [V] each: the distribution the draft came from (one-hot when chosen)
    accept_prob: list[torch.Tensor]  # [] each
    r: list[torch.Tensor]  # [1] each (sampling only)


def walk_tree(
    tree: TokenTree, p_fed: torch.Tensor, generator: torch.Generator, greedy: bool
) -> tuple[KeptBranch, Verdict, TreeWalk]:
    """tree of N nodes and the pass's p_fed [1 + N, V] (row 0: after the text; row 1 + i: after node i)
    -> the chain steps (3)-(5) record, its verdict (already decided: nothing is drawn again) and the
    walk. At T=0 no draw is made but the correction's argmax."""
    vocab = p_fed.shape[-1]
    chain, path, tests = _Chain([], [], [], [], [], []), [], []
    node = -1
    while True:
        p_u = p_fed[0 if node < 0 else 1 + node]  # [V]
        kids = tree.children(node)
        if not kids:  # a leaf, every draft on its path accepted: the bonus from p at the leaf
            tests.append([])
            verdict = _verdict(chain, len(path), "bonus", _draw(p_u, generator, greedy), None, greedy)
            return _kept(chain, p_u, vocab), verdict, TreeWalk(tree, path, tests)
        tokens = tree.tokens[kids]  # [c]
        q = _q(tree, kids, tokens, vocab).to(p_u.dtype)  # [c, V] q_b of each child
        b, p_b, r, rejected = choose_branch(tokens, q, p_u, generator, greedy)
        x, token = kids[b], int(tokens[b])
        accept = accept_probability(p_b[token], q[b, token])
        passed = bool(accept >= 1.0) if greedy else bool(r[0] < accept)
        level = [FirstTest(kids[t.branch], t.token, t.p, t.q, t.accept_prob, t.r) for t in rejected]
        chain.tokens.append(token)
        chain.nodes.append(x)
        chain.p.append(p_b)
        chain.q.append(q[b])
        chain.accept_prob.append(accept)
        if r is not None:
            chain.r.append(r)
        if passed:
            tests.append(level)
            path.append(x)
            node = x
            continue
        r_x = None if r is None else float(r[0])
        level.append(FirstTest(x, token, float(p_b[token]), float(q[b, token]), float(accept), r_x))
        tests.append(level)
        residual = residual_distribution(p_b, q[b])  # norm(max(0, p_b - q_b)): p_b without x when chosen
        verdict = _verdict(chain, len(path), "resample", _draw(residual, generator, greedy), residual, greedy)
        return _kept(chain, p_fed[1 + x], vocab), verdict, TreeWalk(tree, path, tests)


def _q(tree: TokenTree, kids: list[int], tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """[c, V]: what each child was drawn from, q_b (a sampled tree), or a point mass on it (chosen)."""
    if tree.q is None:
        return torch.nn.functional.one_hot(tokens, vocab)
    return tree.q[kids]


def _kept(chain: _Chain, p_after: torch.Tensor, vocab: int) -> KeptBranch:
    """The chain as steps (3)-(5) read it: drafts [g], q [g, V] (q_b of each, one-hot when chosen),
    p [g + 1, V] (row g: after the last draft), rows [g] the drafts' nodes (their rows among those fed,
    less one)."""
    device = p_after.device
    drafts = torch.tensor(chain.tokens, dtype=torch.long, device=device)
    q = torch.stack(chain.q) if chain.q else p_after.new_zeros(0, vocab)
    p = torch.stack([*chain.p, p_after])
    rows = torch.tensor(chain.nodes, dtype=torch.long, device=device)
    return KeptBranch(0, drafts, q, p, rows, None, None, None)


def _verdict(chain: _Chain, n: int, kind: str, token: int, residual, greedy: bool) -> Verdict:
    g = len(chain.tokens)
    accept_prob = torch.stack(chain.accept_prob) if g else torch.empty(0)
    r = None if greedy or not g else torch.cat(chain.r)
    return Verdict(n, accept_prob, r, kind, token, residual)


def _draw(probs: torch.Tensor, generator: torch.Generator, greedy: bool) -> int:
    return int(probs.argmax()) if greedy else draw(probs, generator)
