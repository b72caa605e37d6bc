"""Drafters: anything that proposes gamma tokens and the distribution q each was drawn from.

One small interface (like transformers' candidate generators), five kinds:

- ModelDrafter: a small causal LM with its own KV cache. Before drafting it rolls its cache
  back to the longest prefix it shares with the current context, then feeds only the tokens it
  has not seen (the correction, or after a full acceptance the last draft plus the bonus).
- NgramDrafter: prompt lookup. Finds the latest earlier occurrence of the context's last n
  tokens and proposes what followed it. q is one-hot, so a draft token x is accepted with
  probability p(x).
- The target drafting for itself (a ModelDrafter over the target): q equals p, so everything
  is accepted. With the n-gram drafter it shows both ends of the range.
- HeadDrafter: the draft head (specviz.engine.draft_head), which reads the target's own features. It is the
  one drafter with `reads_features = True`: after each verification the decoder hands it the
  target's final-norm features of the positions that stayed on the text (`observe`), from the
  same forward pass, so it never costs a second pass. A head that fuses earlier layers (EAGLE-3)
  names them in `feature_layers`, and their outputs come in the same pass.
- HybridDrafter: per iteration, the n-gram draft when the context holds a match, else the head.
  Each iteration's q is the distribution its own drafter sampled from, so it stays exact.

Draft trees. The head also proposes a tree (`propose_tree`): `branches` different tokens at the
first draft position, each continued for gamma - 1 more (branches chains sharing the root). At T=0
they are its top choices, continued greedily; at T>0 they are drawn from q without replacement (the
second from q without the first), continued by sampling. The decoder verifies every branch in one
target pass and keeps one by recursive rejection sampling (specviz.decoding.verify.choose_branch), which
keeps the output exact at any temperature; at T=0 that is the branch starting with the target's
own choice. A drafter without `propose_tree` (not a `TreeDrafter`) drafts a chain, a tree of one
branch (`draft_tree`).

Stopping early. The head stops drafting deeper once its confidence in every branch's latest draft
is below `min_confidence` (config.HEAD_MIN_CONFIDENCE): q(token) when sampling, its softmax top
probability at T=0. gamma is then the most it drafts. The decision reads only q and the drafts,
never p, so the output stays exact (as transformers' assistant_confidence_threshold).

The paper's algorithm. `config.PAPER_DRAFT` names the draft head run as Algorithm 1 states it: one
chain of exactly gamma drafts, no tree, no early stop (the app's "paper" preset, config.ALGORITHMS).

What each proposal was. After every proposal a drafter's `report` (a DraftReport) says which drafter
drafted and why it drafted fewer than it was asked, if it did; the decoder hands it to the trace
(an iteration's `drafting`), so every page can say where the engine left Algorithm 1.

`resolve_drafter` turns a draft name into one of these; it is the one place that knows the names.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from specviz.config import HEAD_MIN_CONFIDENCE, PAPER_DRAFT, TREE_BRANCHES, SamplingConfig
from specviz.engine.models import LoadedModel, is_head, load_model
from specviz.engine.sampling import draw, probabilities
from specviz.engine.target import crop_cache, forward_logits

# Why a proposal held fewer drafts than asked (DraftReport.stop; the trace's drafting.stop).
STOP_REASONS = ("no_features", "confidence", "no_match", "match_end")


@dataclass(frozen=True)
class DraftReport:
    """What one proposal was, for the trace (specviz.traces.trace: an iteration's `drafting`)."""

    source: str  # which drafter drafted: "head", "ngram", or "model" (a draft model, or the target itself)
    stop: str | None = None  # STOP_REASONS: why fewer than asked; None: it drafted all it was asked
    confidence: float | None = None  # stop "confidence": the best branch's confidence in its latest draft
    threshold: float | None = None  # stop "confidence": the head's min_confidence it fell below


class Drafter(Protocol):
    """What the decoder asks of every drafter. One that also drafts trees is a TreeDrafter."""

    name: str
    reads_features: bool  # True: wants the target's features after each verification
    feature_layers: tuple[int, ...]  # decoder layers whose outputs it also wants (with reads_features)

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        """Begin a new run: forget every cached state."""

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """context [L] int64 -> (tokens [g] int64, q [g, V] float32) with g <= gamma."""

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        """features [T, (n+1)D]: the outputs of the n feature_layers, then the target's final-norm
        feature, at positions first_position.. of the text (only those still on it). Called only
        when reads_features is True."""


@runtime_checkable
class TreeDrafter(Drafter, Protocol):
    """A drafter that can also propose a draft tree (the head, the hybrid). The tree API is optional:
    `draft_tree` and the trace's config.draft_tree check for it with isinstance, and a drafter
    without it drafts chains."""

    branches: int  # most branches of its tree at the first draft position

    def propose_tree(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """context [L] int64 -> (tokens [k, g] int64, q [k, g, V] float32): k <= branches branches
        with different first tokens, g <= gamma drafts each; q[b, j] is the distribution branch b's
        draft j was drawn from, given the earlier branches' first tokens."""


def draft_tree(
    drafter: Drafter, context: torch.Tensor, gamma: int, allow_tree: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """The drafter's proposal as a tree: tokens [k, g], q [k, g, V] (q[b, j]: the distribution
    branch b's draft j was drawn from). A tree of several branches when allowed and the drafter can
    make one; otherwise its chain as one branch."""
    if allow_tree and isinstance(drafter, TreeDrafter):
        return drafter.propose_tree(context, gamma)
    tokens, q = drafter.propose(context, gamma)  # [g], [g, V]
    return tokens[None], q[None]


class ModelDrafter:
    """A small causal LM proposing tokens autoregressively from its own KV cache."""

    reads_features = False
    feature_layers = ()

    def __init__(self, loaded: LoadedModel, name: str | None = None):
        self.loaded = loaded
        self.name = name or loaded.name
        self._cache = None
        self._cached_ids = torch.empty(0, dtype=torch.long)
        self.report = DraftReport("model")  # a model drafts every token it is asked for

    @property
    def kernels(self) -> dict:
        return self.loaded.kernels

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        from transformers import DynamicCache

        self.sampling, self.generator, self.vocab_size = sampling, generator, vocab_size
        self._cache = DynamicCache(config=self.loaded.model.config)
        self._cached_ids = torch.empty(0, dtype=torch.long, device=self.loaded.model.device)

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        model_device = self.loaded.model.device
        context = context.to(model_device)
        # (5) roll back to what is still valid: the longest common prefix, and never the whole
        # context, because the last token must be fed to get the next distribution.
        keep = min(_common_prefix(self._cached_ids, context), context.shape[0] - 1)
        crop_cache(self._cache, keep)
        feed = context[keep:]  # [T] the tokens this cache has not seen
        tokens, qs = [], []
        for _ in range(gamma):
            logits = forward_logits(self.loaded.model, feed, self._cache, keep=1)[-1, : self.vocab_size]
            q = probabilities(logits, self.sampling)  # [V]
            token = sample_token(q, self.sampling, self.generator)  # [1]
            tokens.append(token)
            qs.append(q)
            feed = token
        drafted = torch.cat(tokens)  # [gamma]
        # The cache now holds the context and every draft but the last (never fed).
        self._cached_ids = torch.cat([context, drafted[:-1]])
        return drafted, torch.stack(qs)  # [gamma], [gamma, V]

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        pass


def sample_token(q: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator) -> torch.Tensor:
    """q [V] -> one token [1] drawn from q with the run's generator (the argmax when greedy)."""
    if sampling.greedy:
        return q.argmax().reshape(1)
    return torch.tensor([draw(q, generator)], device=q.device)


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    m = min(a.shape[0], b.shape[0])
    if m == 0:
        return 0
    mismatch = (a[:m] != b[:m]).nonzero()
    return int(mismatch[0, 0]) if mismatch.numel() else m


class NgramDrafter:
    """Prompt lookup: continue the latest earlier match of the context's last n tokens."""

    name = "ngram"
    reads_features = False
    feature_layers = ()

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = lookup_continuation(context.tolist(), gamma, self.max_ngram, self.min_ngram)
        stop = None if len(tokens) == gamma else "match_end" if tokens else "no_match"
        self.report = DraftReport("ngram", stop)
        drafted = torch.tensor(tokens, dtype=torch.long, device=context.device)  # [g], g may be 0
        q = torch.zeros(len(tokens), self.vocab_size, device=context.device)
        q[torch.arange(len(tokens)), drafted] = 1.0  # one-hot: the drafter is certain
        return drafted, q

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        pass


def lookup_continuation(ids: list[int], gamma: int, max_ngram: int, min_ngram: int) -> list[int]:
    """The up-to-gamma tokens that followed the latest earlier occurrence of ids' last n tokens,
    trying the longest n first. Empty when nothing matches."""
    length = len(ids)
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        pattern = ids[length - n :]
        # Latest start first; the match must end before the last token so a continuation exists.
        for start in range(length - n - 1, -1, -1):
            if ids[start : start + n] == pattern:
                return ids[start + n : start + n + gamma]
    return []


class HeadDrafter:
    """The draft head: catches its KV cache up on the target's true features, then chains.

    Head entry j reads (f_j, x_{j+1}). Entries built from true features stay valid for the whole
    run (the text only grows); entries built from the head's own predictions while drafting are
    dropped at the next proposal. With no target features yet (the first iteration) it proposes
    nothing, so the first target pass doubles as the prefill.
    """

    reads_features = True

    def __init__(self, head, name: str, branches: int = TREE_BRANCHES, min_confidence: float = HEAD_MIN_CONFIDENCE):
        """min_confidence: stop drafting deeper once the head's confidence in its latest draft (every
        branch's) is below it; 0 always drafts gamma tokens."""
        self.head, self.name, self.branches = head, name, branches
        self.min_confidence = min_confidence
        self.feature_layers = head.cfg.feature_layers

    @property
    def kernels(self) -> dict:
        return self.head.kernels

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        from specviz.engine.draft_head import HeadCache

        self.sampling, self.generator, self.vocab_size = sampling, generator, vocab_size
        self.cache = HeadCache()
        self.true_entries = 0  # leading cache entries that read true target features
        # [n, D] the head's input features of positions 0..n-1 (f, or the fused layers: head.fused)
        self.features = torch.empty(0, self.head.cfg.hidden, device=self.head.embed.device)

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        self.features = torch.cat([self.features[:first_position], self.head.fused(features)])

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        length = context.shape[0]
        device = self.features.device
        if self.features.shape[0] < length - 1:  # no features for this text yet
            self.report = DraftReport("head", "no_features")
            return torch.empty(0, dtype=torch.long, device=device), torch.empty(0, self.vocab_size, device=device)
        f, logits = self._catch_up(context.to(device))
        self.report = DraftReport("head")
        tokens, qs = [], []
        for k in range(gamma):
            q = self._q(logits[-1])  # [V]
            token = sample_token(q, self.sampling, self.generator)  # [1]
            tokens.append(token)
            qs.append(q)
            if k + 1 < gamma and not self._unsure(logits[-1:], q[None], token):
                # the chain: the predicted feature and the drafted token feed the next step
                f, logits = self.head.step(f[-1:], token, length + k, self.cache)
            else:
                break
        return torch.cat(tokens), torch.stack(qs)  # [gamma], [gamma, V]

    def propose_tree(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`branches` different first tokens, each continued for gamma - 1 more -> tokens [k, g],
        q [k, g, V], q[b, j] the distribution branch b's draft j was drawn from. At T=0: the
        head's top-k first tokens, continued greedily (q one-hot on each token: every branch is a
        deterministic guess); branch 0 is propose()'s chain. At T>0: the first tokens drawn from q
        without replacement (q_b is q without the earlier candidates, renormalised), continued by
        sampling. Fewer branches when q holds fewer tokens."""
        length = context.shape[0]
        if self.branches == 1 or gamma == 0 or self.features.shape[0] < length - 1:
            tokens, q = self.propose(context, gamma)
            return tokens[None], q[None]
        f, logits = self._catch_up(context.to(self.features.device))
        self.report = DraftReport("head")
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

    def _unsure(self, subset_logits: torch.Tensor, q: torch.Tensor, tokens: torch.Tensor) -> bool:
        """Whether to stop drafting after the latest level: every branch's confidence in its draft
        is below min_confidence. subset_logits [k, S] and q [k, V] gave tokens [k]. Confidence is
        q(token) when sampling and the head's softmax probability of its argmax at T=0 (q is
        one-hot there). Stopping looks only at q and the drafts, never at p, so the output stays
        exact (as transformers' assistant_confidence_threshold)."""
        if self.min_confidence <= 0:
            return False
        if self.sampling.greedy:
            confidence = subset_logits.float().softmax(-1).amax(-1)  # [k]
        else:
            confidence = q.gather(-1, tokens[:, None])[:, 0]  # [k]
        unsure = bool((confidence < self.min_confidence).all())
        if unsure:  # the trace says why it stopped: the best branch's confidence, below the threshold
            self.report = DraftReport("head", "confidence", float(confidence.max()), self.min_confidence)
        return unsure

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


class HybridDrafter:
    """The n-gram draft when the context holds a match of at least `min_ngram` tokens, else the head.
    The head observes every verification either way, so it is always ready."""

    reads_features = True

    def __init__(self, head_drafter: HeadDrafter, name: str, min_ngram: int = 2):
        self.head_drafter, self.name = head_drafter, name
        self.feature_layers = head_drafter.feature_layers
        self.ngram = NgramDrafter(max_ngram=3, min_ngram=min_ngram)

    @property
    def branches(self) -> int:
        return self.head_drafter.branches

    @property
    def kernels(self) -> dict:
        return self.head_drafter.kernels

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        self.ngram.start(sampling, generator, vocab_size)
        self.head_drafter.start(sampling, generator, vocab_size)

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        self.head_drafter.observe(features, first_position)

    @property
    def report(self) -> DraftReport:
        """The report of the drafter that drafted last: the n-gram's when it matched, else the head's."""
        ngram = self.ngram.report
        return ngram if ngram.stop != "no_match" else self.head_drafter.report

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        drafts, q = self.ngram.propose(context, gamma)
        if drafts.shape[0] > 0:
            return drafts, q
        return self.head_drafter.propose(context, gamma)

    def propose_tree(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The n-gram chain when the context holds a match, else the head's tree."""
        drafts, q = self.ngram.propose(context, gamma)
        if drafts.shape[0] > 0:
            return drafts[None], q[None]
        return self.head_drafter.propose_tree(context, gamma)


# ----- names -> drafters ------------------------------------------------------------------------


def resolve_drafter(draft, target: LoadedModel, device=None, dtype=None) -> Drafter:
    """A draft name (or a loaded model, or a ready Drafter) -> the Drafter for `target`.

    None means the target's default draft (specviz.engine.models.default_draft)."""
    from specviz.engine.models import HEAD_DRAFT, HYBRID_DRAFT, NGRAM_DRAFT, SELF_DRAFT, check_vocabulary, default_draft

    if draft is None:
        draft = default_draft(target.name)
    if draft == NGRAM_DRAFT:
        return NgramDrafter()
    if draft == SELF_DRAFT:
        return ModelDrafter(target, name=SELF_DRAFT)
    if draft == HYBRID_DRAFT:
        return HybridDrafter(HeadDrafter(load_draft_head(HEAD_DRAFT, target), HEAD_DRAFT), HYBRID_DRAFT)
    if draft == PAPER_DRAFT:  # Algorithm 1 as the paper states it: one chain of gamma drafts, no early stop
        return HeadDrafter(load_draft_head(HEAD_DRAFT, target), PAPER_DRAFT, branches=1, min_confidence=0.0)
    if isinstance(draft, str) and is_head(draft):
        return HeadDrafter(load_draft_head(draft, target), draft)
    if isinstance(draft, str):
        draft = load_model(draft, device=device or target.device, dtype=dtype or target.dtype)
    if isinstance(draft, LoadedModel):
        check_vocabulary(target, draft)
        return ModelDrafter(draft)
    return draft  # already a Drafter


def needs_no_model(draft) -> bool:
    """A draft the decoder builds from its name alone, with no draft model to load: the n-gram,
    self and hybrid strategies and the draft heads (resolve_drafter's named kinds)."""
    from specviz.engine.models import HYBRID_DRAFT, NGRAM_DRAFT, SELF_DRAFT

    return isinstance(draft, str) and (draft in (NGRAM_DRAFT, SELF_DRAFT, HYBRID_DRAFT, PAPER_DRAFT) or is_head(draft))


_heads: dict[tuple, tuple] = {}  # (name, id(target model)) -> (weak reference to that model, head)


def load_draft_head(name: str, target: LoadedModel):
    """The named head attached to `target` (once per target model), its kernels chosen by
    measurement when the target's were (specviz.engine.kernels)."""
    from pathlib import Path

    from specviz.engine.draft_head import load_head
    from specviz.engine.kernels import choose_for_head
    from specviz.engine.models import DEFAULT_TARGET, HEAD_DRAFT, cache_dir, offline_path
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
        for stale in [k for k, (ref, _) in _heads.items() if ref() is None]:
            del _heads[stale]
        _heads[key] = (weakref.ref(target.model), head)
    return _heads[key][1]
