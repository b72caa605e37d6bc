"""Side-by-side speed measurements: `python -m specviz bench`.

In one process, over a fixed varied prompt set, for each temperature and gamma:

    baseline    the target alone (specviz.autoregressive_generate, with the kernels specviz.engine.kernels
                chose on this machine)
    hf_generate what a user would run instead: transformers' generate() on the same model and
                dtype, loaded as transformers loads it (eager weights, its own KV cache)
    hf_lookup   transformers' generate(prompt_lookup_num_tokens=3): its model-free speculative mode
    traced      specviz speculative decoding with the full trace recorded
    untraced    the same decode with trace=False (what a deployment would run)
    hf          transformers' generate(assistant_model=draft) with the same pair, gamma
                (constant schedule) and sampling

Every call is timed from the outside (wall clock around the whole call, prompt already
tokenised with the chat template and identical for all of them). Each figure is the median of
`--reps` repetitions after one warm-up; the three baselines (rotating which goes first) are
re-measured between gamma blocks so a drift in machine load hits both sides of a speedup. Every
speedup is given over specviz's target alone and over the faster of it and transformers'
generate(): a gain for the user only if it beats the fastest way to run the target alone.
Acceptance statistics come from the traced runs (the untraced decode draws the same tokens from
the same seed). The predicted speedup uses the measured alpha, c and v (specviz.traces.speedup's
definitions: the draft's time per drafted token and the verify pass, over the target alone's step):

    predicted = (1 - alpha^(gamma+1)) / ((1 - alpha) (gamma c + v))      (Thm 3.8 of Leviathan et al. at v = 1)

and `predicted_speedup_paper` is the paper's own, at v = 1.

`--tree` picks the draft tree a head drafts (DecodeOptions.tree): the default's two branches, EAGLE-2's
dynamic tree or plain chains; run once per tree, each against its own target alone in its process.

It also measures the memory bandwidth (specviz.labs.roofline) and reports, for the target alone and
each draft with weights, the bytes a step reads, the measured step and the share of the roofline.

Writes JSON and a markdown table (specviz.labs.bench_report; docs/benchmarks.md explains every column).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

from specviz.config import DEFAULT_WEIGHTS, TREE_MODES, WEIGHT_FORMATS
from specviz.engine.machine import load_average
from specviz.engine.transformers_generate import generation_config
from specviz.labs import roofline
from specviz.labs.bench_report import best_by_temperature, environment, target_alone_over_hf, write_report
from specviz.labs.theory import expected_tokens_per_iteration, walltime_improvement
from specviz.traces.trace import acceptance_by_position, reached_betas, summarize

# Fixed and varied, and none of them in the draft's training prompts (specviz.training.train_draft).
PROMPTS = [
    "Write a short story about a fox who wants to fly.",
    "Explain how a refrigerator keeps food cold.",
    "Write a Python function that counts the vowels in a string.",
    "List five ideas for a rainy weekend at home.",
    "What is the difference between weather and climate?",
    "Hello! Can you suggest a name for my new cat?",
    "Describe how to plant a tomato seedling, step by step.",
    "Write a short email inviting my team to a picnic.",
]
# A second set, held out from every choice the project makes: no default (gamma, draft, kernels,
# thresholds) was chosen on it and no recipe trains on it. `--prompt-set held-out` measures what a
# new user gets on text nobody tuned for.
HELD_OUT_PROMPTS = [
    "Why do cats purr, and what does it mean?",
    "Give me three tips for learning to play the guitar.",
    "Summarize the plot of a heist movie in a paragraph.",
    "What should I pack for a weekend camping trip?",
    "Explain what a black hole is to a ten year old.",
    "Write a limerick about a sleepy programmer.",
    "How do I make a simple tomato sauce?",
    "What are the pros and cons of working from home?",
]
PROMPT_SETS = {"bench": PROMPTS, "held-out": HELD_OUT_PROMPTS}


# The paper's formulas live in specviz.labs.theory; the bench names them after its columns.
HF_LOOKUP_TOKENS = 3  # transformers' prompt lookup: draft tokens per lookup, as issue 23 measured it
HF_METHODS = ("hf", "hf_generate", "hf_lookup")  # methods that return a token count, not a Trace
expected_tokens = expected_tokens_per_iteration  # (1 - alpha^(gamma+1)) / (1 - alpha)
predicted_speedup = walltime_improvement  # from the measured alpha, c and v (v = 1: Thm 3.8)


# ----- one measured pass over the prompt set ----------------------------------------------------


class Bench:
    """The loaded pair, the tokenised prompts and the settings shared by every pass."""

    def __init__(
        self, target, draft, prompts: list[str], max_new_tokens: int, seed: int, plain=None, tree: bool | str = True
    ):
        """draft: a LoadedModel, or a draft name the decoder resolves ("ngram", "hybrid", a head).
        plain: the same target as transformers loads it (for the hf_generate and hf_lookup
        methods), or None to skip them. tree: DecodeOptions.tree, the draft tree a head drafts."""
        from specviz.decoding.prompting import prompt_token_ids

        self.target, self.draft, self.plain, self.tree = target, draft, plain, tree
        self.prompt_ids = [prompt_token_ids(target.tokenizer, p) for p in prompts]  # identical input for all methods
        self.max_new_tokens, self.seed = max_new_tokens, seed

    def run(self, method: str, temperature: float, gamma: int) -> dict:
        """Decode every prompt once with one method; return total tokens, seconds and traces."""
        tokens, seconds, traces = 0, 0.0, []
        for i, ids in enumerate(self.prompt_ids):
            t0 = time.perf_counter()
            out = self._one(method, ids, temperature, gamma, self.seed + i)
            seconds += time.perf_counter() - t0
            if method in HF_METHODS:
                tokens += out
            else:
                tokens += out.summary["new_tokens"]
                traces.append(out)
        return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds, "traces": traces}

    def _one(self, method: str, ids: list[int], temperature: float, gamma: int, seed: int):
        from specviz.config import DecodeOptions
        from specviz.decoding.decoder import autoregressive_generate, speculative_generate

        options = DecodeOptions(
            gamma=gamma, temperature=temperature, seed=seed, max_new_tokens=self.max_new_tokens, tree=self.tree
        )
        if method == "baseline":
            return autoregressive_generate(ids, target=self.target, options=options, trace=False)
        if method in ("traced", "untraced"):
            traced = method == "traced"
            return speculative_generate(ids, target=self.target, draft=self.draft, options=options, trace=traced)
        if method == "hf":
            return self._hf(ids, temperature, gamma, seed)
        if method in ("hf_generate", "hf_lookup"):
            extra = {"prompt_lookup_num_tokens": HF_LOOKUP_TOKENS} if method == "hf_lookup" else {}
            return self._generate(self.plain.model, ids, temperature, seed, **extra)
        raise ValueError(method)

    def _generate(self, model, ids: list[int], temperature: float, seed: int, **extra) -> int:
        """transformers' generate() on `model`; returns the new token count."""
        eos = self.target.eos_token_id
        gen = generation_config(self.max_new_tokens, temperature, eos, eos, **extra)
        input_ids = torch.tensor([ids], device=model.device)  # [1, P]
        torch.manual_seed(seed)  # transformers samples from the global generator
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), generation_config=gen)
        return int(out.shape[1] - input_ids.shape[1])

    def _hf(self, ids: list[int], temperature: float, gamma: int, seed: int) -> int:
        """transformers' assisted generation with the same pair; returns the new token count."""
        target = self.target
        # A shallow copy carries the same weights with its own generation config, so the cached
        # draft model is never mutated (docs/design.md: loaded models are shared and read-only).
        assistant = copy.copy(self.draft.model)
        assistant.generation_config = copy.deepcopy(self.draft.model.generation_config)
        assistant.generation_config.num_assistant_tokens = gamma
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        assistant.generation_config.assistant_confidence_threshold = 0.0  # always draft gamma tokens
        eos = target.eos_token_id
        gen = generation_config(self.max_new_tokens, temperature, eos, eos)
        input_ids = torch.tensor([ids], device=target.model.device)  # [1, P]
        torch.manual_seed(seed)  # transformers samples from the global generator
        with torch.inference_mode():
            out = target.model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                assistant_model=assistant,
                generation_config=gen,
            )
        return int(out.shape[1] - input_ids.shape[1])


