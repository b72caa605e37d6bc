"""The target's side of a run: its text, its KV cache and its forward passes.

`TargetState` holds what the target has seen of the text and runs each verification pass:
over the positions it has not seen and every draft of a tree (`tree_layout` for branches,
`node_layout` for any tree given by a parent array: positions and the tree attention mask), then
keeps in its cache the text and the accepted drafts only (`select_cache_positions`, `crop_cache`).
A Llama-family target on the CPU runs the lean forward (specviz.engine.lean_llama, `LoadedModel.lean`),
on its own or, for a batched decode, in one pass with other decodes' (specviz.serving.batching); on
CUDA it runs the lean forward's static-shape step, captured per shape (specviz.engine.static_llama,
`LoadedModel.static`); any other runs transformers' own forward (`target_forward`), which the model drafter also uses
(`forward_logits`).
"""

from __future__ import annotations

import inspect

import torch

from specviz.config import DYNAMIC_TREE_NODES, GAMMA_MAX, TREE_BRANCHES
from specviz.engine.lean_llama import LeanCache, LeanRequest
from specviz.engine.models import LoadedModel

# The most rows one verification pass feeds after the prompt: the newest token and a tree's drafts.
MOST_FED = 1 + max(TREE_BRANCHES * GAMMA_MAX, DYNAMIC_TREE_NODES)


class TargetState:
    """The target's side of a run: the text so far, its KV cache, and how much of it is cached."""

    def __init__(self, target: LoadedModel, prompt_ids: list[int], seat=None, new_tokens: int = 0):
        """seat: a specviz.serving.batching.Seat when this decode's passes run batched with other decodes'
        (a lean target only), else None: each pass runs on its own. new_tokens: the most the run
        writes, so a static cache is made large enough once (it grows past it, dropping its graphs)."""
        from transformers import DynamicCache

        self.target = target
        self.seat = seat
        self.device = torch.device(target.device)
        self.lean = target.lean  # specviz.engine.lean_llama.LeanLlama, or None
        self.static = target.static  # specviz.engine.static_llama.StaticLlama (CUDA), or None
        if self.lean is not None:
            self.cache = self.lean.new_cache()
        elif self.static is not None:
            self.cache = self.static.new_cache(len(prompt_ids) + new_tokens + MOST_FED, owner=self)
        else:
            self.cache = DynamicCache(config=target.model.config)
        self.seq = torch.tensor(prompt_ids, dtype=torch.long, device=self.device)  # [L] prompt + output
        self.seen = 0  # positions of seq the cache holds

    def forward(self, tree: torch.Tensor, feature_layers: tuple[int, ...] | None):
        """One pass over the unseen tokens and every draft of tree [k, g] (k branches of g drafts)
        -> logits [1 + k*g, V] (the last unseen position, then the drafts level by level: draft j
        of branch b is row 1 + j*k + b), and (unless feature_layers is None) the features
        [T, (n+1)D] of every position fed: the outputs of those decoder layers, then the final-norm
        feature."""
        k, g = tree.shape
        unseen = self.seq[self.seen :]  # [u]
        layout = None if k == 1 else tree_layout(self.seen, unseen.shape[0], k, g, self.device, self.target.model.dtype)
        return self._pass(torch.cat([unseen, tree.T.reshape(-1)]), k * g + 1, feature_layers, layout)

    def forward_nodes(self, tokens: torch.Tensor, parents: torch.Tensor, feature_layers: tuple[int, ...] | None):
        """One pass over the unseen tokens and a draft tree of N nodes given by tokens [N] and parents
        [N] (level order; specviz.drafters.token_tree) -> logits [1 + N, V] (row 0: the last unseen
        position, row 1 + i: after node i) and the features as `forward` gives them."""
        unseen = self.seq[self.seen :]  # [u]
        layout = node_layout(self.seen, unseen.shape[0], parents, self.device, self.target.model.dtype)
        return self._pass(torch.cat([unseen, tokens]), tokens.shape[0] + 1, feature_layers, layout)

    def _pass(self, feed: torch.Tensor, keep: int, feature_layers, layout):
        """feed [T] through the target: on its own, batched with other decodes', or transformers' forward."""
        if self.seat is not None:  # one pass shared with the other batched decodes (specviz.serving.batching)
            logits, features = self.seat.forward(LeanRequest(feed, self.cache, keep, feature_layers, layout))
        elif self.lean is not None:
            logits, features = self.lean.forward(feed, self.cache, keep, feature_layers, layout)
        elif self.static is not None:
            logits, features = self.static.forward(feed, self.cache, keep, feature_layers, layout)
        else:
            logits, features = target_forward(self.target.model, feed, self.cache, keep, feature_layers, layout)
        return logits[:, : self.target.vocab_size], features

    def accept(self, emitted: torch.Tensor, kept_drafts: torch.Tensor, k: int) -> None:
        """Append the emitted tokens; keep in the cache the text and the accepted drafts, given as
        their indices kept_drafts [n] among the drafts fed (a tree: k > 1, its k*g drafts level by
        level, or its nodes)."""
        old_len, n = self.seq.shape[0], kept_drafts.shape[0]
        self.seq = torch.cat([self.seq, emitted])
        if k > 1 and n > 0:  # a tree: close the gaps the other branches leave in the cache
            keep = torch.cat([torch.arange(old_len, device=self.device), old_len + kept_drafts])
            select_cache_positions(self.cache, keep)
        self.seen = min(old_len + n, self.seq.shape[0] - 1)  # the newest token is fed next time
        crop_cache(self.cache, self.seen)


