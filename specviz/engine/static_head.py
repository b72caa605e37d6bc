"""The draft head's static-shape step: its shapes fixed by the row count alone, so a CUDA graph can hold it.

The head's eager step (DraftHead.step, tree_step) grows its cache by concatenation and builds its
mask to the cache's length, so its shapes move every step. This lays the same computation out as the
target's static step does (specviz.engine.static_llama, whose cache and pool it reuses):

    the head's KV cache is a StaticCache ([depth, Hkv, C, hd] each), preallocated, with its length
    also on the device (length_t, written before each step);
    the T new entries' keys and values are written at slots length_t .. length_t + T - 1;
    positions come in as a tensor [T];
    attention runs over all C slots under a mask [T, C]:
        a chain step (catch-up or drafting): slot j seen by new row t when j <= length_t + t,
            built on the device from length_t;
        a tree level: the caller's `allowed` [T, N] (the shared prefix, each node's ancestors and
            itself) padded with unseen slots to C.

Roll-back moves the length (LeanCache.crop); nothing is reallocated while the capacity holds.
The products are the eager step's (DraftHead.merge, HeadLayer.qkv and finish, DraftHead.out); only
the attention differs (over C slots, the masked ones at zero weight), so q equals the eager step's
to a named tolerance, not bit for bit (tests/test_static_head.py). A DraftHead whose `static` is set
runs every step on one of these caches (DraftHead.new_cache); specviz.engine.draft_head.load_head
sets it on CUDA only, there with each step of a repeating shape captured once per cache
(specviz.engine.cuda_steps.captured_head_step). The CPU keeps the eager step (docs/benchmarks.md).
"""

from __future__ import annotations

import torch
from torch import nn

from specviz.engine.static_llama import CachePool, StaticCache

CAPTURED_ROWS = 16  # steps of at most this many rows repeat (catch-ups, tree levels) and are captured;
# a longer one is a prompt's first catch-up, run once per run, eagerly


class StaticHead(CachePool):
    """The static-shape step over a DraftHead's modules. capture: None (every step eager) or, on CUDA,
    specviz.engine.cuda_steps.captured_head_step (each step of a repeating shape from a CUDA graph)."""

    def __init__(self, head, capture=None):
        device = head.device
        if capture is not None and device.type != "cuda":
            raise ValueError("CUDA graphs capture only on a CUDA device")
        cfg = head.cfg
        super().__init__(cfg.depth, cfg.kv_heads, cfg.head_dim, head.norm.weight.dtype, device)
        self.head, self.capture = head, capture

    def step(
        self, features: torch.Tensor, tokens: torch.Tensor, first_index: int, cache: StaticCache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As DraftHead.step: features [T, D], tokens [T] at head indices first_index.. -> (f^ [T, D],
        subset logits [T, S]); writes T entries after the cache's length."""
        t = tokens.shape[0]
        positions = torch.arange(first_index, first_index + t, device=self.device)  # [T]
        return self._run(cache, features, tokens, positions, None)

    def tree_step(
        self, features: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache: StaticCache, allowed
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As DraftHead.tree_step: m nodes, allowed [m, N] (N: the cache's length after them) ->
        (f^ [m, D], subset logits [m, S])."""
        m = tokens.shape[0]
        cache.reserve(m)
        mask = torch.zeros(m, cache.capacity, dtype=torch.bool, device=self.device)  # [m, C]
        mask[:, : allowed.shape[1]] = allowed
        return self._run(cache, features, tokens, positions, mask)

    def _run(self, cache: StaticCache, features, tokens, positions, mask) -> tuple[torch.Tensor, torch.Tensor]:
        t, past = tokens.shape[0], cache.length
        cache.reserve(t)
        cache.length_t.fill_(past)  # a device write, no host sync
        if self.capture is not None and t <= CAPTURED_ROWS:
            inputs = (features, tokens, positions) + (() if mask is None else (mask,))
            f, logits = self.capture(self.head, cache, t, mask is not None).run(*inputs)
        else:
            f, logits = head_step(self.head, cache, features, tokens, positions, mask)
        cache.length = past + t
        return f, logits


def head_step(
    head, cache: StaticCache, features: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, mask=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """features [T, D], tokens [T], positions [T], mask [T, C] bool or None (a chain) -> (f^ [T, D],
    subset logits [T, S]). Reads the cache's length from cache.length_t only, so nothing here waits
    for the host; writes the T entries' keys and values after it."""
    t, device = tokens.shape[0], tokens.device
    slots = cache.length_t + torch.arange(t, device=device)  # [T] where the new entries go
    if mask is None:  # each new entry sees every earlier one and itself
        mask = torch.arange(cache.capacity, device=device)[None, :] <= slots[:, None]  # [T, C]
    cos, sin = head.rope(positions)  # [T, hd] each
    x = head.merge(features, tokens)  # [T, D]
    for i, layer in enumerate(head.layers):
        q, k, v = layer.qkv(x, cos, sin)  # [H, T, hd], [Hkv, T, hd]
        cache.keys[i].index_copy_(1, slots, k)
        cache.values[i].index_copy_(1, slots, v)
        attended = nn.functional.scaled_dot_product_attention(
            q, layer.expand_kv(cache.keys[i]), layer.expand_kv(cache.values[i]), attn_mask=mask
        )  # [H, T, hd]
        x = layer.finish(x, attended)
    return head.out(x)
