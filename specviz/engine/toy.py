"""The toy pair: tiny random Llamas that decode in milliseconds, for the lab, the sweep and the tests.

`tiny_llama()` builds one (no tokenizer: prompts are token ids and tokens show as #id);
`toy_pair()` builds the target and draft the app offers; `one_thread()` runs them on one CPU
thread. Their timings say nothing about real models; their acceptance and distributions follow
the same rules, which is what the lab and the tests need.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

TOY_PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]  # the toy pair has no tokenizer: its prompt is token ids
LAB_TOY = {"vocab_size": 12, "noise": None}  # the lab's toy pair: a draft far from the target (see toy_pair)
LAB_TOY_PROMPT = [3, 1, 4, 1, 5]
PEAKY = 40.0  # initialiser scale of the toy pair: large weights give a peaky softmax, like a real LM


def tiny_llama(
    vocab_size: int = 16,
    seed: int = 0,
    layers: int = 2,
    init_scale: float = 1.0,
    hidden: int = 32,
    eos: int | None = None,
    name: str | None = None,
) -> Any:
    """A random-initialised LlamaForCausalLM wrapped as a LoadedModel (CPU, float32, no tokenizer).

    The weights depend only on the arguments: the global torch generator is seeded for the build
    and restored after, so building a model never changes what later random draws give.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz.engine.models import LoadedModel

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
        eos_token_id=eos,
        pad_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
    name = name or f"tiny-llama-{vocab_size}-{seed}"
    return LoadedModel(name=name, model=model, tokenizer=None, device="cpu", dtype="float32")


def toy_pair(vocab_size: int = 16, noise: float | None = 0.05) -> tuple[Any, Any]:
    """(target, draft): a tiny random Llama with peaky outputs, and a noisy copy of it as the draft.

    Why a noisy copy: two independent random models barely agree (alpha near 0.1), which shows
    nothing but rejections; the copy with every weight moved by `noise` standard deviations agrees
    often but not always (alpha about 0.7 at noise 0.05), so accept, reject, resample and bonus
    all run. The draft is as large as the target, so the toy pair's timings say nothing about
    real speedups.

    noise=None gives an independent one-layer random draft instead (alpha about 0.3): far from
    the target, so a wrong verification rule shifts the output a lot (the lab uses it).
    """
    import torch

    target = tiny_llama(vocab_size, seed=1, layers=2, init_scale=PEAKY, name="toy-target")
    if noise is None:
        draft = tiny_llama(vocab_size, seed=2, layers=1, init_scale=PEAKY, name="toy-draft")
    else:
        draft = dataclasses.replace(target, name="toy-draft", model=copy.deepcopy(target.model))
        noise_gen = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for param in draft.model.parameters():
                if param.numel() > 1:
                    param.add_(noise * param.std() * torch.randn(param.shape, generator=noise_gen))
    return target, draft


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run tiny models on one CPU thread (restored after). Why: on a shared CPU, intra-op threads
    spin against each other and made a toy decode many times slower (docs/benchmarks.md, "Figures
    once kept in code comments", "Toy models")."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
