"""The models a run needs: loaded once per server process, warmed up, and the sidebar's pair.

`load_pair` holds the one rule for a pair's names (a custom pair left without a target is refused
in words); specviz_app.runs.running's preload_defaults loads the offline default pair through it as the
app opens, so a class's first Run finds them ready and its timings hold no one-off start-up costs.
"""

from __future__ import annotations

import os
import threading

import streamlit as st

from specviz.engine import models
from specviz.errors import SpecvizError
from specviz_app import language
from specviz_app.params import Settings
from specviz_app.serving import background

# SPECVIZ_THREADS=n sets torch's CPU threads for the app's runs. On a shared CPU, one thread avoids
# intra-op threads spinning against other programs (a verify pass measured ten times slower).
THREADS_ENV = "SPECVIZ_THREADS"


# (name, dtype, weights) of the models get_model has loaded in this process: a Run says "Loading the
# models…" only when it will (a link pressed again while it decodes showed it above the old stream).
LOADED: set[tuple] = set()


@st.cache_resource(max_entries=models.MAX_LOADED, show_spinner=False)
def get_model(name: str, dtype: str | None = None, weights: str | None = None) -> models.LoadedModel:
    """Load a model once per server process (bounded as the library bounds it: models.MAX_LOADED)."""
    background.wait_for_preload()
    _apply_thread_setting()
    loaded = models.load_model(name, dtype=dtype, weights=weights)
    _warm_up(loaded)
    LOADED.add((name, dtype, weights))
    return loaded


def target_loaded(settings: Settings) -> bool:
    """Whether the settings' target was loaded in this process already (a cache may have let it go since:
    then the Run loads it again, having said it starts)."""
    return (settings.model_names()[0], settings.dtype, settings.weights) in LOADED


def _apply_thread_setting() -> None:
    value = os.environ.get(THREADS_ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        import torch

        torch.set_num_threads(int(value))


def _warm_up(loaded: models.LoadedModel) -> None:
    """One tiny forward pass, so one-off start-up costs do not land in the first run's timings."""
    import torch

    with torch.inference_mode():
        loaded.model(torch.tensor([[0, 1, 2]], device=loaded.model.device))


_head_lock = threading.Lock()  # the preload thread and a first Run may ask for the head at once
_warm_heads: set[tuple[str, int]] = set()  # (head name, id of its target) run once already


def _warm_up_head(target: models.LoadedModel, name: str) -> None:
    """Load the draft head (cached per target) and run it once, so one-off start-up costs stay
    out of the first run's timings, as _warm_up does for models."""
    import torch

    from specviz.drafters import load_draft_head
    from specviz.engine.draft_head import HeadCache

    with _head_lock:
        head = load_draft_head(name, target)
        if (name, id(target.model)) in _warm_heads:
            return
        with torch.inference_mode():
            dim = head.cfg.hidden
            device = head.device
            head.step(torch.zeros(3, dim, device=device), torch.tensor([0, 1, 2], device=device), 1, HeadCache())
        _warm_heads.add((name, id(target.model)))


def sidebar_pair(settings: Settings) -> tuple[models.LoadedModel, object]:
    """The sidebar's pair, loaded: (target, the draft as the decoder takes it). Every page that runs
    the sidebar's models gets them here (a Run through load_pair, with the names it has read)."""
    return load_pair(*settings.model_names(), settings.dtype, settings.weights)


def load_pair(
    target_name: str | None, draft_name: str | None, dtype: str, weights: str | None = None
) -> tuple[models.LoadedModel, object]:
    """(target, draft) loaded from Settings.model_names(): the one rule for a custom pair left
    without a target, and its message (in the language on show). weights: the target's
    (models.WEIGHT_FORMATS; None: the default)."""
    if not target_name:
        raise SpecvizError(language.words("running")["no_target"])
    target = get_model(target_name, dtype, weights)
    return target, resolve_draft(target, draft_name)


def float32_of(target: models.LoadedModel) -> models.LoadedModel:
    """The target in float32: the reference that says whether a run's tokens are exact (a float32
    target is its own; a bfloat16 one loads its twin, which takes a place in the model cache)."""
    return target if target.dtype == "float32" else get_model(target.name, "float32")


def resolve_draft(target: models.LoadedModel, draft: str | None):
    """The draft to hand the decoder: a strategy or head name as it is, a model draft loaded
    (once, cached) and checked against the target's vocabulary."""
    from specviz.drafters import needs_no_model
    from specviz.engine.models import head_of

    if draft is None:
        draft = models.default_draft(target.name)
    if (head := head_of(draft)) is not None:
        _warm_up_head(target, head)
    if needs_no_model(draft):
        return draft
    loaded = get_model(draft, target.dtype)
    models.check_vocabulary(target, loaded)  # fail before decoding, with the library's message
    return loaded
