"""The draft head's dynamic draft tree (EAGLE-2, Li et al. 2024): expansion by path score, one batched
head pass per level, then reranking to the node budget (specviz.drafters.token_tree).

    level 1     the head's `width` most likely first tokens (its distribution after the text)
    level d+1   the `width` nodes of level d with the best path scores are run through the head in ONE
                pass (each sees the shared prefix of the head's cache, its ancestors' entries and its
                own: DraftHead.tree_step), and each gets the head's `width` most likely tokens as
                children; a child's path score is its parent's times the head's probability of it
    rerank      all drafted nodes by path score, the best n kept (a node only with its parent), n the
                budget that maximises expected tokens per unit of time (token_tree.choose_budget)

The probabilities are the head's at the run's temperature (its top-k and top-p too); at T=0, where q
is one-hot, its softmax at T=1 serves as the confidence. Nothing here reads p: the tree depends only
on the head, and every node's q is a point mass on its token (specviz.decoding.tree_walk verifies it).
This is the head's tree at T=0; at T>0 it draws its tree instead (specviz.drafters.sampled_tree: a
rerank that dropped drawn tokens by their values would bias the output). `Nodes` and `level_pass`
serve both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specviz.config import SamplingConfig
from specviz.drafters.token_tree import TokenTree
from specviz.engine.sampling import probabilities


@dataclass
class Nodes:
    """The tree as it grows, plus what the head needs to expand a node."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    entry: dict[int, int] = field(default_factory=dict)  # an expanded node -> its head cache entry
    feature: dict[int, torch.Tensor] = field(default_factory=dict)  # an expanded node -> f^ [D] its children read
    q: list[torch.Tensor] = field(default_factory=list)  # [V] each: what a drawn node was drawn from (T>0 only)

    def add(self, parent: int, token: int, score: float, q_b: torch.Tensor | None = None) -> None:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depth.append(1 if parent < 0 else self.depth[parent] + 1)
        self.score.append(score)
        if q_b is not None:
            self.q.append(q_b)

    def add_children(self, parent: int, probs: torch.Tensor, subset: torch.Tensor, width: int) -> None:
        """The `width` most likely tokens of probs [S] (over the head's subset) as children of `parent`."""
        top = probs.topk(min(width, probs.shape[-1]))
        base = 1.0 if parent < 0 else self.score[parent]
        for prob, index in zip(top.values.tolist(), top.indices.tolist(), strict=True):
            if prob <= 0:  # outside the run's top-k or top-p: never worth a row
                break
            self.add(parent, int(subset[index]), base * prob)

    def tree(self, device) -> TokenTree:
        def tensor(values, dtype):
            return torch.tensor(values, dtype=dtype, device=device)

        return TokenTree(
            tensor(self.tokens, torch.long), tensor(self.parents, torch.long),
            tensor(self.depth, torch.long), tensor(self.score, torch.float32),
            torch.stack(self.q).to(device) if self.q else None,
        )  # fmt: skip


def confidence(subset_logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """The head's probabilities over its subset [..., S] that path scores multiply: at the run's
    temperature, or at T=1 when greedy (q is one-hot there)."""
    return probabilities(subset_logits, SamplingConfig(1.0) if sampling.greedy else sampling)


def expand(head, f_last: torch.Tensor, logits_last: torch.Tensor, length: int, depth: int, cache, width: int, sampling):
    """Every node the head drafts, to `depth` levels: f_last [D] and logits_last [S] are the head's
    last catch-up row (its prediction after the text), `length` the text's length, `cache` the head's
    cache after the catch-up (the tree's entries are appended to it) -> a TokenTree of all of them."""
    nodes, prefix, subset = Nodes(), cache.length, head.subset
    nodes.add_children(-1, confidence(logits_last, sampling), subset, width)
    level = list(range(len(nodes.tokens)))
    for d in range(1, depth):
        chosen = sorted(level, key=lambda i: -nodes.score[i])[:width]
        if not chosen:
            break
        features, logits = level_pass(head, nodes, chosen, f_last, length + d - 1, cache, prefix)
        probs = confidence(logits, sampling)  # [m, S]
        first_new = len(nodes.tokens)
        for row, node in enumerate(chosen):
            nodes.feature[node] = features[row]
            nodes.add_children(node, probs[row], subset, width)
        level = list(range(first_new, len(nodes.tokens)))
    return nodes.tree(f_last.device)


def level_pass(head, nodes: Nodes, chosen: list[int], f_last, index: int, cache, prefix: int):
    """One head pass over the nodes `chosen` (all of one level, at head index `index`) -> (f^ [m, D],
    subset logits [m, S]); records each node's cache entry."""
    m, device = len(chosen), f_last.device
    first_entry = cache.length
    allowed = torch.zeros(m, first_entry + m, dtype=torch.bool, device=device)
    allowed[:, :prefix] = True  # the text's entries, shared by every node
    for row, node in enumerate(chosen):
        nodes.entry[node] = first_entry + row
        ancestor = node
        while ancestor >= 0:  # its own entry and its ancestors' (all expanded at earlier levels)
            allowed[row, nodes.entry[ancestor]] = True
            ancestor = nodes.parents[ancestor]
    parent_features = [f_last if nodes.parents[u] < 0 else nodes.feature[nodes.parents[u]] for u in chosen]
    tokens = torch.tensor([nodes.tokens[u] for u in chosen], dtype=torch.long, device=device)
    positions = torch.full((m,), index, dtype=torch.long, device=device)
    return head.tree_step(torch.stack(parent_features), tokens, positions, cache, allowed)


def level_seconds(head, width: int) -> float:
    """The head's pass over one level of `width` nodes over a short cached context, in seconds: the
    median of a few, measured once per machine and kept (<cache>/verify_cost.json, as the target's
    v), so a run's budget, and with it what a seed drafts, never moves between loads."""
    from specviz.engine import verify_cost
    from specviz.engine.kernels import describe, machine_key
    from specviz.engine.models import cache_dir

    held = getattr(head, "level_seconds", None)
    if held is not None and width in held:
        return held[width]
    step = "static" if head.static is not None else "native" if head.native is not None else "eager"
    key = f"head level | {machine_key(head.cfg.target)} | {head.cfg.subset_size} x {head.cfg.depth} | {step} | "
    key += f"{describe(head.kernels)} | {head.device} | width {width}"
    path = cache_dir() / "verify_cost.json"
    seconds = verify_cost._read(path).get(key)
    if not isinstance(seconds, float) or not seconds > 0:
        seconds = _measured_level(head, width)
        verify_cost._write(path, key, seconds)
    head.level_seconds = {**(held or {}), width: seconds}
    return seconds


def _measured_level(head, width: int) -> float:
    import statistics
    import time

    device, context = head.device, 48
    cache = head.new_cache()  # the step that runs: eager, or the static one (captured on CUDA)
    features = torch.randn(context + width, head.cfg.hidden, generator=torch.Generator().manual_seed(0)).to(device)
    tokens = head.subset[torch.arange(context + width) % head.subset.shape[0]].to(device)
    times = []
    with torch.inference_mode():
        head.step(features[:context], tokens[:context], 1, cache)
        allowed = torch.ones(width, context + width, dtype=torch.bool, device=device)
        positions = torch.full((width,), context + 1, device=device)
        for _ in range(7):
            t0 = time.perf_counter()
            head.tree_step(features[context:], tokens[context:], positions, cache, allowed)
            times.append(time.perf_counter() - t0)
            cache.crop(context)
    return statistics.median(times)
