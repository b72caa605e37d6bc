"""How the target writes text with transformers' own generate(): many prompts at once, left
padded, and the generation config for pure sampling or greedy. The bench's reference for the target
alone and the training recipes' way of writing answers."""

from __future__ import annotations

import torch


def left_padded(encoded: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts of different lengths -> input_ids and attention_mask [B, P], padded on the left so
    every row's next token is written at the same column."""
    width = max(len(e) for e in encoded)
    input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)  # [B, P]
    attention = torch.zeros((len(encoded), width), dtype=torch.long)  # [B, P]
    for i, e in enumerate(encoded):
        input_ids[i, width - len(e) :] = torch.tensor(e)
        attention[i, width - len(e) :] = 1
    return input_ids, attention


def generation_config(max_new_tokens: int, temperature: float, eos: int | None, pad: int | None, **extra):
    """transformers' GenerationConfig for pure sampling at `temperature` (0: greedy), no top-k/p."""
    from transformers import GenerationConfig

    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=temperature > 0,
        temperature=temperature if temperature > 0 else None,
        top_k=None,
        top_p=None,
        eos_token_id=eos,
        pad_token_id=pad,
        **extra,
    )