def speculative_stats(traces, gamma: int) -> dict:
    """Acceptance statistics pooled over the prompt set (sums over iterations, not means of means),
    with the definitions of specviz.traces.trace.summarize and acceptance_by_position."""
    iterations = [it for t in traces for it in t.iterations]
    pooled = summarize(
        sum(t.summary["iterations"] for t in traces),
        sum(t.summary["drafted"] for t in traces),
        sum(t.summary["accepted"] for t in traces),
        sum(t.summary["new_tokens"] for t in traces),
        0.0,
        0.0,
        0.0,
        reached_betas(iterations),
    )
    by_position = acceptance_by_position(iterations, gamma)
    return {
        "acceptance_rate": pooled["acceptance_rate"],
        "mean_accepted_length": pooled["mean_accepted_length"],
        "alpha": pooled["alpha"],
        "acceptance_by_position": [row["acceptance"] for row in by_position],
        "beta_by_position": [row["mean_beta"] for row in by_position],
    }


def per_step_ms(traces, phase: str, per: str) -> float:
    """Total `phase` time (draft_ms / verify_ms) over total `per` (drafted / iterations), in ms."""
    total = sum(t.summary[phase] for t in traces)
    count = sum(t.summary[per] for t in traces)
    return total / count if count else float("nan")


