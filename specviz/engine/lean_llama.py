"""A lean forward for Llama-family targets: the same numbers as transformers' forward, less framework.

A CPU step of the offline target is memory-bound in its linears, but a large share of it was the
rest: module calls, keyword plumbing, mask building, the cache's concatenations (how much:
docs/benchmarks.md, "Kernels chosen by measurement, and the lean forward"). This forward runs the
same weights (the model's own linears, with the kernels specviz.engine.kernels chose) as a plain loop:

    x = embed(ids)                                                     [T, D]
    per layer: h = rmsnorm(x); q, k, v = h Wq, h Wk, h Wv; rotary on q, k; write k, v into the
               cache; x += Wo attention(q, cache keys, cache values); h = rmsnorm(x);
               x += Wdown (silu(h Wgate) * h Wup)
    f = rmsnorm(x); logits = f[-keep:] Wlm

with a KV cache preallocated per run (LeanCache: writes in place, crops by moving its length).
Where every linear runs specviz's native kernel (the weights as shipped, or float32 native layouts
fused), one run's pass runs all the layers in one native call instead of this loop
(specviz.engine.native_step; SPECVIZ_STEP=python keeps the loop, to compare the two).
It serves only what it was checked on: LlamaForCausalLM with rotary "default" scaling, no biases,
SiLU, float32 or bfloat16 on the CPU; `lean_unavailable` names why any other model keeps
transformers' forward. tests/test_lean_llama.py holds it to transformers' logits and features.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from specviz.engine.packing import FusedLinears


def lean_unavailable(model, cpu_only: bool = True) -> str | None:
    """Why `model` cannot use the lean forward, or None when it can. cpu_only=False asks only about
    the architecture (the static step, specviz.engine.static_llama, runs the same layers on CUDA)."""
    cfg = getattr(model, "config", None)
    if type(model).__name__ != "LlamaForCausalLM" or cfg is None:
        return f"{type(model).__name__} is not a LlamaForCausalLM"
    if cpu_only and model.device.type != "cpu":
        return "the lean forward is for the CPU"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "biased projections"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act}"
    scaling = getattr(cfg, "rope_scaling", None) or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default")) if isinstance(scaling, dict) else "default"
    if rope_type != "default":
        return f"rotary scaling {rope_type!r}"
    if getattr(cfg, "_attn_implementation", "sdpa") not in ("sdpa", "eager"):
        return f"attention {cfg._attn_implementation}"
    return None


class LeanCache:
    """Keys and values of every layer, [layers, Hkv, capacity, hd] each, the first `length` valid."""

    # Capacity 0: the first pass reserves the prompt's entries exactly and later ones double it, so a
    # class's thirty short runs hold only the entries they use rather than a fixed 256 each (the
    # sizes: docs/benchmarks.md, "Figures once kept in code comments", "Memory bounds").
    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, capacity: int = 0):
        self.keys = torch.zeros(layers, kv_heads, capacity, head_dim, dtype=dtype)
        self.values = torch.zeros_like(self.keys)
        self.length = 0
        self.written = 0  # entries written by the pass in progress (layers write one after another)

    def get_seq_length(self) -> int:
        return self.length

    def reserve(self, extra: int) -> None:
        """Room for `extra` more entries (doubling, so a long run copies O(log n) times)."""
        need = self.length + extra
        if need > self.keys.shape[2]:
            capacity = max(need, 2 * self.keys.shape[2])
            for name in ("keys", "values"):
                old = getattr(self, name)
                new = old.new_zeros(*old.shape[:2], capacity, old.shape[3])
                new[:, :, : self.length] = old[:, :, : self.length]
                setattr(self, name, new)

    def crop(self, keep: int) -> None:
        """Keep the first `keep` entries (a negative count drops that many, as transformers' crop)."""
        self.length = self.length + keep if keep < 0 else min(keep, self.length)

    def select(self, keep: torch.Tensor) -> None:
        """Keep only entries `keep` [N] (in that order): a draft tree's accepted path."""
        n = keep.shape[0]
        self.keys[:, :, :n] = self.keys.index_select(2, keep)
        self.values[:, :, :n] = self.values.index_select(2, keep)
        self.length = n


class LeanLlama:
    """The lean forward over a transformers LlamaForCausalLM's own modules (nothing is copied)."""

    def __init__(self, model, cpu_only: bool = True):
        reason = lean_unavailable(model, cpu_only)
        if reason is not None:
            raise ValueError(reason)
        cfg = model.config
        self.model = model
        self.layers = model.model.layers
        embed = model.model.embed_tokens.weight  # [V, D] (its dtype and device; read through embed_rows)
        self.norm = model.model.norm
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.inv_freq = model.model.rotary_emb.inv_freq.float()  # [hd / 2]
        self.attention_scaling = float(getattr(model.model.rotary_emb, "attention_scaling", 1.0))
        self.dtype, self.device = embed.dtype, embed.device
        self.fused: list[tuple[FusedLinears | None, FusedLinears | None]] = [(None, None)] * len(self.layers)
        self.native = None  # specviz.engine.native_step.NativeStep: every layer in one native call, where it runs
        self.prefixes = None  # specviz.engine.prefix_cache.PrefixStore (with the native step)

    def fuse_projections(self) -> int:
        """Run each layer's q, k, v as one product and its gate and up as another, where the kernels
        chosen allow it (specviz.engine.packing.FusedLinears: native everywhere); called once the
        kernels are set. Returns how many layers were fused."""
        self.fused = [
            (
                FusedLinears.of([layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj]),
                FusedLinears.of([layer.mlp.gate_proj, layer.mlp.up_proj]),
            )
            for layer in self.layers
        ]
        fused = sum(qkv is not None and gate_up is not None for qkv, gate_up in self.fused)
        if fused == len(self.layers) and os.environ.get("SPECVIZ_STEP", "native") != "python":
            from specviz.engine.native_step import NativeStep

            self.native = NativeStep.of(self)
            if os.environ.get("SPECVIZ_PREFIX_CACHE", "1") != "0":  # 0: every prompt computed whole, to compare
                from specviz.engine.prefix_cache import PrefixStore

                self.prefixes = PrefixStore()
        return fused

    def embed_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [T] -> their embeddings [T, D]: the model's embedding looked up at each call, as it may be
        the weights as shipped (specviz.engine.blocks.BlockEmbedding) once they are loaded."""
        return self.model.model.embed_tokens(ids)

    def new_cache(self) -> LeanCache:
        return LeanCache(len(self.layers), self.kv_heads, self.head_dim, self.dtype)

    def rms(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        # As LlamaRMSNorm: in float32, then back to the weights' dtype before the scale.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return norm.weight * h.to(x.dtype)

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [T] -> cos, sin [T, hd] as LlamaRotaryEmbedding computes them."""
        freqs = positions.float()[:, None] * self.inv_freq[None, :]  # [T, hd/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        return (emb.cos() * self.attention_scaling).to(self.dtype), (emb.sin() * self.attention_scaling).to(self.dtype)

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: LeanCache,
        keep: int,
        feature_layers: tuple[int, ...] | None = None,
        tree: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        """input_ids [T] -> (logits [keep, V], features [T, (n+1)D] or None), as
        specviz.engine.target.target_forward. tree: (positions [T], additive mask [1, 1, T, N + T])."""
        return self.forward_many([LeanRequest(input_ids, cache, keep, feature_layers, tree)])[0]

    def forward_many(
        self, requests: list[LeanRequest], reuse_prefixes: bool = False
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """One pass over several runs' new tokens, each with its own cache -> (logits [keep_i, V],
        features [T_i, (n+1)D] or None) per request, as `forward` gives it alone.

        As vLLM batches sequences: every request's rows are stacked into x [sum T_i, D], so each
        linear (q, k, v, o, the MLP, the LM head) streams its weights from memory once for all of
        them, which is what a memory-bound CPU step pays for; rotary, the cache writes and
        attention run per request on its own cache. A row's numbers equal its solo pass's up to the
        last bits a linear's kernel may round differently for another row count (specviz.engine.packing:
        none with packed kernels); with the native step (specviz.engine.native_step, every layer in one
        call, whenever it serves) none at all, attention and norms included. reuse_prefixes (the
        batcher's passes): with the native step, a prompt's first pass continues from its longest
        beginning already computed, with the same numbers (specviz.engine.prefix_cache). A solo decode
        never does: a timed pair's target-alone half would skip the prompt its speculative half computed."""
        if len({id(r.cache) for r in requests}) < len(requests):
            raise ValueError("each request of one pass needs its own cache")
        if reuse_prefixes and self.native is not None and self.prefixes is not None:
            return self.prefixes.forward_many(self, requests, self._pass)
        return self._pass(requests)

    def _pass(self, requests: list[LeanRequest]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """forward_many's pass itself: every request's new tokens, as they are."""
        starts = itertools.accumulate((r.input_ids.shape[0] for r in requests), initial=0)
        spans = [_Span.of(self, r, start) for r, start in zip(requests, starts, strict=False)]
        x = self.embed_rows(torch.cat([r.input_ids for r in requests]))  # [sum T, D]
        wanted = [i for i in range(len(self.layers)) if any(i in (r.feature_layers or ()) for r in requests)]
        if self.native is not None:  # every layer in one native call (specviz.engine.native_step)
            x, earlier = self.native.layers(x, spans, wanted)
        else:
            x, earlier = self._layers(x, spans, wanted)
        hidden = self.rms(x, self.norm)  # [sum T, D]
        kept = torch.cat([hidden[s.rows][-r.keep :] for s, r in zip(spans, requests, strict=True)])  # [sum keep, D]
        logits = self.model.lm_head(kept).split([r.keep for r in requests])  # looked up here: kernels swap it
        results = []
        for s, r, lg in zip(spans, requests, logits, strict=True):
            s.cache.length = s.end
            features = None
            if r.feature_layers is not None:  # [T_i, (n+1)D]
                features = torch.cat([*(earlier[j][s.rows] for j in r.feature_layers), hidden[s.rows]], dim=-1)
            results.append((lg, features))
        return results

    def _layers(self, x: torch.Tensor, spans: list[_Span], wanted: list[int]) -> tuple[torch.Tensor, dict]:
        """Every decoder layer as a Python loop of torch calls: x [sum T, D] -> (x after the last layer,
        {layer in wanted: its output [sum T, D]})."""
        earlier = {}
        for i in range(len(self.layers)):

            def attend(q, k, v, i=i):  # [sum T, H*hd], [sum T, Hkv*hd] x2 -> [sum T, H*hd]
                return torch.cat([self._attend(i, s, q[s.rows], k[s.rows], v[s.rows]) for s in spans])

            x = self.layer(i, x, attend)
            if i in wanted:
                earlier[i] = x
        return x, earlier

    def layer(self, i: int, x: torch.Tensor, attend) -> torch.Tensor:
        """Decoder layer i on x [T, D] -> [T, D]; attend(q [T, H*hd], k, v [T, Hkv*hd]) -> [T, H*hd]
        does the rest of the attention (rotary, the cache, the mask): this forward's per request,
        the static step's over a whole preallocated cache (specviz.engine.static_llama)."""
        layer = self.layers[i]
        attn, mlp = layer.self_attn, layer.mlp
        qkv, gate_up = self.fused[i]
        a = self.rms(x, layer.input_layernorm)
        q, k, v = qkv(a) if qkv else (attn.q_proj(a), attn.k_proj(a), attn.v_proj(a))  # [T, H*hd], [T, Hkv*hd] x2
        x = x + attn.o_proj(attend(q, k, v))
        m = self.rms(x, layer.post_attention_layernorm)
        gate, up = gate_up(m) if gate_up else (mlp.gate_proj(m), mlp.up_proj(m))  # [T, I] each
        return x + mlp.down_proj(nn.functional.silu(gate) * up)

    def _attend(self, i: int, s: _Span, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Layer i's attention for one request: q [T, H*hd], k, v [T, Hkv*hd] -> [T, H*hd]. Writes
        k, v into its cache at its positions and attends over its cache."""
        t, hd, h, hkv = s.end - s.past, self.head_dim, self.heads, self.kv_heads
        # q's and k's heads rotated in one go (elementwise: the same numbers as one at a time, fewer calls)
        qk = rope(torch.cat([q, k], dim=-1).view(t, h + hkv, hd).transpose(0, 1), s.cos, s.sin)  # [H + Hkv, T, hd]
        q, k = qk[:h], qk[h:]  # [H, T, hd], [Hkv, T, hd]
        s.cache.keys[i, :, s.past : s.end] = k
        s.cache.values[i, :, s.past : s.end] = v.view(t, hkv, hd).transpose(0, 1)
        keys, values = s.cache.keys[i : i + 1, :, : s.end], s.cache.values[i : i + 1, :, : s.end]  # [1, Hkv, N, hd]
        out = nn.functional.scaled_dot_product_attention(q[None], keys, values, attn_mask=s.mask, enable_gqa=True)
        return out[0].transpose(0, 1).reshape(t, h * hd)


class LeanRequest(NamedTuple):
    """One run's share of a pass: what `LeanLlama.forward` takes."""

    input_ids: torch.Tensor  # [T] the new tokens
    cache: LeanCache
    keep: int  # logits of the last `keep` positions
    feature_layers: tuple[int, ...] | None = None
    tree: tuple[torch.Tensor, torch.Tensor] | None = None  # (positions [T], additive mask [1, 1, T, N + T])


@dataclass
class _Span:
    """Where one request sits in a pass: its rows of x, its cache positions, mask and rotary."""

    rows: slice  # its rows of the stacked x
    cache: LeanCache
    past: int  # cache entries before this pass
    end: int  # past + T
    mask: torch.Tensor | None  # [T, past + T] bool or additive; None: one row sees everything
    tree: bool  # the mask is a draft tree's (additive), not the causal one
    cos: torch.Tensor  # [T, hd]
    sin: torch.Tensor

    @staticmethod
    def of(lean: LeanLlama, r: LeanRequest, start: int) -> _Span:
        t, past = r.input_ids.shape[0], r.cache.length
        if r.tree is None:
            positions = torch.arange(past, past + t)
            mask = None
            if t > 1:  # causal: row i sees the cache and new rows up to itself
                mask = torch.ones(t, past + t, dtype=torch.bool).tril(past)
        else:
            positions, mask = r.tree[0], r.tree[1][0, 0]
        r.cache.reserve(t)
        cos, sin = lean.rotary(positions)
        return _Span(slice(start, start + t), r.cache, past, past + t, mask, r.tree is not None, cos, sin)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [heads, T, hd] rotated as transformers' apply_rotary_pos_emb (rotate_half)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin
