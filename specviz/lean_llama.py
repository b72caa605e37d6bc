"""A lean forward for Llama-family targets: the same numbers as transformers' forward, less framework.

A CPU step of the offline target is memory-bound in its linears, but a quarter of it was the rest:
module calls, keyword plumbing, mask building, the cache's concatenations (measured on AMD EPYC:
9.5 of 37.8 ms for one new token, 13.8 of 38.6 for five; docs/benchmarks.md). This forward runs the
same weights (the model's own linears, with the kernels specviz.kernels chose) as a plain loop:

    x = embed(ids)                                                     [T, D]
    per layer: h = rmsnorm(x); q, k, v = h Wq, h Wk, h Wv; rotary on q, k; write k, v into the
               cache; x += Wo attention(q, cache keys, cache values); h = rmsnorm(x);
               x += Wdown (silu(h Wgate) * h Wup)
    f = rmsnorm(x); logits = f[-keep:] Wlm

with a KV cache preallocated per run (LeanCache: writes in place, crops by moving its length).
It serves only what it was checked on: LlamaForCausalLM with rotary "default" scaling, no biases,
SiLU, float32 or bfloat16 on the CPU; `lean_unavailable` names why any other model keeps
transformers' forward. tests/test_lean_llama.py holds it to transformers' logits and features.
"""

from __future__ import annotations

import torch
from torch import nn


def lean_unavailable(model) -> str | None:
    """Why `model` cannot use the lean forward, or None when it can."""
    cfg = getattr(model, "config", None)
    if type(model).__name__ != "LlamaForCausalLM" or cfg is None:
        return f"{type(model).__name__} is not a LlamaForCausalLM"
    if model.device.type != "cpu":
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

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, capacity: int = 256):
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

    def __init__(self, model):
        reason = lean_unavailable(model)
        if reason is not None:
            raise ValueError(reason)
        cfg = model.config
        self.model = model
        self.layers = model.model.layers
        self.embed = model.model.embed_tokens.weight  # [V, D]
        self.norm = model.model.norm
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.inv_freq = model.model.rotary_emb.inv_freq.float()  # [hd / 2]
        self.attention_scaling = float(getattr(model.model.rotary_emb, "attention_scaling", 1.0))
        self.dtype = self.embed.dtype

    def new_cache(self) -> LeanCache:
        return LeanCache(len(self.layers), self.kv_heads, self.head_dim, self.dtype)

    def _rms(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        # As LlamaRMSNorm: in float32, then back to the weights' dtype before the scale.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return norm.weight * h.to(x.dtype)

    def _rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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
        specviz.target.target_forward. tree: (positions [T], additive mask [1, 1, T, N + T])."""
        t, past = input_ids.shape[0], cache.length
        if tree is None:
            positions = torch.arange(past, past + t)
            mask = None
            if t > 1:  # causal: row i sees the cache and new rows up to itself
                mask = torch.ones(t, past + t, dtype=torch.bool).tril(past)
        else:
            positions, mask = tree[0], tree[1][0, 0]
        cos, sin = self._rotary(positions)  # [T, hd]
        cache.reserve(t)
        end = past + t
        x = self.embed[input_ids]  # [T, D]
        earlier = {}
        hd, h, hkv = self.head_dim, self.heads, self.kv_heads
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            a = self._rms(x, layer.input_layernorm)
            q = attn.q_proj(a).view(t, h, hd).transpose(0, 1)  # [H, T, hd]
            k = attn.k_proj(a).view(t, hkv, hd).transpose(0, 1)  # [Hkv, T, hd]
            v = attn.v_proj(a).view(t, hkv, hd).transpose(0, 1)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            cache.keys[i, :, past:end] = k
            cache.values[i, :, past:end] = v
            keys, values = cache.keys[i : i + 1, :, :end], cache.values[i : i + 1, :, :end]  # [1, Hkv, N, hd]
            out = nn.functional.scaled_dot_product_attention(q[None], keys, values, attn_mask=mask, enable_gqa=True)
            x = x + attn.o_proj(out[0].transpose(0, 1).reshape(t, h * hd))
            mlp = layer.mlp
            m = self._rms(x, layer.post_attention_layernorm)
            x = x + mlp.down_proj(nn.functional.silu(mlp.gate_proj(m)) * mlp.up_proj(m))
            if feature_layers and i in feature_layers:
                earlier[i] = x
        cache.length = end
        hidden = self._rms(x, self.norm)  # [T, D]
        logits = self.model.lm_head(hidden[-keep:])  # [keep, V] (looked up here: kernels swap it in place)
        if feature_layers is None:
            return logits, None
        return logits, torch.cat([*(earlier[i] for i in feature_layers), hidden], dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [heads, T, hd] rotated as transformers' apply_rotary_pos_emb (rotate_half)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin
