"""The draft head's step in one native call on the CPU (csrc/step.cpp, `torch.ops.specviz.decoder_layers`).

A draft head step (specviz.engine.draft_head.DraftHead.step) is a Llama decoder layer between the head's
fc and its norm and E_S. Run eagerly it is about twenty torch calls and a cache grown by concatenation;
once the target's step runs in one native call, those calls made drafting cost nearly as much as a
verification pass saved (docs/benchmarks.md, "The draft head's step in one call"). Where the kernels
chosen at load run every linear of the head's layers natively, the layers run as the target's do:

    x = fc(concat(f, embed(tokens)))                       [T, D]   (DraftHead.merge, in Python)
    every head layer in one decoder_layers call             [T, D]   (its cache a LeanCache, written in place)
    f^ = norm(x); logits = f^ E_S^T                         [T, S]   (DraftHead.out, in Python)

A chain step (a catch-up or a drafted token) is causal over the cache; a tree level passes its
`allowed` [m, N] as an additive mask. The numbers are float32 throughout, as the eager step's, and
differ from it only in the last bits (summation order, expf): q is whatever the head computed, and
the verification rule keeps the output exact for any q (tests/test_native_head.py).
SPECVIZ_STEP=python keeps the eager step, as it does for the target.
"""

from __future__ import annotations

import os

import torch

from specviz.engine.lean_llama import LeanCache
from specviz.engine.native_step import stacked_weights
from specviz.engine.packing import FusedLinears


class NativeHead:
    """The weights of the head's layers as decoder_layers takes them (views of the linears' layouts)."""

    def __init__(self, head, weights: list[torch.Tensor], formats: list[int], outs: list[int]):
        self.head, self.weights, self.formats, self.outs = head, weights, formats, outs

    @staticmethod
    def of(head) -> NativeHead | None:
        """The native step of a DraftHead on the CPU, or None: SPECVIZ_STEP=python, weights not float32,
        a size that is not a whole number of 16-float vectors, or a linear the kernels chose to run
        another way (its q, k, v and its gate, up are fused here, as the target's are)."""
        cfg = head.cfg
        if os.environ.get("SPECVIZ_STEP", "native") == "python" or head.device.type != "cpu":
            return None
        if head.norm.weight.dtype != torch.float32 or cfg.head_dim % 16 or cfg.hidden % 16:
            return None
        stacked = stacked_weights(
            ((layer.input_norm.weight.detach(), layer.post_norm.weight.detach()),
             FusedLinears.of([layer.q_proj, layer.k_proj, layer.v_proj]), layer.o_proj,
             FusedLinears.of([layer.gate_proj, layer.up_proj]), layer.down_proj)
            for layer in head.layers
        )  # fmt: skip
        return None if stacked is None else NativeHead(head, *stacked)

    def new_cache(self) -> LeanCache:
        cfg = self.head.cfg
        return LeanCache(cfg.depth, cfg.kv_heads, cfg.head_dim, torch.float32)

    def step(
        self, features: torch.Tensor, tokens: torch.Tensor, first_index: int, cache: LeanCache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As DraftHead.step: features [T, D], tokens [T] at head indices first_index.. -> (f^ [T, D],
        subset logits [T, S]); appends T entries to the cache, each seeing the earlier ones and itself."""
        positions = torch.arange(first_index, first_index + tokens.shape[0])  # [T]
        return self._run(features, tokens, positions, cache, None)

    def tree_step(
        self, features: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache: LeanCache, allowed
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As DraftHead.tree_step: m nodes at positions [m], allowed [m, N] bool (N: the cache's length
        after them) -> (f^ [m, D], subset logits [m, S])."""
        mask = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill_(~allowed.cpu(), float("-inf"))  # [m, N]
        return self._run(features, tokens, positions, cache, mask)

    def _run(self, features, tokens, positions, cache: LeanCache, mask) -> tuple[torch.Tensor, torch.Tensor]:
        head, t, past = self.head, tokens.shape[0], cache.length
        cache.reserve(t)
        cos, sin = head.rope(positions)  # [T, hd] each
        x = head.merge(features, tokens)  # [T, D]
        out = torch.ops.specviz.decoder_layers(
            x.contiguous(), self.weights, self.formats, self.outs, [cache.keys], [cache.values], [t], [past],
            [cos.contiguous()], [sin.contiguous()], [mask], head.cfg.heads, head.cfg.rms_eps, [],
        )  # fmt: skip
        cache.length = past + t
        return head.out(out[0])
