"""Shared fixtures: tiny random Llama models (fast) and the offline default target (slow).

Tests never reach the network: HF_HUB_OFFLINE is set before anything imports transformers.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


def tiny_llama(vocab_size: int = 16, seed: int = 0, layers: int = 2, init_scale: float = 1.0, hidden: int = 32):
    """A random-initialised LlamaForCausalLM wrapped for the decoder (no tokenizer: ids only)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz.models import LoadedModel

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.02 * init_scale,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = LlamaForCausalLM(config).eval()
    return LoadedModel(
        name=f"tiny-llama-{vocab_size}-{seed}", model=model, tokenizer=None, device="cpu", dtype="float32"
    )


@pytest.fixture(scope="session")
def tiny_pair():
    """(target, draft): two different random tiny Llamas over one 16-token vocabulary."""
    return tiny_llama(seed=1, init_scale=40.0), tiny_llama(seed=2, init_scale=40.0, layers=1)


@pytest.fixture(scope="session")
def offline_target():
    from specviz.models import load_model

    return load_model()


@pytest.fixture(scope="session")
def random_draft_for_offline(offline_target):
    """A random tiny draft sharing the offline target's tokenizer: it disagrees often, which
    exercises every rejection path of the decoder."""
    from specviz.models import LoadedModel

    tiny = tiny_llama(vocab_size=offline_target.logits_width, seed=3, layers=1, init_scale=1.0, hidden=32)
    return LoadedModel(
        name="random-tiny-draft", model=tiny.model, tokenizer=offline_target.tokenizer, device="cpu", dtype="float32"
    )
