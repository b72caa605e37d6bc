"""The draft head as a drafter (EAGLE): it reads the target's features, drafts chains or trees,
and stops early on low confidence; and the head's network attached to a target once
(load_draft_head). The network itself is specviz.engine.draft_head.
"""

from __future__ import annotations

import weakref

import torch

from specviz.config import DYNAMIC_TREE_NODES, DYNAMIC_TREE_WIDTH, HEAD_MIN_CONFIDENCE, TREE_BRANCHES, SamplingConfig
from specviz.drafters.base import DraftReport, sample_token
from specviz.drafters.token_tree import choose_budget, ranked, rerank
from specviz.engine.models import LoadedModel
from specviz.engine.sampling import probabilities


class HeadDrafter:
    """The draft head: catches its KV cache up on the target's true features, then chains.

    Head entry j reads (f_j, x_{j+1}). Entries built from true features stay valid for the whole
    run (the text only grows); entries built from the head's own predictions while drafting are
    dropped at the next proposal. With no target features yet (the first iteration) it proposes
    nothing, so the first target pass doubles as the prefill.
    """

    reads_features = True

    def __init__(
        self, head, name: str, branches: int = TREE_BRANCHES, min_confidence: float = HEAD_MIN_CONFIDENCE, costs=None
    ):
        """min_confidence: stop drafting deeper once the head's confidence in its latest draft (every
        branch's) is below it; 0 always drafts gamma tokens. costs: for the dynamic tree, a callable
        giving the target's measured (v by rows, one-row step in seconds) (specviz.engine.verify_cost);
        None: every pass costs one step, so the tree sends the most nodes allowed."""
        self.head, self.name, self.branches = head, name, branches
        self.min_confidence = min_confidence
        self.feature_layers = head.cfg.feature_layers
        self.costs = costs
        self.width, self.most_nodes = DYNAMIC_TREE_WIDTH, DYNAMIC_TREE_NODES

    @property
    def kernels(self) -> dict:
        return self.head.kernels

    @property
    def cache_rows(self) -> int:
        """Entries in its KV cache now (the decoder records them per iteration: trace field `cache`)."""
        return self.cache.length

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        self.sampling, self.generator, self.vocab_size = sampling, generator, vocab_size
        self.cache = self.head.new_cache(owner=self)  # a HeadCache, or the static step's (CUDA) back to its pool after
        self.true_entries = 0  # leading cache entries that read true target features
        self.cache_kept = 0  # entries the latest proposal kept before writing (its roll-back's length)
        # [n, D] the head's input features of positions 0..n-1 (f, or the fused layers: head.fused)
        self.features = torch.empty(0, self.head.cfg.hidden, device=self.head.device)

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        self.features = torch.cat([self.features[:first_position], self.head.fused(features)])

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        length = context.shape[0]
        device = self.features.device
        self.cache_kept = self.cache.length  # nothing rolled back unless _catch_up runs
        if self.features.shape[0] < length - 1:  # no features for this text yet
            self.report = DraftReport("head", "no_features")
            return torch.empty(0, dtype=torch.long, device=device), torch.empty(0, self.vocab_size, device=device)
        f, logits = self._catch_up(context.to(device))
        self.report = DraftReport("head")
        return self._chain(f, logits, length, gamma)

    def _chain(self, f: torch.Tensor, logits: torch.Tensor, length: int, gamma: int) -> tuple[torch.Tensor, ...]:
        """The chain from the catch-up's last step (f^ [T, D], subset logits [T, S]) -> tokens [g],
        q [g, V], g <= gamma: stopped by cost (_chain_budget) or by min_confidence (_unsure)."""
        pays = self._chain_budget()
        tokens, qs = [], []
        for k in range(gamma):
            q = self._q(logits[-1])  # [V]
            token = sample_token(q, self.sampling, self.generator)  # [1]
            if pays is not None and not pays(k, float(self._confidence(logits[-1:], q[None], token)[0])):
                break  # this draft's row would cost more than it is expected to bring (pays set the report)
            tokens.append(token)
            qs.append(q)
            if k + 1 < gamma and (pays is not None or not self._unsure(logits[-1:], q[None], token)):
                # the chain: the predicted feature and the drafted token feed the next step
                f, logits = self.head.step(f[-1:], token, length + k, self.cache)
            else:
                break
        if not tokens:
            device = logits.device
            return torch.empty(0, dtype=torch.long, device=device), torch.empty(0, self.vocab_size, device=device)
        return torch.cat(tokens), torch.stack(qs)  # [g], [g, V]

    def _chain_budget(self):
        """With measured costs (and a head that stops early), the chain's stop by cost: a callable
        pays(k, confidence of draft k) -> whether sending draft k raises the expected tokens per unit
        of time, as EAGLE-2's budget (token_tree.choose_budget) decides for a tree. Draft k is accepted
        with about its path score s_k (the product of the confidences so far); sending it adds a row,
        v(k + 2) - v(k + 1) in one-row steps, to a pass that so far costs v(k + 1) plus the head's
        k + 1 steps. So it pays while s_k >= tokens so far x that row's cost ÷ the cost so far. On a
        step whose verification is memory-bound (v flat) the chain runs to gamma; where a pass computes
        (v steep: the weights as shipped, docs/benchmarks.md) it sends only the drafts that pay, none
        at all when the head is unsure. Looks at q and the drafts only, never p: the output stays exact.
        None: the fixed min_confidence stop (no measured costs, or a head that never stops early)."""
        if self.costs is None or self.min_confidence <= 0:
            return None
        from specviz.drafters.head_tree import level_seconds

        v, one_row_s = self.costs()
        step = level_seconds(self.head, 1) / one_row_s  # one head step, in one-row target steps
        state = {"tokens": 1.0, "path": 1.0}  # expected tokens of the drafts sent so far; their path score

        def pays(k: int, confidence: float) -> bool:
            cost = v_at(v, k + 1) + step * (k + 1)
            row = v_at(v, k + 2) - v_at(v, k + 1)
            # The least confidence that pays; above 1 no draft could, and the trace says 1 (a probability).
            threshold = min(1.0, state["tokens"] * row / (cost * state["path"]))
            if confidence < threshold or threshold == 1.0:
                self.report = DraftReport("head", "cost", confidence, threshold)
                return False
            state["path"] *= confidence
            state["tokens"] += state["path"]
            return True

        return pays

    def propose_tree(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`branches` different first tokens, each continued for gamma - 1 more -> tokens [k, g],
        q [k, g, V], q[b, j] the distribution branch b's draft j was drawn from. At T=0: the
        head's top-k first tokens, continued greedily (q one-hot on each token: every branch is a
        deterministic guess); branch 0 is propose()'s chain. At T>0: the first tokens drawn from q
        without replacement (q_b is q without the earlier candidates, renormalised), continued by
        sampling. Fewer branches when q holds fewer tokens. With measured costs, the chain alone
        (tokens [1, g]) where the other branches' rows would not pay for themselves (_branches_pay)."""
        length = context.shape[0]
        self.cache_kept = self.cache.length  # nothing rolled back unless _catch_up runs
        if self.branches == 1 or gamma == 0 or self.features.shape[0] < length - 1:
            tokens, q = self.propose(context, gamma)
            return tokens[None], q[None]
        f, logits = self._catch_up(context.to(self.features.device))
        self.report = DraftReport("head")
        if not self._branches_pay(logits[-1], gamma):
            tokens, q = self._chain(f, logits, length, gamma)
            return tokens[None], q[None]
        firsts, q_firsts = self._first_candidates(logits[-1])  # [k], [k, V]
        k = firsts.shape[0]
        levels, qs = [firsts], [q_firsts]
        prefix = self.cache.length
        features = f[-1:].expand(k, -1)  # [k, D] every branch reads the same predicted feature
        for level in range(1, gamma):
            if self._unsure(logits[-1:].expand(k, -1) if level == 1 else logits, qs[-1], levels[-1]):
                break
            features, logits = self.head.branch_step(
                features, levels[-1], length + level - 1, self.cache, prefix, level
            )  # [k, D], [k, S]
            q = self._q(logits)  # [k, V]
            levels.append(torch.cat([sample_token(row, self.sampling, self.generator) for row in q]))
            qs.append(q)
        return torch.stack(levels, 1), torch.stack(qs, 1)  # [k, g], [k, g, V]

    def propose_dynamic(self, context: torch.Tensor, gamma: int):
        """EAGLE-2's dynamic tree to depth gamma -> a TokenTree: at T=0 the head's likeliest tokens
        (specviz.drafters.head_tree), reranked to the node budget the measured costs choose, q a point
        mass on each; at T>0 drawn from q without replacement, each node's child count decided before
        its children are drawn (specviz.drafters.sampled_tree), q_b kept per node. With no features
        yet, or gamma 0, the (empty) chain: tokens [1, g], q [1, g, V]. A head made to draft chains
        (one branch: the paper's) drafts its chain."""
        from specviz.drafters.head_tree import expand
        from specviz.drafters.sampled_tree import LevelBudget, sample_tree

        length = context.shape[0]
        self.cache_kept = self.cache.length  # nothing rolled back unless _catch_up runs
        if gamma == 0 or self.branches == 1 or self.features.shape[0] < length - 1:
            tokens, q = self.propose(context, gamma)
            return tokens[None], q[None]
        f, logits = self._catch_up(context.to(self.features.device))
        self.report = DraftReport("head")
        v, draft_cost = self._costs(gamma)
        if not self.sampling.greedy:
            budget = LevelBudget(v, draft_cost, self.most_nodes, self.width)
            return sample_tree(self.head, f[-1], logits[-1], length, gamma, self.cache, budget, self._q, self.generator)
        tree = expand(self.head, f[-1], logits[-1], length, gamma, self.cache, self.width, self.sampling)
        scores = [float(tree.score[i]) for i in ranked(tree)]
        return rerank(tree, choose_budget(scores, v, draft_cost, self.most_nodes))

    def _costs(self, gamma: int) -> tuple[list[float], float]:
        """(v [r]: the target's measured pass of r rows in one-row steps, the drafting's cost in the same
        unit: gamma head passes of one level, the catch-up's and the levels'). Without measured costs
        every pass costs one step and drafting nothing, so a tree sends the most nodes allowed."""
        from specviz.drafters.head_tree import level_seconds

        if self.costs is None:
            return [0.0] + [1.0] * (self.most_nodes + 2), 0.0
        v, one_row_s = self.costs()
        return v, gamma * level_seconds(self.head, self.width) / one_row_s

    def _branches_pay(self, subset_logits: torch.Tensor, gamma: int) -> bool:
        """Whether the tree's other branches are worth their rows, from the head's confidence in its two
        likeliest first tokens (c1, c2) and the measured costs: the chain expects about 1 + c1 tokens
        for v(1 + gamma), the tree about 1 + c1 + c2 for v(1 + branches x gamma), both plus the head's
        gamma steps. Where the target's pass is memory-bound the extra rows cost almost nothing and the
        tree is drafted; where it computes (the weights as shipped) the chain. Looks at q only, never p.
        Without measured costs (or a head that never stops early): always the tree."""
        if self.costs is None or self.min_confidence <= 0:
            return True
        from specviz.drafters.head_tree import level_seconds

        v, one_row_s = self.costs()
        heads = gamma * level_seconds(self.head, 1) / one_row_s
        probs = subset_logits.float().softmax(-1) if self.sampling.greedy else self._q(subset_logits)
        top = [float(x) for x in probs.topk(min(2, probs.shape[-1])).values] + [0.0]
        c1, c2 = top[0], top[1]
        chain_cost, tree_cost = v_at(v, 1 + gamma) + heads, v_at(v, 1 + self.branches * gamma) + heads
        return (1 + c1 + c2) * chain_cost > (1 + c1) * tree_cost

    def _unsure(self, subset_logits: torch.Tensor, q: torch.Tensor, tokens: torch.Tensor) -> bool:
        """Whether to stop drafting after the latest level: every branch's confidence in its draft
        is below min_confidence. subset_logits [k, S] and q [k, V] gave tokens [k]. Confidence is
        q(token) when sampling and the head's softmax probability of its argmax at T=0 (q is
        one-hot there). Stopping looks only at q and the drafts, never at p, so the output stays
        exact (as transformers' assistant_confidence_threshold)."""
        if self.min_confidence <= 0:
            return False
        confidence = self._confidence(subset_logits, q, tokens)  # [k]
        unsure = bool((confidence < self.min_confidence).all())
        if unsure:  # the trace says why it stopped: the best branch's confidence, below the threshold
            self.report = DraftReport("head", "confidence", float(confidence.max()), self.min_confidence)
        return unsure

    def _confidence(self, subset_logits: torch.Tensor, q: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The head's confidence in each branch's draft [k]: q(token) when sampling, and the head's
        softmax probability of its argmax at T=0 (q is one-hot there)."""
        if self.sampling.greedy:
            return subset_logits.float().softmax(-1).amax(-1)
        return q.gather(-1, tokens[:, None])[:, 0]

    def _first_candidates(self, subset_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's logits at the first draft position [S] -> up to `branches` different first
        tokens [k] and the distributions they were drawn from [k, V]: at T=0 its top choices, q
        one-hot on each; at T>0 drawn from q without replacement."""
        if self.sampling.greedy:
            tokens = self.head.subset[subset_logits.topk(min(self.branches, subset_logits.shape[-1])).indices]
            q = torch.zeros(tokens.shape[0], self.vocab_size, device=tokens.device)
            return tokens, q.scatter_(1, tokens[:, None], 1.0)
        tokens, dists = [], []
        remaining = self._q(subset_logits)  # [V]
        for _ in range(self.branches):
            token = sample_token(remaining, self.sampling, self.generator)  # [1]
            tokens.append(token)
            dists.append(remaining)
            remaining = remaining.clone()
            remaining[token] = 0.0
            mass = remaining.sum()
            if not mass > 0:  # q held no other token (top-k 1, or a peaked q)
                break
            remaining = remaining / mass
        return torch.cat(tokens), torch.stack(dists)

    def _catch_up(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Drop the head's guessed entries and feed the true features it has not seen; returns the
        last step's (f^ [T, D], subset logits [T, S]): its last row predicts the first draft."""
        length = context.shape[0]
        self.cache.crop(self.true_entries)
        self.cache_kept = self.cache.length
        start = self.true_entries  # catch up entries start..length-2 on true features
        f, logits = self.head.step(self.features[start : length - 1], context[start + 1 :], start + 1, self.cache)
        self.true_entries = length - 1
        return f, logits

    def _q(self, subset_logits: torch.Tensor) -> torch.Tensor:
        """Logits over the head's vocabulary subset [..., S] -> q over the full vocabulary [..., V],
        0 outside S."""
        full = torch.full((*subset_logits.shape[:-1], self.vocab_size), float("-inf"), device=subset_logits.device)
        full[..., self.head.subset] = subset_logits.float()
        return probabilities(full, self.sampling)


def v_at(v: list[float], rows: int) -> float:
    """v(rows) from the measured v [0..R]: past R, extended along its last step (a pass grows with its
    rows; cutting it at R would make a large tree look as cheap as R rows)."""
    last = len(v) - 1
    return v[rows] if rows <= last else v[last] + (rows - last) * max(0.0, v[last] - v[last - 1])


_heads: dict[tuple, tuple] = {}  # (name, id(target model)) -> (weak reference to that model, head)


def load_draft_head(name: str, target: LoadedModel):
    """The named head attached to `target` (once per target model), its kernels chosen by
    measurement when the target's were (specviz.engine.kernels)."""
    from pathlib import Path

    from specviz.engine.draft_head import load_head
    from specviz.engine.kernels import choose_for_head
    from specviz.engine.models import DEFAULT_TARGET, HEAD_DRAFT, cache_dir, offline_path
    from specviz.engine.native_head import NativeHead
    from specviz.errors import ModelError

    if name == HEAD_DRAFT and target.name != DEFAULT_TARGET:
        raise ModelError(
            f"The draft head {HEAD_DRAFT!r} reads the features of {DEFAULT_TARGET!r} only; target "
            f"{target.name!r} needs a head trained for it (python -m specviz train-head --target ...)."
        )
    if not hasattr(target.model, "model") or not hasattr(target.model, "lm_head"):
        raise ModelError(f"A draft head needs a Llama-family target (body + LM head); {target.name!r} is not one.")
    key = (name, id(target.model))
    cached = _heads.get(key)
    if cached is None or cached[0]() is not target.model:  # an id can be reused once a model is freed
        folder = offline_path(name) if name.startswith("offline:") else Path(name)
        head = load_head(folder, target.model)
        if not target.kernels.get("reason"):
            head.kernels = choose_for_head(head, name, cache_dir() / "kernels.json")
            head.native = NativeHead.of(head)  # its layers in one native call where the kernels allow it
        if target.capture_note:  # the target's captured step failed its proof: the head steps eagerly too
            head.static = None
        for stale in [k for k, (ref, _) in _heads.items() if ref() is None]:
            del _heads[stale]
        _heads[key] = (weakref.ref(target.model), head)
    return _heads[key][1]


def build_head(target: LoadedModel, device=None, dtype=None) -> HeadDrafter:
    """The registry's "head" (specviz.config.DRAFTERS): the shipped draft head, its tree and early stop."""
    from specviz.engine.models import HEAD_DRAFT
    from specviz.engine.verify_cost import pass_costs

    return HeadDrafter(load_draft_head(HEAD_DRAFT, target), HEAD_DRAFT, costs=lambda: pass_costs(target))


def build_paper(target: LoadedModel, device=None, dtype=None) -> HeadDrafter:
    """The registry's "paper": Algorithm 1 as the paper states it, one chain of gamma drafts, no early stop."""
    from specviz.config import PAPER_DRAFT
    from specviz.engine.models import HEAD_DRAFT

    return HeadDrafter(load_draft_head(HEAD_DRAFT, target), PAPER_DRAFT, branches=1, min_confidence=0.0)
