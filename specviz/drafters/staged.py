"""Staged drafting (Spector & Ré 2023): the draft model is itself sped up by speculation. Before each
of its passes, an n-gram lookup guesses the tokens the draft model will draft next; one pass of the
draft model over the guesses gives its distribution at every guessed position, and each guess the
draft model then draws itself saves it a pass.

The drafts and q are the plain draft model's (ModelDrafter): q at each position is the draft model's
own distribution given everything drafted before it, and each token is drawn from it with the run's
generator in the same order, so the target's rule sees what it would see without the stage below
(the same drafts at T=0, the same draws at T>0; only float rounding of a longer pass can differ).
"""

from __future__ import annotations

import torch

from specviz.drafters.base import sample_token
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import lookup_continuation
from specviz.engine.sampling import probabilities
from specviz.engine.target import crop_cache, forward_logits


class StagedDrafter(ModelDrafter):
    """A draft model whose own drafting is guessed by n-gram lookup and checked in one pass per guess
    run. `passes` counts the draft model's forward passes since start (the plain drafter: one a draft)."""

    def __init__(self, loaded, name: str | None = None, max_ngram: int = 3, min_ngram: int = 1):
        super().__init__(loaded, name)
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.passes = 0

    def start(self, sampling, generator, vocab_size) -> None:
        super().start(sampling, generator, vocab_size)
        self.passes = 0

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        context, feed = self.roll_back(context)  # [L], [T]: as the plain drafter rolls back
        ids = context.tolist()
        tokens, qs = [], []
        while len(tokens) < gamma:
            guesses = lookup_continuation(ids, gamma - len(tokens) - 1, self.max_ngram, self.min_ngram)
            block = torch.cat([feed, torch.tensor(guesses, dtype=torch.long, device=feed.device)])  # [T + k]
            logits = forward_logits(self.loaded.model, block, self._cache, keep=len(guesses) + 1)  # [k + 1, V_model]
            self.passes += 1
            for row, guess in zip(logits[:, : self.vocab_size], [*guesses, None], strict=True):
                q = probabilities(row, self.sampling)  # [V] the draft model's own, given every draft before
                token = sample_token(q, self.sampling, self.generator)  # [1]
                tokens.append(token)
                qs.append(q)
                ids.append(int(token))
                if len(tokens) == gamma or int(token) != guess:
                    break  # the rows after a wrong guess were computed on a text that is not this one
            # The cache keeps the text up to the latest draft, which is fed next (or never, the last).
            crop_cache(self._cache, len(ids) - 1)
            feed = tokens[-1]
        self._cached_ids = torch.tensor(ids[:-1], dtype=torch.long, device=context.device)
        return torch.cat(tokens), torch.stack(qs)  # [gamma], [gamma, V]


def build_staged(target, device=None, dtype=None) -> StagedDrafter:
    """The registry's "staged" (specviz.config.DRAFTERS): the distilled draft, its own drafting guessed
    by n-gram lookup."""
    from specviz.engine.models import TRAINED_DRAFT, check_vocabulary, load_model

    loaded = load_model(TRAINED_DRAFT, device=device or target.device, dtype=dtype or target.dtype)
    check_vocabulary(target, loaded)
    return StagedDrafter(loaded, "staged")
