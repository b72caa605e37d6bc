"""Do the suffix-tree hybrid and the staged drafter win? One process, interleaved rounds, ratios.

For each prompt (the first of each Workloads kind, held out from every draft's training, and a copying
task where suffix trees should shine), each round runs the target alone and then every drafter, in an
order that rotates by round, at T=0; a drafter's speedup is its tokens/s over the target alone's in the
same round on the same prompt (the median over rounds), so a contended machine shifts both sides alike.

The suffix trees' memory of earlier outputs holds, for each prompt, the target's outputs for the other
prompts only (as a server that has answered other requests before), never this prompt's own. With
--similar the prompts are instead requests like one answered just before (SIMILAR: the memory holds
the target's output for the earlier one), the case SuffixDecoding is made for.

    python scripts/measure_drafters.py --rounds 3 --max-new-tokens 64 [--similar] [--threads 1] [--out file.json]

The figures go to docs/benchmarks.md ("Suffix trees and staged drafting") with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import statistics

COPY_PROMPT = (
    "Copy this list exactly, then add one more line in the same style:\n"
    "- apples: 3 boxes, shelf A\n- pears: 5 boxes, shelf B\n- plums: 2 boxes, shelf C\n- figs: 4 boxes, shelf D"
)


SIMILAR = {  # key: (the request answered before, the request measured)
    "code-again": (
        "Write a Python function `is_even(n)` that returns True when n is even, with a docstring.",
        "Write a Python function `is_odd(n)` that returns True when n is odd, with a docstring.",
    ),
    "loop-again": (
        "Write a for loop in Python that prints the numbers 1 to 5, one per line.",
        "Write a for loop in Python that prints the numbers 1 to 7, one per line.",
    ),
    "translate-again": (
        "Translate into French: The cat sleeps on the warm chair by the window.",
        "Translate into French: The dog sleeps on the warm chair by the door.",
    ),
}


def prompts() -> dict[str, str]:
    from specviz.labs.workloads import KINDS

    out = {kind.key: kind.prompts[0] for kind in KINDS if isinstance(kind.prompts[0], str)}
    out["copy"] = COPY_PROMPT
    return out


def drafters(target) -> dict:
    from specviz.drafters import resolve_drafter
    from specviz.engine.models import HYBRID_DRAFT, HYBRID_SUFFIX_DRAFT, STAGED_DRAFT, TRAINED_DRAFT

    names = (HYBRID_DRAFT, HYBRID_SUFFIX_DRAFT, STAGED_DRAFT, TRAINED_DRAFT)
    return {name: resolve_drafter(name, target) for name in names}


def memory_of(outputs: list[list[int]]):
    """A fresh suffix memory holding these earlier outputs."""
    from specviz.drafters.suffix import SuffixMemory

    memory = SuffixMemory()
    for ids in outputs:
        memory.extend(memory.new_run(), ids)
    return memory


def earlier_outputs(target, texts: dict[str, str], similar: bool, max_new_tokens: int) -> dict[str, list[list[int]]]:
    """Per prompt, the target's earlier outputs the suffix memory holds: the other prompts' (held-out),
    or the similar request's answered before (--similar). Also the target's warm-up."""
    from specviz.decoding.decoder import autoregressive_generate

    def answer(text: str) -> list[int]:
        return autoregressive_generate(
            text, target=target, temperature=0.0, max_new_tokens=max_new_tokens
        ).output_token_ids

    if similar:
        return {key: [answer(before)] for key, (before, _) in SIMILAR.items()}
    outputs = {key: answer(text) for key, text in texts.items()}
    return {key: [ids for other, ids in outputs.items() if other != key] for key in texts}


def run_round(target, texts, drafts, memories, args, rotation: int) -> list[dict]:
    """One round: per prompt the target alone, then each drafter (order rotated); one row per run."""
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.engine.models import HYBRID_SUFFIX_DRAFT

    common = {"target": target, "temperature": 0.0, "max_new_tokens": args.max_new_tokens}
    rows = []
    names = list(drafts)
    names = names[rotation % len(names) :] + names[: rotation % len(names)]
    for key, text in texts.items():
        base = autoregressive_generate(text, **common).summary
        for name in names:
            drafter = drafts[name]
            if name == HYBRID_SUFFIX_DRAFT:
                drafter.lookup.memory = memory_of(memories[key])
            trace = speculative_generate(text, draft=drafter, gamma=args.gamma, **common)
            s = trace.summary
            rows.append({
                "prompt": key, "draft": name, "tokens_per_iteration": s["new_tokens"] / max(1, s["iterations"]),
                "speedup": s["tokens_per_s"] / base["tokens_per_s"],
                "draft_passes": getattr(drafter, "passes", None),
                "drafted": sum(len(it["drafts"]) for it in trace.iterations),
            })  # fmt: skip
    return rows


def summarize(rows: list[dict]) -> dict:
    """(prompt, draft) -> median speedup, tokens per iteration, and draft passes per drafted token."""
    out: dict = {}
    for row in rows:
        out.setdefault((row["prompt"], row["draft"]), []).append(row)
    table = {}
    for (prompt, draft), runs in out.items():
        passes = [r["draft_passes"] / r["drafted"] for r in runs if r["draft_passes"] is not None and r["drafted"]]
        table[f"{prompt}|{draft}"] = {
            "speedup": statistics.median(r["speedup"] for r in runs),
            "tokens_per_iteration": statistics.median(r["tokens_per_iteration"] for r in runs),
            "draft_passes_per_draft": statistics.median(passes) if passes else None,
        }
    return table


def main() -> None:
    import platform

    import torch

    from specviz.engine.models import load_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--gamma", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--similar", action="store_true", help="requests like one answered before (SIMILAR)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from specviz.config import DEFAULT_GAMMA

    args.gamma = args.gamma or DEFAULT_GAMMA
    target = load_model()
    texts = {key: after for key, (_, after) in SIMILAR.items()} if args.similar else prompts()
    drafts = drafters(target)
    memories = earlier_outputs(target, texts, args.similar, args.max_new_tokens)
    rows = []
    for rotation in range(args.rounds + 1):  # round 0 warms every drafter up and is not counted
        got = run_round(target, texts, drafts, memories, args, rotation)
        rows += got if rotation else []
    table = summarize(rows)
    print(f"{platform.processor() or platform.machine()}, {args.threads} thread(s), gamma {args.gamma}, T=0")
    print("| prompt | " + " | ".join(drafts) + " |")
    for key in texts:
        cells = [table[f"{key}|{d}"] for d in drafts]
        print(
            f"| {key} | "
            + " | ".join(f"{c['speedup']:.2f}x ({c['tokens_per_iteration']:.2f} t/it)" for c in cells)
            + " |"
        )
    for d in drafts:
        gm = statistics.geometric_mean(table[f"{k}|{d}"]["speedup"] for k in texts)
        passes = [table[f"{k}|{d}"]["draft_passes_per_draft"] for k in texts]
        extra = f", draft passes per draft {statistics.mean(passes):.2f}" if None not in passes else ""
        print(f"{d}: geometric mean speedup {gm:.2f}x{extra}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "table": table, "threads": args.threads, "gamma": args.gamma}, f, indent=1)


if __name__ == "__main__":
    main()
