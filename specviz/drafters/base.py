"""What the decoder asks of every drafter (Drafter, TreeDrafter), what each proposal was
(DraftReport, with STOP_REASONS), a chain as a one-branch tree (draft_tree), and drawing a draft
token from q (sample_token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from specviz.config import SamplingConfig
from specviz.engine.sampling import draw

# Why a proposal held fewer drafts than asked (DraftReport.stop; the trace's drafting.stop).
STOP_REASONS = ("no_features", "confidence", "cost", "no_match", "match_end")


@dataclass(frozen=True)
class DraftReport:
    """What one proposal was, for the trace (specviz.traces.trace: an iteration's `drafting`)."""

    source: str  # which drafter drafted: "head", "ngram", "suffix", or "model" (a draft model, or the target itself)
    stop: str | None = None  # STOP_REASONS: why fewer than asked; None: it drafted all it was asked
    # stop "confidence": the best branch's confidence in its latest draft, and the head's min_confidence it
    # fell below; stop "cost": its confidence in the draft it did not send, and the least that would have
    # paid for that draft's row at this machine's measured costs (HeadDrafter._chain_budget)
    confidence: float | None = None
    threshold: float | None = None


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


def draft_tree(drafter: Drafter, context: torch.Tensor, gamma: int, allow_tree: bool | str = True):
    """The drafter's proposal as a tree: tokens [k, g], q [k, g, V] (q[b, j]: the distribution
    branch b's draft j was drawn from). A tree of several branches when allowed (True or "branches")
    and the drafter can make one; with "dynamic", EAGLE-2's dynamic tree where the drafter drafts one
    (`propose_dynamic`: a specviz.drafters.token_tree.TokenTree, or a chain as tokens [1, g], q [1, g, V]);
    otherwise its chain as one branch."""
    if allow_tree == "dynamic" and hasattr(drafter, "propose_dynamic"):
        return drafter.propose_dynamic(context, gamma)
    if allow_tree and allow_tree != "off" and isinstance(drafter, TreeDrafter):
        return drafter.propose_tree(context, gamma)
    tokens, q = drafter.propose(context, gamma)  # [g], [g, V]
    return tokens[None], q[None]


def sample_token(q: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator) -> torch.Tensor:
    """q [V] -> one token [1] drawn from q with the run's generator (the argmax when greedy)."""
    if sampling.greedy:
        return q.argmax().reshape(1)
    return torch.tensor([draw(q, generator)], device=q.device)
