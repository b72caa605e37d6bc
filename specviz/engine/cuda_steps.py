"""Captured steps on CUDA: the static-shape step (specviz.engine.static_llama) held in a CUDA graph.

An eager step of a small target on a GPU is launch-bound: hundreds of kernels, each launched from
Python, against weights the GPU streams in a fraction of that time. A CUDA graph records the kernels
of one step once and replays them in one launch. It replays at the addresses and shapes it saw, so:

- one graph per cache (its buffers) and shape (rows T, which feature layers), captured the first
  time that shape runs on that cache (StaticCache.graphs) and replayed after;
- its inputs (ids [T], positions [T], the new rows' mask [T, T]) are copied into tensors the graph
  owns, and the cache's length is read from the cache's own device tensor (length_t);
- its outputs are the graph's own tensors, overwritten by the next replay, so `run` hands out copies.

Nothing here waits for the host: copies in, replay and copies out are queued on the stream.
The graphs of one cache share one memory pool. Only a CUDA build of torch runs this module;
tests/test_static_llama.py checks a replay against the eager step where a GPU is present.
"""

from __future__ import annotations

import torch

from specviz.engine.lean_llama import LeanLlama
from specviz.engine.static_llama import StaticCache, static_step

WARMUP = 2  # eager runs on a side stream before capture, as torch's documentation asks (lazy inits, autotuning)


class CapturedStep:
    """One static step of T rows captured on one cache."""

    def __init__(self, lean: LeanLlama, cache: StaticCache, t: int, feature_layers: tuple[int, ...] | None, pool):
        device = cache.keys.device
        self.ids = torch.zeros(t, dtype=torch.long, device=device)  # [T]
        self.positions = torch.zeros(t, dtype=torch.long, device=device)  # [T]
        self.local = torch.ones(t, t, dtype=torch.bool, device=device).tril()  # [T, T]
        # The warm-up writes keys and values at slots length .. length + T - 1 of the cache: slots past
        # its length, which the real pass writes again before anything reads them.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                static_step(lean, cache, self.ids, self.positions, self.local, t, feature_layers)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.logits, self.features = static_step(
                lean, cache, self.ids, self.positions, self.local, t, feature_layers
            )  # [T, V], [T, (n+1)D] or None

    def run(self, ids: torch.Tensor, positions: torch.Tensor, local: torch.Tensor):
        """ids [T], positions [T], local [T, T] -> (logits [T, V], features or None), copies of the graph's."""
        self.ids.copy_(ids, non_blocking=True)
        self.positions.copy_(positions, non_blocking=True)
        self.local.copy_(local, non_blocking=True)
        self.graph.replay()
        return self.logits.clone(), None if self.features is None else self.features.clone()


def captured_step(lean: LeanLlama, cache: StaticCache, t: int, feature_layers: tuple[int, ...] | None) -> CapturedStep:
    """The step of T rows on `cache`, captured the first time it is asked for."""
    key = (t, tuple(feature_layers) if feature_layers is not None else None)
    step = cache.graphs.get(key)
    if step is None:
        pool = cache.graphs.get("pool")
        if pool is None:
            pool = cache.graphs["pool"] = torch.cuda.graph_pool_handle()
        step = cache.graphs[key] = CapturedStep(lean, cache, t, feature_layers, pool)
    return step
