"""Draft names -> drafters: the one place that knows the names (resolve_drafter), and which
names need no draft model loaded (needs_no_model).
"""

from __future__ import annotations

from specviz.config import PAPER_DRAFT
from specviz.drafters.base import Drafter
from specviz.drafters.head import HeadDrafter, load_draft_head
from specviz.drafters.hybrid import HybridDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.staged import StagedDrafter
from specviz.drafters.suffix import SuffixDrafter
from specviz.engine.models import HYBRID_SUFFIX_DRAFT, STAGED_DRAFT, TRAINED_DRAFT, LoadedModel, is_head, load_model


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
    if draft == HYBRID_SUFFIX_DRAFT:  # suffix trees need a match of two tokens, as the hybrid's n-gram does
        head = HeadDrafter(load_draft_head(HEAD_DRAFT, target), HEAD_DRAFT)
        return HybridDrafter(head, HYBRID_SUFFIX_DRAFT, lookup=SuffixDrafter(min_match=2))
    if draft == STAGED_DRAFT:  # the distilled draft, its own drafting guessed by n-gram lookup
        loaded = load_model(TRAINED_DRAFT, device=device or target.device, dtype=dtype or target.dtype)
        check_vocabulary(target, loaded)
        return StagedDrafter(loaded, STAGED_DRAFT)
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
    """A draft the decoder builds from its name alone, with no draft model for the caller to load: the
    named strategies (the staged one loads its own) and the draft heads (resolve_drafter's named kinds)."""
    from specviz.engine.models import STRATEGIES

    return isinstance(draft, str) and (draft in (*STRATEGIES, PAPER_DRAFT) or is_head(draft))
