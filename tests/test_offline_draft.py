"""The shipped draft: it loads with no network, shares the target's vocabulary, is offered as a
draft of the offline pair, and greedy speculative output with it is the target's own."""

from __future__ import annotations

import pytest

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.engine.models import TRAINED_DRAFT, check_vocabulary, load_model, offline_path

pytestmark = pytest.mark.slow

SHIPPED = "offline:specviz-draft-smollm2"
PROMPTS = ["Write a haiku about the sea.", "Explain what a compiler does."]
NEW_TOKENS = 24


def test_shipped_draft_is_named_and_small():
    assert TRAINED_DRAFT == SHIPPED
    folder = offline_path(SHIPPED)
    assert (folder / "model.safetensors").stat().st_size < 40 * 2**20
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        assert (folder / name).is_file()


def test_shipped_draft_loads_offline_and_shares_vocabulary(offline_target):
    draft = load_model(SHIPPED, device=offline_target.device, dtype=offline_target.dtype)
    check_vocabulary(offline_target, draft)  # raises on a mismatch
    assert draft.tokenizer.get_vocab() == offline_target.tokenizer.get_vocab()
    assert draft.model.config.tie_word_embeddings
    assert draft.logits_width == offline_target.logits_width


@pytest.fixture(scope="module")
def greedy_targets(offline_target):
    return {
        p: autoregressive_generate(p, options=DecodeOptions(temperature=0, max_new_tokens=NEW_TOKENS)).output_token_ids
        for p in PROMPTS
    }


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_with_shipped_draft_equals_target(greedy_targets, gamma):
    for prompt, expected in greedy_targets.items():
        trace = speculative_generate(
            prompt, draft=SHIPPED, options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=NEW_TOKENS)
        )
        assert trace.config["draft"] == SHIPPED
        assert trace.output_token_ids == expected