def tree_layout(seen: int, unseen: int, k: int, g: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions [T] and attention mask [1, 1, T, seen + T] for a pass over `unseen` text tokens and a
    tree of k branches x g drafts, level by level (node_layout with each draft's parent the same
    branch's draft one level up)."""
    index = torch.arange(k * g, device=device)
    parents = torch.where(index < k, -1, index - k)  # draft j of branch b is node j*k + b
    return node_layout(seen, unseen, parents, device, dtype)


def node_layout(seen: int, unseen: int, parents: torch.Tensor, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions [T] and attention mask [1, 1, T, seen + T] (0 where allowed, the dtype's minimum
    elsewhere) for a pass over `unseen` text tokens and a draft tree given by parents [N] (level
    order, -1: the root; specviz.drafters.token_tree). Text tokens attend causally; a node sees the
    text, its ancestors and itself, at position seen + unseen + its depth - 1."""
    n = parents.shape[0]
    t = unseen + n
    line = torch.eye(n, dtype=torch.bool)  # [N, N] node i sees node j: j is i or an ancestor of i
    depth = torch.zeros(n, dtype=torch.long)
    for i, p in enumerate(parents.tolist()):  # parents precede children, so each row is complete when read
        if p >= 0:
            line[i] |= line[p]
            depth[i] = depth[p] + 1
    positions = torch.cat([torch.arange(seen, seen + unseen), seen + unseen + depth]).to(device)
    allowed = torch.zeros(t, seen + t, dtype=torch.bool)
    allowed[:, : seen + unseen] = True
    allowed[:unseen, seen : seen + unseen] = torch.ones(unseen, unseen, dtype=torch.bool).tril()
    allowed[unseen:, seen + unseen :] = line
    mask = torch.zeros(1, 1, t, seen + t, dtype=dtype, device=device)
    return positions, mask.masked_fill_(~allowed.to(device), torch.finfo(dtype).min)


def select_cache_positions(cache, keep: torch.Tensor) -> None:
    """Keep only the cached positions `keep` [N] (in that order) in every layer of a LeanCache or a
    transformers DynamicCache (transformers 5 keeps them per layer; 4 in key_cache/value_cache lists)."""
    if isinstance(cache, LeanCache):
        cache.select(keep)
    elif hasattr(cache, "layers"):
        for layer in cache.layers:
            layer.keys = layer.keys.index_select(-2, keep)
            layer.values = layer.values.index_select(-2, keep)
    else:
        cache.key_cache = [k.index_select(-2, keep) for k in cache.key_cache]
        cache.value_cache = [v.index_select(-2, keep) for v in cache.value_cache]


def target_forward(model, input_ids: torch.Tensor, cache, keep: int, feature_layers: tuple[int, ...] | None, tree=None):
    """One cached target forward. input_ids [T] -> (logits [keep, V_model] for the last `keep`
    positions, features [T, (n+1)D] or None). feature_layers None: no features; otherwise the
    outputs of those decoder layers and the final-norm feature, concatenated. With features, the
    body and the LM head run as the CausalLM's own forward runs them, so the logits are the same
    numbers either way. tree: None (causal) or (position_ids [T], attention mask [1, 1, T, N]) for a
    draft tree (tree_layout)."""
    extra = {} if tree is None else {"position_ids": tree[0][None], "attention_mask": tree[1]}
    if feature_layers is None:
        return forward_logits(model, input_ids, cache, keep, **extra), None
    from specviz.engine.draft_head import layer_outputs

    with layer_outputs(model, feature_layers) as earlier:
        out = model.model(input_ids=input_ids[None], past_key_values=cache, use_cache=True, **extra)
    hidden = out.last_hidden_state[0]
    features = torch.cat([*(earlier[i][0][0] for i in feature_layers), hidden], dim=-1)  # [T, (n+1)D]
    return model.lm_head(hidden[-keep:]), features  # [keep, V]


def forward_logits(model, input_ids: torch.Tensor, cache, keep: int, **extra) -> torch.Tensor:
    """One cached forward. input_ids [T] -> logits [keep, V_model] for the last `keep` positions."""
    kwargs = {"past_key_values": cache, "use_cache": True, **extra}
    if _accepts_logits_to_keep(model):
        kwargs["logits_to_keep"] = keep  # skip the vocabulary projection for the prompt positions
    return model(input_ids[None], **kwargs).logits[0, -keep:]


_logits_to_keep_support: dict[type, bool] = {}


def _accepts_logits_to_keep(model) -> bool:
    kind = type(model)
    if kind not in _logits_to_keep_support:
        _logits_to_keep_support[kind] = "logits_to_keep" in inspect.signature(model.forward).parameters
    return _logits_to_keep_support[kind]


def crop_cache(cache, keep: int) -> None:
    """Drop cached positions beyond the first `keep` (transformers 5 crop takes a negative count)."""
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)
