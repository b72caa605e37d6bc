"""Drafters: anything that proposes gamma tokens and the distribution q each was drawn from.

One small interface (like transformers' candidate generators), three kinds:

- ModelDrafter: a small causal LM with its own KV cache. Before drafting it rolls its cache
  back to the longest prefix it shares with the current context, then feeds only the tokens it
  has not seen (the correction, or after a full acceptance the last draft plus the bonus).
- NgramDrafter: prompt lookup. Finds the latest earlier occurrence of the context's last n
  tokens and proposes what followed it. q is one-hot, so a draft token x is accepted with
  probability p(x).
- The target drafting for itself (a ModelDrafter over the target): q equals p, so everything
  is accepted. With the n-gram drafter it shows both ends of the range.
"""

from __future__ import annotations

import inspect
from typing import Protocol

import torch

from specviz.config import SamplingConfig
from specviz.models import LoadedModel
from specviz.sampling import probabilities


class Drafter(Protocol):
    name: str

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        """Begin a new run: forget every cached state."""

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """context [L] int64 -> (tokens [g] int64, q [g, V] float32) with g <= gamma."""


def forward_logits(model, input_ids: torch.Tensor, cache, keep: int) -> torch.Tensor:
    """One cached forward. input_ids [T] -> logits [keep, V_model] for the last `keep` positions."""
    kwargs = {"past_key_values": cache, "use_cache": True}
    if _accepts_logits_to_keep(model):
        kwargs["logits_to_keep"] = keep  # skip the vocabulary projection for the prompt positions
    return model(input_ids[None], **kwargs).logits[0, -keep:]


_logits_to_keep_support: dict[type, bool] = {}


def _accepts_logits_to_keep(model) -> bool:
    kind = type(model)
    if kind not in _logits_to_keep_support:
        _logits_to_keep_support[kind] = "logits_to_keep" in inspect.signature(model.forward).parameters
    return _logits_to_keep_support[kind]


def crop_cache(cache, keep: int) -> None:
    """Drop cached positions beyond the first `keep` (transformers 5 crop takes a negative count)."""
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)


class ModelDrafter:
    """A small causal LM proposing tokens autoregressively from its own KV cache."""

    def __init__(self, loaded: LoadedModel, name: str | None = None):
        self.loaded = loaded
        self.name = name or loaded.name
        self._cache = None
        self._cached_ids = torch.empty(0, dtype=torch.long)

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
            token = self._choose(q)  # [1]
            tokens.append(token)
            qs.append(q)
            feed = token
        drafted = torch.cat(tokens)  # [gamma]
        # The cache now holds the context and every draft but the last (never fed).
        self._cached_ids = torch.cat([context, drafted[:-1]])
        return drafted, torch.stack(qs)  # [gamma], [gamma, V]

    def _choose(self, q: torch.Tensor) -> torch.Tensor:
        if self.sampling.greedy:
            return q.argmax().reshape(1)
        gen_device = self.generator.device
        return torch.multinomial(q.to(gen_device), 1, generator=self.generator).to(q.device)


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    m = min(a.shape[0], b.shape[0])
    if m == 0:
        return 0
    mismatch = (a[:m] != b[:m]).nonzero()
    return int(mismatch[0, 0]) if mismatch.numel() else m


class NgramDrafter:
    """Prompt lookup: continue the latest earlier match of the context's last n tokens."""

    name = "ngram"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = lookup_continuation(context.tolist(), gamma, self.max_ngram, self.min_ngram)
        drafted = torch.tensor(tokens, dtype=torch.long, device=context.device)  # [g], g may be 0
        q = torch.zeros(len(tokens), self.vocab_size, device=context.device)
        q[torch.arange(len(tokens)), drafted] = 1.0  # one-hot: the drafter is certain
        return drafted, q


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