# ----- the sweep --------------------------------------------------------------------------------


def sweep(bench: Bench, temperatures, gammas, reps: int, hf: bool, log) -> dict:
    methods = ["traced", "untraced"] + (["hf"] if hf else [])
    # Warm-up: one short pass of each method, so one-time costs (allocations, lazy imports) stay out.
    warm = Bench(bench.target, bench.draft, ["Hello"], 8, bench.seed, bench.plain, bench.tree)
    warm.prompt_ids = bench.prompt_ids[:1]
    for method in [*_baseline_methods(bench), *methods]:
        warm.run(method, temperatures[0], gammas[0])

    baselines, rows = {}, []
    for temperature in temperatures:
        base_runs: dict[str, list] = {m: [] for m in _baseline_methods(bench)}
        for _ in range(max(0, reps - len(gammas))):
            _measure_baseline(bench, temperature, base_runs, log)
        config_runs = []
        for gamma in gammas:
            runs = {m: [] for m in methods}
            for rep in range(reps):
                # Rotate the order each repetition so no method always runs first after a pause.
                for method in methods[rep % len(methods) :] + methods[: rep % len(methods)]:
                    runs[method].append(bench.run(method, temperature, gamma))
            config_runs.append((gamma, runs))
            log(
                f"T={temperature} gamma={gamma} "
                + ", ".join(f"{m} {statistics.median(r['tokens_per_s'] for r in runs[m]):.2f}" for m in methods)
                + " tokens/s"
            )
            # Between gamma blocks, so the baselines sample the same stretch of time as the drafts.
            _measure_baseline(bench, temperature, base_runs, log)

        alone = {m: statistics.median(r["tokens_per_s"] for r in rs) for m, rs in base_runs.items()}
        alone_runs = base_runs["baseline"]
        target_ms = statistics.median(per_step_ms(r["traces"], "verify_ms", "iterations") for r in alone_runs)
        baselines[str(temperature)] = {
            "tokens_per_s": alone["baseline"],
            "hf_generate_tokens_per_s": alone.get("hf_generate"),
            "hf_lookup_tokens_per_s": alone.get("hf_lookup"),
            "target_step_ms": target_ms,
            "reps": len(base_runs["baseline"]),
            "tokens": base_runs["baseline"][0]["tokens"],
        }
        for gamma, runs in config_runs:
            row = _row(temperature, gamma, runs, alone["baseline"], target_ms, hf, alone.get("hf_generate"))
            lookup = alone.get("hf_lookup")
            row["over_hf_lookup"] = row["tokens_per_s"]["untraced"] / lookup if lookup else None
            row["sameness"] = sameness_counts(runs["traced"][0]["traces"], alone_runs[0]["traces"], bench.target)
            rows.append(row)
    return {"baseline": baselines, "results": rows}


