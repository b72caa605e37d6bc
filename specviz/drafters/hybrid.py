"""The hybrid drafter: a lookup's draft when the context holds a match (the n-gram lookup, or the
suffix trees of specviz.drafters.suffix), else the draft head's chain or tree. Each iteration's q is
the distribution its own drafter sampled from.
"""

from __future__ import annotations

import torch

from specviz.config import SamplingConfig
from specviz.drafters.base import Drafter, DraftReport
from specviz.drafters.head import HeadDrafter
from specviz.drafters.ngram import NgramDrafter


class HybridDrafter:
    """The lookup's draft when it matches, else the head. The lookup is the n-gram drafter (a match of
    at least `min_ngram` tokens) unless another one-hot lookup is given (a SuffixDrafter). The head
    observes every verification either way, so it is always ready."""

    reads_features = True

    def __init__(self, head_drafter: HeadDrafter, name: str, min_ngram: int = 2, lookup: Drafter | None = None):
        self.head_drafter, self.name = head_drafter, name
        self.feature_layers = head_drafter.feature_layers
        self.lookup = NgramDrafter(max_ngram=3, min_ngram=min_ngram) if lookup is None else lookup

    @property
    def branches(self) -> int:
        return self.head_drafter.branches

    @property
    def width(self) -> int:
        """The most children a node of the head's dynamic tree gets."""
        return self.head_drafter.width

    @property
    def kernels(self) -> dict:
        return self.head_drafter.kernels

    @property
    def cache_rows(self) -> int:
        """The head's cache (the lookup has none)."""
        return self.head_drafter.cache_rows

    @property
    def cache_kept(self) -> int:
        """What the head's latest roll-back left; all of it when the lookup drafted (the head was not called)."""
        head = self.head_drafter
        return head.cache_kept if self.report.source == "head" else head.cache_rows

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        self.lookup.start(sampling, generator, vocab_size)
        self.head_drafter.start(sampling, generator, vocab_size)

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        self.head_drafter.observe(features, first_position)

    @property
    def report(self) -> DraftReport:
        """The report of the drafter that drafted last: the lookup's when it matched, else the head's."""
        lookup = self.lookup.report
        return lookup if lookup.stop != "no_match" else self.head_drafter.report

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        drafts, q = self.lookup.propose(context, gamma)
        if drafts.shape[0] > 0:
            return drafts, q
        return self.head_drafter.propose(context, gamma)

    def propose_tree(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The lookup's chain when the context holds a match, else the head's tree."""
        drafts, q = self.lookup.propose(context, gamma)
        if drafts.shape[0] > 0:
            return drafts[None], q[None]
        return self.head_drafter.propose_tree(context, gamma)

    def propose_dynamic(self, context: torch.Tensor, gamma: int):
        """The lookup's chain (tokens [1, g], q [1, g, V]) when the context holds a match, else the
        head's dynamic tree (a specviz.drafters.token_tree.TokenTree)."""
        drafts, q = self.lookup.propose(context, gamma)
        if drafts.shape[0] > 0:
            return drafts[None], q[None]
        return self.head_drafter.propose_dynamic(context, gamma)


def build_hybrid(target, device=None, dtype=None) -> HybridDrafter:
    """The registry's "hybrid" (specviz.config.DRAFTERS): the n-gram when the context matches, else the head."""
    from specviz.drafters.head import build_head

    return HybridDrafter(build_head(target), "hybrid")


def build_hybrid_suffix(target, device=None, dtype=None) -> HybridDrafter:
    """The registry's "suffix": the hybrid with suffix trees as its lookup (a match of two tokens, as
    the hybrid's n-gram needs)."""
    from specviz.drafters.head import build_head
    from specviz.drafters.suffix import SuffixDrafter

    return HybridDrafter(build_head(target), "hybrid-suffix", lookup=SuffixDrafter(min_match=2))
