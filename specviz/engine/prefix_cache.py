"""Prompts' shared beginnings computed once: automatic prefix caching, as vLLM's, for the lean target.

Every chat prompt begins with the same template head (the offline target's system turn is most of a
short prompt), and a class's prompts arrive together, so a batched prefill pass spends most of its
rows on tokens every prompt shares (docs/reliability.md, "A lecture hall").
`PrefixStore.forward_many` wraps the batcher's `LeanLlama.forward_many(reuse_prefixes=True)` (never
a solo decode's: a timed pair's target-alone half would skip the prompt its speculative half just
computed): before a pass it finds, for each prompt's first pass (an empty cache), the longest
beginning already computed, from the prompts it keeps (the last `capacity` prompts' caches, least
recently used dropped) or, when several prompts of this pass share one that it lacks, by one small
pass over that beginning first. It copies that beginning's keys and values (and the drafter's
features of those positions) into the prompt's cache and sends only the rest through the pass.

Exact, not approximate: it serves only the native step (specviz.engine.native_step), whose rows get
the same bits alone or among others, whatever came before them in the pass (tests/test_native_step.py).
A position's keys, values and features depend only on the tokens up to it, so a prompt continued
from a copied beginning gets the very numbers its whole pass would (tests/test_prefix_cache.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

MIN_SHARED = 8  # tokens: a shorter beginning is not worth a pass of its own


@dataclass
class _Beginning:
    """A computed prompt: its keys and values [layers, Hkv, P, hd] and features [P, F] per feature_layers."""

    keys: torch.Tensor
    values: torch.Tensor
    features: dict[tuple[int, ...], torch.Tensor] = field(default_factory=dict)


def common_length(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many tokens a and b share from their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixStore:
    """The beginnings of the last `capacity` prompts, their keys, values and features, to reuse."""

    def __init__(self, capacity: int = 16) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[tuple[int, ...], _Beginning] = OrderedDict()
        self._lock = threading.Lock()
        self.reused_tokens = 0  # prompt tokens not computed again (tests and the serving lab read it)

    def longest(self, ids: tuple[int, ...], feature_layers: tuple[int, ...] | None) -> tuple[int, _Beginning | None]:
        """(P, its beginning): the most tokens of `ids` a kept prompt shares with it (less its last one:
        a pass needs at least one row), with features for feature_layers when they are wanted."""
        best, found = 0, None
        with self._lock:
            for kept_ids, beginning in self._kept.items():
                if feature_layers is not None and feature_layers not in beginning.features:
                    continue
                n = min(common_length(kept_ids, ids), len(ids) - 1)
                if n > best:
                    best, found, key = n, beginning, kept_ids
            if found is not None:
                self._kept.move_to_end(key)
        return best, found

    def keep(self, ids: tuple[int, ...], cache, features: torch.Tensor | None, feature_layers) -> None:
        """Keep a prompt's computed beginning: its cache's first len(ids) entries (copied), and its
        features for feature_layers beside any kept for other layer sets (a baseline keeping the
        prompt its speculative run kept with features does not drop them)."""
        n = len(ids)
        with self._lock:
            beginning = self._kept.get(ids)
        if beginning is None:
            beginning = _Beginning(cache.keys[:, :, :n].clone(), cache.values[:, :, :n].clone())
        if features is not None and feature_layers is not None:
            beginning.features[feature_layers] = features[:n].clone()
        with self._lock:
            self._kept[ids] = beginning
            self._kept.move_to_end(ids)
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)

    def forward_many(self, lean, requests: list, one_pass) -> list:
        """one_pass(requests) with every prompt's first pass continued from its longest computed
        beginning; the same results as one_pass alone (logits [keep_i, V], features [T_i, F] or None)."""
        firsts = [i for i, r in enumerate(requests) if r.cache.length == 0 and r.tree is None]
        if not firsts:
            return one_pass(requests)
        ids_of = {i: tuple(requests[i].input_ids.tolist()) for i in firsts}  # each prompt's ids, read once
        self._compute_shared(lean, [(requests[i], ids_of[i]) for i in firsts], one_pass)
        sent, reused = list(requests), {}
        for i in firsts:
            r, ids = requests[i], ids_of[i]
            n, beginning = self.longest(ids, r.feature_layers)
            n = min(n, len(ids) - r.keep)  # the kept logits' rows stay in the pass
            if n < MIN_SHARED or beginning is None:
                continue
            r.cache.reserve(len(ids))  # the whole prompt's entries at once, as its own pass would
            r.cache.keys[:, :, :n] = beginning.keys[:, :, :n]
            r.cache.values[:, :, :n] = beginning.values[:, :, :n]
            r.cache.length = n
            sent[i] = r._replace(input_ids=r.input_ids[n:])
            reused[i] = (n, beginning.features.get(r.feature_layers) if r.feature_layers is not None else None)
            self.reused_tokens += n
        results = one_pass(sent)
        for i in firsts:
            logits, features = results[i]
            if i in reused and features is not None:  # [P, F] kept, then the pass's [T - P, F]
                n, kept = reused[i]
                features = torch.cat([kept[:n], features])
                results[i] = (logits, features)
            self.keep(ids_of[i], requests[i].cache, features, requests[i].feature_layers)
        return results

    def _compute_shared(self, lean, firsts: list, one_pass) -> None:
        """When several of this pass's prompts ((request, its ids) each) share a beginning no kept
        prompt has, compute it once (a pass of its own, into a cache of its own) and keep it."""
        missing = [(r, ids) for r, ids in firsts if self.longest(ids, r.feature_layers)[0] < MIN_SHARED]
        if len(missing) < 2:
            return
        ids = [i for _, i in missing]
        missing = [r for r, _ in missing]
        shared = min(min(common_length(ids[0], other) for other in ids[1:]), min(len(i) for i in ids) - 1)
        if shared < MIN_SHARED:
            return
        # Computed with a drafter's features when one wants them: a run that wants none may use any
        # kept beginning (features of another layer set: their runs compute whole).
        feature_layers = next((r.feature_layers for r in missing if r.feature_layers is not None), None)
        cache = lean.new_cache()
        request = type(missing[0])(missing[0].input_ids[:shared], cache, 1, feature_layers)
        ((_, features),) = one_pass([request])
        self.keep(ids[0][:shared], cache, features, feature_layers)
