"""The lean forward's static-shape step: shapes fixed by the row count alone, so a CUDA graph can hold it.

A CUDA graph replays kernels at fixed addresses with fixed shapes. The lean forward's shapes move
every step (the cache grows, the mask is built to the length), so this step lays the same
computation out as gpt-fast does:

    the KV cache is preallocated to the run's capacity (StaticCache, [layers, Hkv, C, hd] each);
    the cache's length also lives on the device (length_t), written before each pass;
    the T new rows' keys and values are written at slots length_t .. length_t + T - 1;
    positions come in as a tensor [T] (a draft tree's node sits at text + depth);
    attention runs over all C slots with a mask [T, C] built on the device from length_t:
        slot j < length_t: seen by every row (the text kept so far);
        slot length_t + u: seen by row t when local[t, u] (causal, or a draft tree's ancestors);
        every later slot: seen by none.

Roll-back moves the length (LeanCache.crop), a tree's kept path is gathered (LeanCache.select);
nothing is reallocated while the capacity holds. The layers are LeanLlama.layer's, the same
weights and products; only the attention differs (over C slots with the masked ones at zero
weight), so the logits equal the lean forward's to a named tolerance, not bit for bit
(tests/test_static_llama.py says which and why). StaticLlama.forward takes what LeanLlama.forward
takes; on CUDA each one-row step and verification pass is captured once per shape
(specviz.engine.cuda_steps) and replayed.
"""

from __future__ import annotations

import threading
import weakref

import torch

from specviz.engine.lean_llama import LeanCache, LeanLlama, rope

CAPACITY_STEP = 256  # capacities round up to this, so runs of similar length reuse one cache and its graphs


class StaticCache(LeanCache):
    """A LeanCache on any device whose capacity is fixed up front, with its length also on the device."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, capacity: int, device):
        self.keys = torch.zeros(layers, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        self.length = 0
        self.written = 0
        self.length_t = torch.zeros((), dtype=torch.long, device=device)  # length, where the step reads it
        self.graphs: dict = {}  # steps captured on these buffers (specviz.engine.cuda_steps), by shape

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def reserve(self, extra: int) -> None:
        """Room for `extra` more entries. Past the capacity the buffers grow as LeanCache's do, and the
        captured steps go: they hold the old buffers' addresses."""
        keys = self.keys
        super().reserve(extra)
        if self.keys is not keys:
            self.graphs.clear()