def sameness_counts(spec_traces, base_traces, target) -> dict:
    """Per verdict of specviz.traces.sameness, how many prompts got it (speculative vs the target alone);
    at T=0 the float32 logit gap of every difference is listed."""
    from specviz.engine.models import load_model
    from specviz.traces.sameness import compare_runs

    exact = target if target.dtype == "float32" else load_model(target.name, device=target.device, dtype="float32")
    counts: dict = {}
    for spec, base in zip(spec_traces, base_traces, strict=True):
        same = compare_runs(spec, base, exact)
        counts[same.verdict] = counts.get(same.verdict, 0) + 1
        if same.logit_gap is not None:
            counts.setdefault("gaps", []).append(round(same.logit_gap, 4))
    return counts


def _baseline_methods(bench: Bench) -> list[str]:
    return ["baseline", "hf_generate", "hf_lookup"] if bench.plain is not None else ["baseline"]


def _measure_baseline(bench: Bench, temperature: float, runs: dict, log) -> None:
    """One pass of each baseline (specviz's target alone, transformers' generate() and its prompt
    lookup), rotating which goes first so none always runs right after a speculative block."""
    methods = _baseline_methods(bench)
    shift = len(runs["baseline"]) % len(methods)
    for method in methods[shift:] + methods[:shift]:
        runs[method].append(bench.run(method, temperature, 1))
    log(f"T={temperature} " + ", ".join(f"{m} {runs[m][-1]['tokens_per_s']:.2f}" for m in methods) + " tokens/s")


def _row(temperature, gamma, runs, base_tps, target_ms, hf, hf_generate_tps=None) -> dict:
    tps = {m: statistics.median(r["tokens_per_s"] for r in rs) for m, rs in runs.items()}
    stats = speculative_stats(runs["traced"][0]["traces"], gamma)
    draft_ms = statistics.median(per_step_ms(r["traces"], "draft_ms", "drafted") for r in runs["untraced"])
    verify_ms = statistics.median(per_step_ms(r["traces"], "verify_ms", "iterations") for r in runs["untraced"])
    # c and v as specviz.traces.speedup defines them (over the target alone's step), pooled over the prompts.
    c, v = draft_ms / target_ms, verify_ms / target_ms
    alpha = stats["alpha"]
    predicted = predicted_speedup(alpha, gamma, c, v) if alpha is not None else None
    speedup = tps["untraced"] / base_tps
    fastest = "transformers generate()" if hf_generate_tps is not None and hf_generate_tps > base_tps else "specviz"
    return {
        "temperature": temperature,
        "gamma": gamma,
        "tokens_per_s": tps,
        "speedup": {m: v / base_tps for m, v in tps.items()},
        # Against the faster of the two ways to run the target alone (specviz's, or transformers'
        # generate() on the same model): the gain a user actually gets on this machine.
        "speedup_over_fastest_alone": tps["untraced"] / max(base_tps, hf_generate_tps or 0.0),
        "fastest_alone": fastest,
        "over_hf_generate": tps["untraced"] / hf_generate_tps if hf_generate_tps else None,
        **stats,
        "expected_tokens": expected_tokens(alpha, gamma) if alpha is not None else None,
        "draft_step_ms": draft_ms,
        "verify_ms": verify_ms,
        "verify_over_target_step": v,
        "c": c,
        "predicted_speedup": predicted,
        "predicted_speedup_paper": predicted_speedup(alpha, gamma, c) if alpha is not None else None,  # v = 1
        "efficiency": speedup / predicted if predicted else None,
        "tracing_overhead": 1 - tps["traced"] / tps["untraced"],
        "specviz_over_hf": tps["untraced"] / tps["hf"] if hf else None,
        "tokens": runs["untraced"][0]["tokens"],
    }


