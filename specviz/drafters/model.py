"""A small causal LM (a draft model, or the target drafting for itself) proposing tokens
autoregressively from its own KV cache, rolled back to what it shares with the text.
"""

from __future__ import annotations

import torch

from specviz.config import SamplingConfig
from specviz.drafters.base import DraftReport, sample_token
from specviz.engine.models import LoadedModel
from specviz.engine.sampling import probabilities
from specviz.engine.target import crop_cache, forward_logits


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

    @property
    def cache_rows(self) -> int:
        """Positions in its KV cache now (the decoder records them per iteration: trace field `cache`)."""
        return self._cache.get_seq_length() if self._cache is not None else 0

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        from transformers import DynamicCache

        self.sampling, self.generator, self.vocab_size = sampling, generator, vocab_size
        self._cache = DynamicCache(config=self.loaded.model.config)
        self.cache_kept = 0  # positions the latest proposal kept before writing (its roll-back's length)
        self._cached_ids = torch.empty(0, dtype=torch.long, device=self.loaded.model.device)

    def roll_back(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """context [L] -> (context on the model's device [L], feed [T]: the tokens the cache has not seen),
        the cache cropped to what is still valid."""
        context = context.to(self.loaded.model.device)
        # (5) roll back to what is still valid: the longest common prefix, and never the whole
        # context, because the last token must be fed to get the next distribution.
        keep = min(_common_prefix(self._cached_ids, context), context.shape[0] - 1)
        crop_cache(self._cache, keep)
        self.cache_kept = keep  # what the roll-back left, before this proposal writes
        return context, context[keep:]

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        context, feed = self.roll_back(context)  # [L], [T]
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


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    m = min(a.shape[0], b.shape[0])
    if m == 0:
        return 0
    mismatch = (a[:m] != b[:m]).nonzero()
    return int(mismatch[0, 0]) if mismatch.numel() else m


def build_model(target: LoadedModel, device=None, dtype=None) -> ModelDrafter:
    """The registry's "trained" (specviz.config.DRAFTERS): the shipped distilled draft, loaded by name."""
    from specviz.engine.models import TRAINED_DRAFT, check_vocabulary, load_model

    loaded = load_model(TRAINED_DRAFT, device=device or target.device, dtype=dtype or target.dtype)
    check_vocabulary(target, loaded)
    return ModelDrafter(loaded)


def build_self(target: LoadedModel, device=None, dtype=None) -> ModelDrafter:
    """The registry's "self": the target drafting for itself (q = p: every draft passes, nothing is saved)."""
    return ModelDrafter(target, name="self")
