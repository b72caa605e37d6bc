"""Measurement probe: which draft TREE shapes pay at T=0? (It chose the shipped one.)

The product drafts a tree of two branches at every temperature (specviz.drafters.TREE_BRANCHES,
verified in specviz.decoder, kept by specviz.verify.choose_branch); this standalone loop compares
greedy shapes k x d cheaply, outside the product; scripts/tree_vs_chain.py compares the product's
tree with its chain at T > 0.

When this probe was written the decoder drafted a chain: one token per position. The fused head's top-1 token at the
first draft position is the target's greedy token at 40% of the bench's positions, its top 2 at
51%, top 3 at 58% (docs/benchmarks.md, "What limited it"), so proposing several first tokens
should raise the accepted length. This probe measures what that is worth in speed, greedy only.

Tree k x d: the head's top-k tokens at the first draft position, each continued greedily for
d - 1 more positions (k chains sharing the root, as in SpecInfer/EAGLE trees with one branching
level). One target pass verifies all k*d nodes with a tree attention mask (a node sees the text
and its own branch's earlier nodes); the target's KV cache is then compacted to the accepted
path. When the n-gram drafter has a match, the iteration uses its chain (a tree with one
branch), as the shipped hybrid does. A chain is tree 1 x gamma, so "tree 1x2" against "chain g2"
separates the probe's leaner loop from the tree itself.

Side by side in one process on the bench's prompts: the target alone (packed), the shipped
hybrid chain (speculative_generate, untraced) at gamma 2 and 3, and the trees. Every greedy
output is compared with the target alone's.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/tree_probe.py --threads 2 --prompts 8 --trees 1x2,2x2,3x2

The probe is greedy only; the product's trees at T > 0 use SpecInfer's recursive rejection
sampling (specviz.verify.choose_branch).
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import DynamicCache

from specviz.bench import PROMPTS
from specviz.config import SamplingConfig
from specviz.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter, load_draft_head, lookup_continuation
from specviz.head import layer_outputs
from specviz.models import HEAD_DRAFT, HYBRID_DRAFT, load_model
from specviz.prompting import prompt_token_ids


def head_tree(drafter: HeadDrafter, context: torch.Tensor, k: int, d: int) -> torch.Tensor | None:
    """The head's tree after `context` [L]: tokens [k, d], row b being branch b's chain; None when
    the head has no target features yet (the first iteration). Catches the head's cache up on the
    true features exactly as HeadDrafter.propose does."""
    head, cache = drafter.head, drafter.cache
    length = context.shape[0]
    if drafter.features.shape[0] < length - 1:
        return None
    cache.crop(drafter.true_entries)
    start = drafter.true_entries
    f, logits = head.step(drafter.features[start : length - 1], context[start + 1 :], start + 1, cache)
    drafter.true_entries = length - 1
    levels = [head.subset[logits[-1].topk(k).indices]]  # level 1: [k] token ids
    prefix = cache.length
    feats = f[-1:].expand(k, -1)  # [k, D] every branch reads the same predicted feature
    for level in range(1, d):
        feats, logits = branch_step(head, feats, levels[-1], length + level - 1, cache, prefix, level)
        levels.append(head.subset[logits.argmax(-1)])
    return torch.stack(levels, 1)  # [k, d]


def branch_step(head, feats: torch.Tensor, tokens: torch.Tensor, index: int, cache, prefix: int, level: int):
    """One head step for k branches at once: feats [k, D], tokens [k], all at head index `index`.
    Branch b sees the `prefix` true entries and its own entries of levels 1..level (the cache
    stores tree entries level by level, k per level) -> (f^ [k, D], subset logits [k, S])."""
    k = tokens.shape[0]
    cos, sin = head.rope(torch.full((k,), index, device=tokens.device))
    x = head.merge(feats, tokens)  # [k, D]
    branch_of = torch.arange(k * level) % k
    allowed = torch.ones(k, prefix + k * level, dtype=torch.bool)
    allowed[:, prefix:] = branch_of[None, :] == torch.arange(k)[:, None]
    for i, layer in enumerate(head.layers):
        q, key, value = layer.qkv(x, cos, sin)
        keys, values = cache.append(i, key, value)
        attended = torch.nn.functional.scaled_dot_product_attention(
            q, layer.expand_kv(keys), layer.expand_kv(values), attn_mask=allowed
        )  # [H, k, hd]
        x = layer.finish(x, attended)
    return head.out(x)


class TreeTarget:
    """The target's side: the text, its KV cache, tree verification and cache compaction."""

    def __init__(self, loaded, prompt_ids: list[int], feature_layers: tuple[int, ...]):
        self.loaded, self.layers = loaded, feature_layers
        self.cache = DynamicCache(config=loaded.model.config)
        self.seq = torch.tensor(prompt_ids)  # [L]
        self.seen = 0  # positions the cache holds

    def verify(self, tree: torch.Tensor):
        """tree [k, d] -> (accepted tokens [n], correction token, features [u + n, 3D] of the kept
        positions, the first of them). Greedy: a node passes when it is the target's argmax."""
        model = self.loaded.model
        k, d = tree.shape
        unseen = self.seq[self.seen :]  # [u] usually the last correction
        u, length = unseen.shape[0], self.seq.shape[0]
        nodes = tree.T.reshape(-1)  # [k*d] level by level: node (b, l) is row l*k + b
        feed = torch.cat([unseen, nodes])  # [t]
        t = feed.shape[0]
        level = torch.arange(d).repeat_interleave(k)
        branch = torch.arange(k).repeat(d)
        positions = torch.cat([torch.arange(self.seen, length), length + level])  # siblings share a position
        allowed = torch.zeros(t, self.seen + t, dtype=torch.bool)
        allowed[:, : self.seen] = True
        allowed[:u, self.seen : self.seen + u] = torch.tril(torch.ones(u, u, dtype=torch.bool))
        allowed[u:, self.seen : self.seen + u] = True
        allowed[u:, self.seen + u :] = (branch[:, None] == branch[None, :]) & (level[None, :] <= level[:, None])
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
        argmax = model.lm_head(hidden[u - 1 :])[:, : self.loaded.vocab_size].argmax(-1)  # [1 + k*d]
        path, want, b = [], int(argmax[0]), None
        for lvl in range(d):
            if b is None:  # level 1: at most one sibling can be the argmax (top-k tokens are distinct)
                hits = (tree[:, 0] == want).nonzero()
                if not hits.numel():
                    break
                b = int(hits[0, 0])
            elif int(tree[b, lvl]) != want:
                break
            path.append(lvl * k + b)
            want = int(argmax[1 + lvl * k + b])
        accepted = nodes[path] if path else torch.empty(0, dtype=torch.long)
        keep = torch.tensor(list(range(self.seen + u)) + [self.seen + u + r for r in path])
        for layer in self.cache.layers:  # the text, then the accepted path only
            layer.keys = layer.keys.index_select(-2, keep)
            layer.values = layer.values.index_select(-2, keep)
        first = self.seen
        self.seq = torch.cat([self.seq, accepted, torch.tensor([want])])
        self.seen = self.seq.shape[0] - 1  # the correction is fed next time
        return accepted, want, features[list(range(u)) + [u + r for r in path]], first


def tree_generate(loaded, drafter: HeadDrafter, prompt: str, k: int, d: int, new_tokens: int, stats: dict):
    ids = prompt_token_ids(loaded.tokenizer, prompt, True)
    drafter.start(SamplingConfig(0.0, None, None), torch.Generator().manual_seed(0), loaded.vocab_size)
    target = TreeTarget(loaded, ids, drafter.feature_layers)
    eos, new = loaded.eos_token_id, 0
    while new < new_tokens:
        room = new_tokens - new - 1  # leave room for the correction, as the decoder does
        tree = torch.empty(1, 0, dtype=torch.long)
        if room > 0:
            chain = lookup_continuation(target.seq.tolist(), min(d, room), 3, 2)
            if chain:
                tree = torch.tensor(chain)[None, :]
            else:
                tree = head_tree(drafter, target.seq, k, min(d, room))
                tree = torch.empty(1, 0, dtype=torch.long) if tree is None else tree
        accepted, correction, features, first = target.verify(tree)
        drafter.observe(features, first)
        stats["iterations"] += 1
        stats["accepted"] += accepted.shape[0]
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
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--trees", default="1x2,2x2,3x2", help="k x d, comma-separated")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    trees = [tuple(int(v) for v in spec.split("x")) for spec in args.trees.split(",")]
    loaded = load_model(None)
    drafter = HeadDrafter(load_draft_head(HEAD_DRAFT, loaded), HEAD_DRAFT)
    prompts, new_tokens = PROMPTS[: args.prompts], args.max_new_tokens
    methods: dict[str, object] = {"target alone": None, "chain g2": 2, "chain g3": 3}
    methods.update({f"tree {k}x{d}": (k, d) for k, d in trees})
    seconds, tokens, identical = dict.fromkeys(methods, 0.0), dict.fromkeys(methods, 0), dict.fromkeys(methods, 0)
    stats = {m: {"iterations": 0, "accepted": 0} for m in methods}
    greedy = {"temperature": 0.0, "max_new_tokens": new_tokens, "trace": False}
    with torch.inference_mode():
        tree_generate(loaded, drafter, prompts[0], 2, 2, 8, {"iterations": 0, "accepted": 0})  # warm-up
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
                        out = tree_generate(loaded, drafter, prompt, *spec, new_tokens, stats[name])
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
        print(
            f"{name:13s} {rate:6.2f} tokens/s  {rate / base:5.2f}x  tokens/iteration {per_iteration:4.2f}  "
            f"greedy identical to the target alone {identical[name]}/{runs}"
        )


if __name__ == "__main__":
    main()
