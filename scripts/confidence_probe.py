"""Probe: does stopping the draft head early when it is unsure pay? (not part of the product)

On the bench's prompts (specviz.labs.bench.PROMPTS: the set defaults are chosen on, never the held-out
set), the default hybrid draft with HeadDrafter(min_confidence=c) at several gammas, each decode
timed untraced beside the target alone, interleaved per prompt and repetition in one process.
Prints tokens per iteration and the speedup over the target alone per (T, gamma, c).

    .venv/bin/python scripts/confidence_probe.py --gammas 2,3,4 --confidences 0,0.3,0.5 --reps 2
    .venv/bin/python scripts/confidence_probe.py --configs 2:0,3:0,3:0.3,4:0.3 --reps 2
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.decoding.prompting import prompt_token_ids
from specviz.drafters import HeadDrafter, HybridDrafter, load_draft_head
from specviz.engine.machine import cpu_name
from specviz.engine.models import HEAD_DRAFT, HYBRID_DRAFT, load_model
from specviz.labs.bench import PROMPTS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gammas", default="2,3,4")
    parser.add_argument("--confidences", default="0,0.3,0.5")
    parser.add_argument("--configs", default=None, help="gamma:confidence pairs instead of the grid, e.g. 2:0,3:0.3")
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    target = load_model()
    head = load_draft_head(HEAD_DRAFT, target)
    prompts = [prompt_token_ids(target.tokenizer, p) for p in PROMPTS]
    configs = [(int(g), float(c)) for g in args.gammas.split(",") for c in args.confidences.split(",")]
    if args.configs:
        configs = [(int(g), float(c)) for g, c in (pair.split(":") for pair in args.configs.split(","))]
    results = []
    for temperature in (float(t) for t in args.temperatures.split(",")):
        seconds = {cfg: 0.0 for cfg in [None, *configs]}
        tokens = dict.fromkeys(seconds, 0)
        iterations = dict.fromkeys(seconds, 0)
        for rep in range(args.reps + 1):  # rep 0 warms up and is not counted
            for i, ids in enumerate(prompts):
                order = [None, *configs]
                shift = (rep * len(prompts) + i) % len(order)
                for cfg in order[shift:] + order[:shift]:
                    common = {"target": target, "temperature": temperature, "seed": rep * 100 + i}
                    common.update(max_new_tokens=args.max_new_tokens, trace=False)
                    start = time.perf_counter()
                    if cfg is None:
                        out = autoregressive_generate(ids, **common)
                    else:
                        gamma, confidence = cfg
                        drafter = HybridDrafter(HeadDrafter(head, HEAD_DRAFT, min_confidence=confidence), HYBRID_DRAFT)
                        out = speculative_generate(ids, draft=drafter, gamma=gamma, **common)
                    if rep:
                        seconds[cfg] += time.perf_counter() - start
                        tokens[cfg] += out.summary["new_tokens"]
                        iterations[cfg] += out.summary["iterations"]
        base = tokens[None] / seconds[None]
        for cfg in configs:
            row = {
                "temperature": temperature,
                "gamma": cfg[0],
                "min_confidence": cfg[1],
                "tokens_per_iteration": round(tokens[cfg] / iterations[cfg], 3),
                "speedup": round(tokens[cfg] / seconds[cfg] / base, 3),
            }
            results.append(row)
            print(json.dumps(row), flush=True)
        print(f"T={temperature} target alone {base:.2f} tokens/s", flush=True)
    if args.out:
        meta = {"cpu": cpu_name(), "threads": torch.get_num_threads(), "reps": args.reps, "prompts": len(prompts)}
        with open(args.out, "w") as f:
            json.dump({**meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
