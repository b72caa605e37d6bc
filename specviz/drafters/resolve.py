"""Draft names -> drafters (resolve_drafter): a registered kind is built by its own module's
function (specviz.config.DRAFTERS names it), a draft head by folder, any other name is a model;
and which names need no draft model loaded (needs_no_model).
"""

from __future__ import annotations

import importlib

from specviz.config import drafter_kind
from specviz.drafters.base import Drafter
from specviz.drafters.head import HeadDrafter, load_draft_head
from specviz.drafters.model import ModelDrafter
from specviz.engine.models import LoadedModel, check_vocabulary, default_draft, is_head, load_model


def resolve_drafter(draft, target: LoadedModel, device=None, dtype=None) -> Drafter:
    """A draft name (or a loaded model, or a ready Drafter) -> the Drafter for `target`.

    None means the target's default draft (specviz.engine.models.default_draft)."""
    if draft is None:
        draft = default_draft(target.name)
    if (kind := drafter_kind(draft)) is not None:
        module, function = kind.build.split(":")
        return getattr(importlib.import_module(module), function)(target, device, dtype)
    if isinstance(draft, str) and is_head(draft):
        from specviz.engine.verify_cost import pass_costs

        return HeadDrafter(load_draft_head(draft, target), draft, costs=lambda: pass_costs(target))
    if isinstance(draft, str):
        draft = load_model(draft, device=device or target.device, dtype=dtype or target.dtype)
    if isinstance(draft, LoadedModel):
        check_vocabulary(target, draft)
        return ModelDrafter(draft)
    return draft  # already a Drafter


def needs_no_model(draft) -> bool:
    """A draft the decoder builds from its name alone, with no draft model for the caller to load: the
    registered kinds that load none themselves or load their own, and the draft heads."""
    kind = drafter_kind(draft)
    return (kind is not None and kind.model_free) or (isinstance(draft, str) and is_head(draft))
