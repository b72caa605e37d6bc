"""Measurement probe: which draft TREE shapes pay at T=0? (It chose the shipped one.)

The product drafts a tree of two branches at every temperature (specviz.config.TREE_BRANCHES,
verified in specviz.decoding.decoder, kept by specviz.decoding.verify.choose_branch); this standalone loop compares
greedy shapes cheaply, outside the product; scripts/tree_vs_chain.py compares the product's tree
with its chain at T > 0.

Shapes (every node is a head step's guess; one target pass checks them all with a tree attention
mask, a node seeing the text and its own ancestors; the target's KV cache is then compacted to the
accepted path):

    KxD          K chains sharing the root: the head's top-K first tokens, each continued greedily
                 for D - 1 more. The product's tree is 2xgamma; a chain is 1xgamma.
    K.M.C.D      a dynamic tree (EAGLE-2): the head's top-K first tokens; at each deeper level the
                 M nodes of the level above with the highest cumulative head log-probability get
                 their top-C children; depth D. KxD is K.K.1.D.
    ...+N        the same, plus the n-gram drafter's chain of up to N tokens as one more branch
                 (a match of one token or more); without +N an n-gram match of two tokens or more
                 drafts a chain instead of the head, as the shipped hybrid does.

Side by side in one process on the bench's prompts: the target alone (packed), the shipped hybrid
(speculative_generate, untraced) at gamma 2, and the trees. Every greedy output is compared with
the target alone's.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/tree_probe.py --threads 2 --prompts 8 --trees 2x2,3.2.2.4
    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/tree_probe.py --no-time --trees 2x2,8.4.4.5,2x2+3

(--no-time: only tokens per iteration, which at T=0 do not depend on timing.) The probe is greedy
only; the product's trees at T > 0 use SpecInfer's recursive rejection sampling.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from specviz.config import SamplingConfig
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.decoding.prompting import prompt_token_ids
from specviz.drafters import HeadDrafter, load_draft_head, lookup_continuation
from specviz.engine.draft_head import layer_outputs
from specviz.engine.models import HEAD_DRAFT, HYBRID_DRAFT, load_model
from specviz.engine.target import select_cache_positions
from specviz.labs.bench import PROMPTS


@dataclass(frozen=True)
class Shape:
    first: int  # K: first-position candidates
    expand: int  # M: nodes per level that get children
    children: int  # C: children per expanded node
    depth: int  # D
    ngram: int = 0  # N: an n-gram chain of up to N tokens as an extra branch (0: the hybrid's either/or)

    @staticmethod
    def parse(spec: str) -> Shape:
        head, _, ngram = spec.partition("+")
        if "x" in head:
            k, d = (int(v) for v in head.split("x"))
            return Shape(k, k, 1, d, int(ngram or 0))
        k, m, c, d = (int(v) for v in head.split("."))
        return Shape(k, m, c, d, int(ngram or 0))


@dataclass
class Tree:
    """Nodes in breadth-first order: token, parent (-1: a child of the text's last token), level."""

    tokens: list[int]
    parents: list[int]
    levels: list[int]

    def ancestors(self, i: int) -> list[int]:
        out = []
        while i != -1:
            out.append(i)
            i = self.parents[i]
        return out

    def add_chain(self, chain: list[int]) -> None:
        for j, token in enumerate(chain):
            self.tokens.append(token)
            self.parents.append(-1 if j == 0 else len(self.tokens) - 2)
            self.levels.append(j)


def head_tree(drafter: HeadDrafter, context: torch.Tensor, shape: Shape, depth: int) -> Tree:
    """The head's dynamic tree after `context` [L] (empty when it has no target features yet).
    Catches the head's cache up on the true features exactly as HeadDrafter.propose does; each
    level's expanded nodes run as one batched head step that sees the true entries and its own
    ancestors' entries."""
    head, cache = drafter.head, drafter.cache
    length = context.shape[0]
    tree = Tree([], [], [])
    if drafter.features.shape[0] < length - 1 or depth == 0:
        return tree
    cache.crop(drafter.true_entries)
    start = drafter.true_entries
    f, logits = head.step(drafter.features[start : length - 1], context[start + 1 :], start + 1, cache)
    drafter.true_entries = length - 1
    prefix = cache.length
    top = torch.log_softmax(logits[-1].float(), -1).topk(shape.first)
    tree.tokens, tree.parents, tree.levels = head.subset[top.indices].tolist(), [-1] * shape.first, [0] * shape.first
    score, reads = top.values.tolist(), [f[-1]] * shape.first  # cumulative log q; the feature each node's step reads
    entry: dict[int, int] = {}  # node -> its head-cache entry (after the prefix)
    level = list(range(shape.first))
    for lvl in range(1, depth):
        chosen = sorted(level, key=lambda i: -score[i])[: shape.expand]
        first_entry = len(entry)
        for r, v in enumerate(chosen):
            entry[v] = first_entry + r
        sees = torch.zeros(len(chosen), prefix + len(entry), dtype=torch.bool)
        sees[:, :prefix] = True
        for r, v in enumerate(chosen):
            sees[r, [prefix + entry[a] for a in tree.ancestors(v)]] = True
        x = head.merge(torch.stack([reads[v] for v in chosen]), torch.tensor([tree.tokens[v] for v in chosen]))
        cos, sin = head.rope(torch.full((len(chosen),), length + lvl - 1))
        for i, layer in enumerate(head.layers):
            q, key, value = layer.qkv(x, cos, sin)
            keys, values = cache.append(i, key, value)
            attended = torch.nn.functional.scaled_dot_product_attention(
                q, layer.expand_kv(keys), layer.expand_kv(values), attn_mask=sees
            )
            x = layer.finish(x, attended)
        f_out, logits = head.out(x)
        best = torch.log_softmax(logits.float(), -1).topk(shape.children, -1)
        level = []
        for r, v in enumerate(chosen):
            for c in range(shape.children):
                tree.tokens.append(int(head.subset[best.indices[r, c]]))
                tree.parents.append(v)
                tree.levels.append(lvl)
                score.append(score[v] + float(best.values[r, c]))
                reads.append(f_out[r])
                level.append(len(tree.tokens) - 1)
    return tree


class TreeTarget:
    """The target's side: the text, its KV cache, tree verification and cache compaction."""

    def __init__(self, loaded, prompt_ids: list[int], feature_layers: tuple[int, ...]):
        self.loaded, self.layers = loaded, feature_layers
        self.cache = DynamicCache(config=loaded.model.config)
        self.seq = torch.tensor(prompt_ids)  # [L]
        self.seen = 0  # positions the cache holds

    def verify(self, tree: Tree):
        """-> (accepted tokens [n], correction token, features of the kept positions, the first of
        them). Greedy: walk from the root into the child that is the target's argmax."""
        model = self.loaded.model
        unseen = self.seq[self.seen :]  # [u] usually the last correction
        u, length = unseen.shape[0], self.seq.shape[0]
        feed = torch.cat([unseen, torch.tensor(tree.tokens, dtype=torch.long)])  # [t]
        t = feed.shape[0]
        positions = torch.cat([torch.arange(self.seen, length), length + torch.tensor(tree.levels, dtype=torch.long)])
        allowed = torch.zeros(t, self.seen + t, dtype=torch.bool)
        allowed[:, : self.seen + u] = True
        allowed[:u, self.seen : self.seen + u] = torch.tril(torch.ones(u, u, dtype=torch.bool))
        for i in range(len(tree.tokens)):
            allowed[u + i, [self.seen + u + a for a in tree.ancestors(i)]] = True
        mask = torch.zeros(1, 1, t, self.seen + t).masked_fill_(~allowed, torch.finfo(torch.float32).min)
        with layer_outputs(model, self.layers) as earlier:
            hidden = model.model(
                input_ids=feed[None],
                position_ids=positions[None],
                attention_mask=mask,
                past_key_values=self.cache,
                use_cache=True,
            ).last_hidden_state[0]  # [t, D]
        features = torch.cat([*(earlier[i][0][0] for i in self.layers), hidden], dim=-1)  # [t, 3D]
        argmax = model.lm_head(hidden[u - 1 :])[:, : self.loaded.vocab_size].argmax(-1).tolist()  # [1 + nodes]
        children: dict[int, list[int]] = {}
        for i, parent in enumerate(tree.parents):
            children.setdefault(parent, []).append(i)
        path, node, want = [], -1, argmax[0]
        while hit := [c for c in children.get(node, []) if tree.tokens[c] == want]:
            node = hit[0]
            path.append(node)
            want = argmax[1 + node]
        accepted = torch.tensor([tree.tokens[c] for c in path], dtype=torch.long)
        keep = torch.tensor(list(range(self.seen + u)) + [self.seen + u + r for r in path])
        select_cache_positions(self.cache, keep)  # the text, then the accepted path only
        first = self.seen
        self.seq = torch.cat([self.seq, accepted, torch.tensor([want])])
        self.seen = self.seq.shape[0] - 1  # the correction is fed next time
        return accepted, want, features[list(range(u)) + [u + r for r in path]], first


def tree_generate(loaded, drafter: HeadDrafter, prompt: str, shape: Shape, new_tokens: int, stats: dict):
    ids = prompt_token_ids(loaded.tokenizer, prompt, True)
    drafter.start(SamplingConfig(0.0, None, None), torch.Generator().manual_seed(0), loaded.vocab_size)
    target = TreeTarget(loaded, ids, drafter.feature_layers)
    eos, new = loaded.eos_token_id, 0
    while new < new_tokens:
        room = new_tokens - new - 1  # leave room for the correction, as the decoder does
        depth = min(shape.depth, room)
        chain = [] if shape.ngram else lookup_continuation(target.seq.tolist(), depth, 3, 2)
        if chain:  # the hybrid's either/or: an n-gram match drafts a chain
            tree = Tree([], [], [])
            tree.add_chain(chain)
        else:
            tree = head_tree(drafter, target.seq, shape, depth)
            if shape.ngram and room > 0:
                tree.add_chain(lookup_continuation(target.seq.tolist(), min(shape.ngram, room), 3, 1))
        accepted, correction, features, first = target.verify(tree)
        drafter.observe(features, first)
        stats["iterations"] += 1
        stats["accepted"] += accepted.shape[0]
        stats["nodes"] += len(tree.tokens)
        new += accepted.shape[0] + 1
        if eos is not None and (correction == eos or bool((accepted == eos).any())):
            break
    out = target.seq[len(ids) :].tolist()
    if eos is not None and eos in out:
        out = out[: out.index(eos) + 1]
    return out[:new_tokens]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--trees", default="1x2,2x2,3x2", help="shapes (see the docstring), comma-separated")
    parser.add_argument("--no-time", action="store_true", help="tokens per iteration only: skip the product run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(None)
    drafter = HeadDrafter(load_draft_head(HEAD_DRAFT, loaded), HEAD_DRAFT)
    prompts, new_tokens = PROMPTS[: args.prompts], args.max_new_tokens
    methods: dict[str, object] = {"target alone": None} if args.no_time else {"target alone": None, "hybrid g2": 2}
    methods.update({f"tree {spec}": Shape.parse(spec) for spec in args.trees.split(",")})
    seconds, tokens, identical = dict.fromkeys(methods, 0.0), dict.fromkeys(methods, 0), dict.fromkeys(methods, 0)
    stats = {m: {"iterations": 0, "accepted": 0, "nodes": 0} for m in methods}
    greedy = {"temperature": 0.0, "max_new_tokens": new_tokens, "trace": False}
    with torch.inference_mode():
        tree_generate(loaded, drafter, prompts[0], Shape(2, 2, 1, 2), 8, {"iterations": 0, "accepted": 0, "nodes": 0})
        speculative_generate(prompts[0], target=loaded, draft=HYBRID_DRAFT, gamma=2, **{**greedy, "max_new_tokens": 8})
        for _ in range(args.reps):
            for prompt in prompts:
                reference = None
                for name, spec in methods.items():
                    start = time.perf_counter()
                    if spec is None:
                        out = autoregressive_generate(prompt, target=loaded, **greedy).output_token_ids
                    elif isinstance(spec, int):
                        run = speculative_generate(prompt, target=loaded, draft=HYBRID_DRAFT, gamma=spec, **greedy)
                        out = run.output_token_ids
                        stats[name]["iterations"] += run.summary["iterations"]
                        stats[name]["accepted"] += run.summary["accepted"]
                    else:
                        out = tree_generate(loaded, drafter, prompt, spec, new_tokens, stats[name])
                    seconds[name] += time.perf_counter() - start
                    tokens[name] += len(out)
                    reference = out if reference is None else reference
                    identical[name] += out == reference
    base = tokens["target alone"] / seconds["target alone"]
    runs = args.reps * len(prompts)
    print(f"{args.threads} threads, {len(prompts)} prompts x {args.reps} reps, {new_tokens} new tokens, T=0")
    for name in methods:
        rate, s = tokens[name] / seconds[name], stats[name]
        per_iteration = (s["accepted"] + s["iterations"]) / s["iterations"] if s["iterations"] else 1.0
        nodes = f"  nodes per iteration {s['nodes'] / s['iterations']:4.1f}" if s["nodes"] else ""
        print(
            f"{name:16s} {rate:6.2f} tokens/s  {rate / base:5.2f}x  tokens/iteration {per_iteration:4.2f}{nodes}  "
            f"greedy identical to the target alone {identical[name]}/{runs}"
        )


if __name__ == "__main__":
    main()
