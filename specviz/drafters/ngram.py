"""Prompt lookup: propose what followed the latest earlier occurrence of the context's last n
tokens. q is one-hot, so a draft x is accepted with probability p(x).
"""

from __future__ import annotations

import torch

from specviz.config import SamplingConfig
from specviz.drafters.base import DraftReport


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
        return one_hot_drafts(tokens, self.vocab_size, context.device)

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


def one_hot_drafts(tokens: list[int], vocab_size: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """A lookup's drafts as the decoder takes them: (tokens [g] int64, q [g, V] one-hot), g may be 0."""
    drafted = torch.tensor(tokens, dtype=torch.long, device=device)  # [g]
    q = torch.zeros(len(tokens), vocab_size, device=device)
    q[torch.arange(len(tokens)), drafted] = 1.0  # one-hot: the drafter is certain
    return drafted, q


def build_ngram(target=None, device=None, dtype=None) -> NgramDrafter:
    """The registry's "ngram" (specviz.config.DRAFTERS): prompt lookup, no model."""
    return NgramDrafter()