def _numbers(text: str, kind):
    return [kind(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--random-weights" in argv:  # a device's check with no download: specviz.labs.bench_device
        from specviz.labs import bench_device

        return bench_device.main(argv)
    args = _parser().parse_args(argv)

    from specviz.errors import SpecvizError

    try:
        return _main(args)
    except SpecvizError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m specviz bench", description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=None, help="target model (default: the offline SmolLM2-135M-Instruct)")
    parser.add_argument(
        "--drafts",
        default=None,
        help="comma-separated drafts, each benched against the same target in this process: model names, "
        "ngram, hybrid or a head (default: the target's default draft)",
    )
    parser.add_argument(
        "--dtype",
        default=None,
        choices=("float32", "bfloat16", "float16"),
        help="weights of the target and model drafts (default: float32 on cpu, bfloat16 on cuda)",
    )
    parser.add_argument(
        "--weights",
        default=None,
        help=f"the target's weights, comma-separated: {', '.join(WEIGHT_FORMATS)} (default: {DEFAULT_WEIGHTS}; "
        "with --llama-cpp: both)",
    )
    parser.add_argument(
        "--llama-cpp",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="compare with llama.cpp's llama-completion (PATH: the binary or its build folder; none: on PATH) "
        "on the shipped GGUF, interleaved: specviz.labs.peer",
    )
    parser.add_argument("--gammas", default="1,2,3,4,6,8", help="comma-separated gammas")
    parser.add_argument("--temperatures", default="0,1", help="comma-separated temperatures (0: greedy)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per configuration (median reported)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="the most tokens each decode writes")
    parser.add_argument("--prompts", type=int, default=4, help=f"how many of the set's {len(PROMPTS)} fixed prompts")
    parser.add_argument(
        "--prompt-set",
        default="bench",
        choices=sorted(PROMPT_SETS),
        help="bench: the prompts defaults were chosen on; held-out: prompts no choice was made on",
    )
    parser.add_argument(
        "--tree",
        default="branches",
        choices=TREE_MODES,
        help="the draft tree a head drafts: branches, dynamic (EAGLE-2) or off (chains)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds each decode's random generator")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--no-hf", action="store_true", help="skip transformers' assisted generation")
    parser.add_argument(
        "--no-hf-generate",
        action="store_true",
        help="skip timing transformers' generate() and its prompt lookup on the same model beside the target alone",
    )
    parser.add_argument("--out", type=Path, default=Path("bench.json"), help="JSON output; the table goes beside it")
    from specviz.labs.command_help import with_defaults

    return with_defaults(parser)


def _main(args) -> int:
    from specviz.engine.models import default_draft, load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    if not 1 <= args.prompts <= len(PROMPTS):
        print(f"error: --prompts must be from 1 to {len(PROMPTS)}", file=sys.stderr)
        return 2
    formats = _weight_formats(args.weights, both=args.llama_cpp is not None)
    if args.llama_cpp is not None:
        return _versus_llama_cpp(args, formats or list(WEIGHT_FORMATS))
    target = load_model(args.target, dtype=args.dtype, weights=formats[0] if formats else None)
    names = [d.strip() for d in args.drafts.split(",")] if args.drafts else [default_draft(target.name)]
    temperatures = _numbers(args.temperatures, float)
    gammas = _numbers(args.gammas, int)
    prompts = PROMPT_SETS[args.prompt_set][: args.prompts]

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    # The same target as transformers loads it: what a user would run instead (module docstring).
    plain = None if args.no_hf_generate else load_model(args.target, dtype=args.dtype, pack=False, lean=False)
    load_before = load_average()
    t0 = time.perf_counter()
    bandwidths = [roofline.measured_bandwidth()]  # before the sweeps and after them, with the same threads
    drafts: dict = {}
    runs = [_sweep_draft(args, target, name, prompts, temperatures, gammas, plain, log, drafts) for name in names]
    bandwidths.append(roofline.measured_bandwidth())
    # The step's share with each sum timed beside it (a CPU's: the sum is the CPU's memory).
    beside = roofline.step_beside_sum(target) if target.device == "cpu" else None
    report = {
        "schema": "specviz.bench/2",
        **environment(torch.get_num_threads()),
        "settings": {
            "target": target.name,
            "dtype": target.dtype,
            "weights": target.weights,
            "kernels": target.kernels_label,
            "kernel_choice": target.kernels,
            "drafts": names,
            "gammas": gammas,
            "temperatures": temperatures,
            "reps": args.reps,
            "max_new_tokens": args.max_new_tokens,
            "prompts": len(prompts),
            "prompt_set": args.prompt_set,
            "tree": args.tree,
            "seed": args.seed,
        },
        "prompts": prompts,
        "runs": runs,
    }
    if plain is not None:
        report["target_alone"] = target_alone_over_hf(runs[0]["baseline"])
    report["roofline"] = roofline.report(bandwidths, target, runs, drafts, beside)
    report.update(load_before=load_before, load_after=load_average(), seconds=round(time.perf_counter() - t0, 1))
    write_report(report, args.out)
    return 0


def _weight_formats(given: str | None, both: bool) -> list[str]:
    """--weights as a list (empty: the default), or a ConfigError naming the choices; several only where
    `both` (beside llama.cpp)."""
    from specviz.errors import ConfigError

    formats = [w.strip() for w in (given or "").split(",") if w.strip()]
    if any(w not in WEIGHT_FORMATS for w in formats):
        raise ConfigError(f"--weights takes {', '.join(WEIGHT_FORMATS)}, comma-separated; got {given!r}")
    if len(formats) > 1 and not both:
        raise ConfigError("one --weights at a time without --llama-cpp: run the bench once for each")
    return formats


def _versus_llama_cpp(args, formats: list[str]) -> int:
    """specviz.labs.peer's comparison: llama.cpp on the shipped GGUF beside specviz, per weight format."""
    import json

    from specviz.engine.models import default_draft, load_model
    from specviz.labs import peer

    binary = peer.find_binary(args.llama_cpp or None)
    targets = {w: load_model(args.target, dtype=args.dtype, weights=w) for w in formats}
    threads = torch.get_num_threads()
    prompts = PROMPT_SETS[args.prompt_set][: args.prompts]
    draft = default_draft(next(iter(targets.values())).name)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    report = peer.compare(targets, draft, prompts, args.max_new_tokens, args.reps, threads, binary, log)
    loaded = {w: t.weights for w, t in targets.items()}  # what each ran (float32 where blocks cannot run)
    settings = {"prompts": prompts, "draft": draft, "weights": loaded, "max_new_tokens": args.max_new_tokens}
    report = {"schema": "specviz.peer/1", **environment(threads), **settings, **report}
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    markdown = peer.table(report)
    args.out.with_suffix(".md").write_text(markdown + "\n", encoding="utf-8")
    print(markdown)
    return 0


def _sweep_draft(args, target, name: str, prompts, temperatures, gammas, plain, log, drafts: dict) -> dict:
    """One draft's run of the report: loaded beside the target (a model draft) and swept over gammas
    and temperatures, with its best gamma per temperature. drafts[name] keeps the draft as run."""
    from specviz.drafters.resolve import needs_no_model
    from specviz.engine.models import check_vocabulary, load_model

    if needs_no_model(name):  # the decoder builds it from its name (hybrid-suffix, staged, ...)
        draft, hf = name, False  # transformers' assisted generation needs an assistant model
    else:
        draft = load_model(name, device=target.device, dtype=target.dtype)
        check_vocabulary(target, draft)
        hf = not args.no_hf
    log(f"draft {name}")
    drafts[name] = draft
    bench = Bench(target, draft, prompts, args.max_new_tokens, args.seed, plain, args.tree)
    measured = sweep(bench, temperatures, gammas, args.reps, hf, log)
    return {"draft": name, **measured, "best": best_by_temperature(measured["results"])}