class CachePool:
    """Static caches of one network's shapes ([layers, Hkv, C, hd]), handed out per run and taken back,
    with the steps captured on them, once the run's owner is collected."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device):
        self.shape, self.dtype, self.device = (layers, kv_heads, head_dim), dtype, device
        self._free: dict[int, list[StaticCache]] = {}  # caches whose run ended, by capacity (their graphs kept)
        self._lock = threading.Lock()

    def new_cache(self, rows: int, owner=None, larger: bool = False) -> StaticCache:
        """A cache for at least `rows` entries: a free one of the same rounded capacity (with the steps
        captured on it) or a new one; larger: the largest free one serves too (for a run whose length
        is not known up front). When `owner` is collected the cache goes back to the free ones."""
        capacity = -(-max(rows, 1) // CAPACITY_STEP) * CAPACITY_STEP
        with self._lock:
            if larger:
                capacity = max([c for c, free in self._free.items() if free and c >= capacity], default=capacity)
            free = self._free.get(capacity, [])
            cache = free.pop() if free else None
        if cache is None:
            cache = StaticCache(*self.shape, self.dtype, capacity, self.device)
        cache.length = 0
        if owner is not None:
            weakref.finalize(owner, self._release, cache)
        return cache

    def _release(self, cache: StaticCache) -> None:
        with self._lock:
            self._free.setdefault(cache.capacity, []).append(cache)


class StaticLlama(CachePool):
    """The static-shape step over a LeanLlama's modules. capture: None (every pass eager) or, on CUDA,
    specviz.engine.cuda_steps.captured_step, which replays each one-row step and verification pass
    from a CUDA graph captured once per cache and shape."""

    def __init__(self, lean: LeanLlama, capture=None):
        # A capture that runs anywhere is a test's stand-in (tests/test_capture_proof.py), planted through
        # the same code on the CPU.
        if capture is not None and lean.device.type != "cuda" and not getattr(capture, "runs_anywhere", False):
            raise ValueError("CUDA graphs capture only on a CUDA device")
        super().__init__(len(lean.layers), lean.kv_heads, lean.head_dim, lean.dtype, lean.device)
        self.lean, self.capture = lean, capture

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: StaticCache,
        keep: int,
        feature_layers: tuple[int, ...] | None = None,
        tree: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        """input_ids [T] -> (logits [keep, V], features [T, (n+1)D] or None), as LeanLlama.forward.
        tree: (positions [T], additive mask [1, 1, T, past + T]) as specviz.engine.target.node_layout
        gives it; its first `past` columns are the text, which every row sees."""
        t, past = input_ids.shape[0], cache.length
        if tree is None:
            positions = torch.arange(past, past + t, device=self.device)
            local = torch.ones(t, t, dtype=torch.bool, device=self.device).tril()
        else:
            positions, local = tree[0], tree[1][0, 0, :, past:] == 0  # [T], [T, T]
        cache.reserve(t)
        cache.length_t.fill_(past)  # a device write, no host sync
        if self.capture is not None and t == keep:  # a one-row step or a verification pass: shapes that repeat
            logits, features = self.capture(self.lean, cache, t, feature_layers).run(input_ids, positions, local)
        else:  # a prompt's first pass, once per run
            logits, features = static_step(self.lean, cache, input_ids, positions, local, keep, feature_layers)
        cache.length = past + t
        return logits, features


def static_step(
    lean: LeanLlama,
    cache: StaticCache,
    ids: torch.Tensor,
    positions: torch.Tensor,
    local: torch.Tensor,
    keep: int,
    feature_layers: tuple[int, ...] | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """ids [T], positions [T], local [T, T] bool (new row t sees new row u) -> (logits [keep, V],
    features [T, (n+1)D] or None). Reads the cache's length from cache.length_t only, so nothing here
    waits for the host; writes the T rows' keys and values after it."""
    t, capacity, device = ids.shape[0], cache.capacity, ids.device
    slots = cache.length_t + torch.arange(t, device=device)  # [T] where the new rows' entries go
    offset = torch.arange(capacity, device=device) - cache.length_t  # [C] each slot's place among the new rows
    new = (offset >= 0) & (offset < t)
    mask = (offset < 0)[None, :] | (new[None, :] & local[:, offset.clamp(0, t - 1)])  # [T, C]
    cos, sin = lean.rotary(positions)  # [T, hd] each
    x = lean.embed_rows(ids)  # [T, D]
    earlier = {}
    for i in range(len(lean.layers)):

        def attend(q, k, v, i=i):
            return _attend(lean, cache, i, slots, mask, cos, sin, q, k, v)

        x = lean.layer(i, x, attend)
        if feature_layers and i in feature_layers:
            earlier[i] = x
    hidden = lean.rms(x, lean.norm)  # [T, D]
    logits = lean.model.lm_head(hidden[-keep:])  # [keep, V]
    if feature_layers is None:
        return logits, None
    return logits, torch.cat([*(earlier[j] for j in feature_layers), hidden], dim=-1)  # [T, (n+1)D]


def _attend(lean: LeanLlama, cache: StaticCache, i: int, slots, mask, cos, sin, q, k, v) -> torch.Tensor:
    """Layer i's attention: q [T, H*hd], k, v [T, Hkv*hd] -> [T, H*hd]. Writes k, v at `slots` [T] and
    attends over every slot of the cache under mask [T, C]."""
    t, hd, h, hkv = q.shape[0], lean.head_dim, lean.heads, lean.kv_heads
    qk = rope(torch.cat([q, k], dim=-1).view(t, h + hkv, hd).transpose(0, 1), cos, sin)  # [H + Hkv, T, hd]
    cache.keys[i].index_copy_(1, slots, qk[h:])
    cache.values[i].index_copy_(1, slots, v.view(t, hkv, hd).transpose(0, 1))
    keys, values = cache.keys[i : i + 1], cache.values[i : i + 1]  # [1, Hkv, C, hd]
    out = torch.nn.functional.scaled_dot_product_attention(qk[None, :h], keys, values, attn_mask=mask, enable_gqa=True)
    return out[0].transpose(0, 1).reshape(t, h * hd)
