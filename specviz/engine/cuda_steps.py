"""Captured steps on CUDA: the static-shape steps (the target's, specviz.engine.static_llama; the draft
head's, specviz.engine.static_head) held in CUDA graphs.

An eager step of a small target on a GPU is launch-bound: hundreds of kernels, each launched from
Python, against weights the GPU streams in a fraction of that time. A CUDA graph records the kernels
of one step once and replays them in one launch. It replays at the addresses and shapes it saw, so:

- one graph per cache (its buffers) and shape (rows T, which feature layers), captured the first
  time that shape runs on that cache (StaticCache.graphs) and replayed after;
- its inputs (the target's ids [T], positions [T], the new rows' mask [T, T]; the draft head's
  features, tokens, positions and a tree level's mask) are copied into tensors the graph owns, and
  the cache's length is read from the cache's own device tensor (length_t);
- its outputs are the graph's own tensors, overwritten by the next replay, so `run` hands out copies.

Nothing here waits for the host: copies in, replay and copies out are queued on the stream.
The graphs of one cache share one memory pool. Only a CUDA build of torch runs this module;
tests/test_static_llama.py and tests/test_static_head.py check a replay against the eager step
where a GPU is present.
"""

from __future__ import annotations

import torch

from specviz.engine.lean_llama import LeanLlama
from specviz.engine.static_llama import StaticCache, static_step

WARMUP = 2  # eager runs on a side stream before capture, as torch's documentation asks (lazy inits, autotuning)


class CapturedGraph:
    """fn(*inputs) -> a tuple of tensors (or None), held in one CUDA graph. The graph owns copies of
    the example inputs (their shapes and dtypes are the step's) and reads its inputs from them."""

    def __init__(self, fn, inputs: tuple[torch.Tensor, ...], pool):
        device = inputs[0].device
        self.inputs = tuple(x.clone() for x in inputs)
        # The warm-up writes keys and values at slots length .. length + T - 1 of the cache: slots past
        # its length, which the real pass writes again before anything reads them.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                fn(*self.inputs)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.outputs = fn(*self.inputs)

    def run(self, *inputs: torch.Tensor) -> tuple:
        """The inputs copied into the graph's, one replay -> copies of its outputs (the next replay
        overwrites the graph's own)."""
        for own, given in zip(self.inputs, inputs, strict=True):
            own.copy_(given, non_blocking=True)
        self.graph.replay()
        return tuple(None if out is None else out.clone() for out in self.outputs)


def captured(cache: StaticCache, key, fn, inputs: tuple[torch.Tensor, ...]) -> CapturedGraph:
    """The graph of fn on `cache` under `key`, captured (from example inputs) the first time it is asked
    for; the graphs of one cache share one memory pool."""
    graph = cache.graphs.get(key)
    if graph is None:
        pool = cache.graphs.get("pool")
        if pool is None:
            pool = cache.graphs["pool"] = torch.cuda.graph_pool_handle()
        graph = cache.graphs[key] = CapturedGraph(fn, inputs, pool)
    return graph


def captured_step(lean: LeanLlama, cache: StaticCache, t: int, feature_layers: tuple[int, ...] | None) -> CapturedGraph:
    """The target's static step of T rows on `cache`: run(ids [T], positions [T], local [T, T]) ->
    (logits [T, V], features [T, (n+1)D] or None)."""
    device = cache.keys.device
    examples = (
        torch.zeros(t, dtype=torch.long, device=device),  # ids [T]
        torch.zeros(t, dtype=torch.long, device=device),  # positions [T]
        torch.ones(t, t, dtype=torch.bool, device=device).tril(),  # local [T, T]
    )
    key = (t, tuple(feature_layers) if feature_layers is not None else None)
    return captured(
        cache, key, lambda ids, pos, local: static_step(lean, cache, ids, pos, local, t, feature_layers), examples
    )


def captured_head_step(head, cache: StaticCache, t: int, tree: bool) -> CapturedGraph:
    """The draft head's static step of T rows on `cache` (specviz.engine.static_head.head_step):
    run(features [T, D], tokens [T], positions [T]) for a chain, and mask [T, C] after them for a
    tree level -> (f^ [T, D], subset logits [T, S])."""
    from specviz.engine.static_head import head_step

    device = cache.keys.device
    examples = (
        torch.zeros(t, head.cfg.hidden, device=device),  # features [T, D]
        torch.zeros(t, dtype=torch.long, device=device),  # tokens [T]
        torch.zeros(t, dtype=torch.long, device=device),  # positions [T]
    )
    if tree:
        examples += (torch.ones(t, cache.capacity, dtype=torch.bool, device=device),)  # mask [T, C]
    return captured(cache, ("head", t, tree), lambda *x: head_step(head, cache, *x), examples)
