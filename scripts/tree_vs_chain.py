"""Measurement probe: the default draft's two-branch tree against its chain, side by side.

The hybrid draft (n-gram when the context matches, else the head) drafts a tree of
specviz.config.TREE_BRANCHES branches; this runs the bench's sweep (specviz.labs.bench.sweep: the
target alone, then traced and untraced decodes per gamma, with the baseline re-measured between
gamma blocks) for the same hybrid drafting a chain and drafting the tree, twice each, alternating,
in one process, so both meet the same machine. It chose trees at T > 0 (docs/benchmarks.md).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/tree_vs_chain.py --threads 2 --temperature 1 --out ab.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from specviz.config import TREE_BRANCHES
from specviz.drafters import HeadDrafter, HybridDrafter, load_draft_head
from specviz.engine.models import HEAD_DRAFT, HYBRID_DRAFT, load_model
from specviz.labs.bench import PROMPTS, Bench, sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--gammas", default="2,3")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target = load_model(None)
    head = load_draft_head(HEAD_DRAFT, target)
    gammas = [int(g) for g in args.gammas.split(",")]

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    report = {"threads": args.threads, "temperature": args.temperature, "prompts": PROMPTS, "runs": {}}
    for name, branches in (("chain", 1), ("tree", TREE_BRANCHES), ("chain-b", 1), ("tree-b", TREE_BRANCHES)):
        drafter = HybridDrafter(HeadDrafter(head, HEAD_DRAFT, branches=branches), HYBRID_DRAFT)
        log(name)
        bench = Bench(target, drafter, PROMPTS, args.max_new_tokens, 0)
        measured = sweep(bench, [args.temperature], gammas, args.reps, False, log)
        for row in measured["results"]:
            log(
                f"{name} gamma {row['gamma']}: speedup {row['speedup']}, tokens per iteration "
                f"{row['mean_accepted_length']:.3f}, acceptance by position {row['acceptance_by_position']}"
            )
        report["runs"][name] = measured
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    log(f"written {args.out}")


if __name__ == "__main__":
    main()
