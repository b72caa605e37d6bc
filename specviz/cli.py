"""The command line: generate a trace, validate one, and the benchmark and draft-training tools.

    python -m specviz generate --prompt "..." [--target --draft --gamma --temperature --top-k
                                                --top-p --seed --max-new-tokens --tree --rule]
                                                [--out trace.json]
    python -m specviz validate trace.json
    python -m specviz app [streamlit options]   (the app: specviz_app, run as its own process)
    python -m specviz bench ...          (specviz.labs.bench)
    python -m specviz draft-report ...   (specviz.labs.draft_report)
    python -m specviz train-draft ...    (specviz.training.train_draft)
    python -m specviz train-head ...     (specviz.training.train_head)

Errors a user can fix print one clear line and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from specviz.config import (
    DEFAULT_DRAFT,
    DEFAULT_GAMMA,
    DRAFTERS,
    FALLBACK_DRAFT,
    GAMMA_MAX,
    GAMMA_MIN,
    TREE_MODES,
    WEIGHT_FORMATS,
    DecodeOptions,
)
from specviz.errors import SpecvizError
from specviz.labs.command_help import with_defaults
from specviz.teaching.charts.tokens import iteration_tokens

# Subcommands that own their arguments live in their own modules, each with main(argv) -> int: (module,
# what `python -m specviz --help` says of it, without importing it: the modules import torch).
DELEGATED = {
    "check": ("specviz.labs.check", "prove on this machine that the output is the target's (exit 1 if not)"),
    "bench": ("specviz.labs.bench", "measure the speedups side by side (and llama.cpp with --llama-cpp)"),
    "draft-report": ("specviz.labs.draft_report", "how well each offline draft guesses the target on free text"),
    "train-draft": ("specviz.training.train_draft", "train the offline draft model (distilled from the target)"),
    "train-head": ("specviz.training.train_head", "train the offline draft head on the target's features"),
}
# The app is Streamlit's, which specviz never imports: `app` starts `python -m specviz_app` as its own process.
APP_MODULE = "specviz_app"

# The acceptance rules a user may choose here: the exact ones of specviz.decoding.verify.RULES (the
# lab's wrong variants stay in the lab). Named here so the command line imports no torch to parse.
CLI_RULES = ("exact", "block")

# Terminal colours for the token statuses (the same meaning as in the app).
ANSI = {
    "accepted": "\033[32m",
    "rejected": "\033[31;9m",
    "discarded": "\033[90;9m",
    "resampled": "\033[33m",
    "bonus": "\033[34m",
    "target": "",
    "reset": "\033[0m",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specviz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="decode one prompt speculatively and write its trace")
    _generate_options(gen)
    val = sub.add_parser("validate", help="check a trace file against the schema and its invariants")
    val.add_argument("path", type=Path, help="the trace's JSON file")

    sub.add_parser(
        "app", help=f"start the app (python -m {APP_MODULE}; its options are Streamlit's, e.g. --server.port 8502)",
        add_help=False,
    )  # fmt: skip
    for name, (_module, what) in DELEGATED.items():
        sub.add_parser(name, help=f"{what}; its options: python -m specviz {name} --help", add_help=False)
    return parser


def _generate_options(gen: argparse.ArgumentParser) -> None:
    """generate's options, each with what it does and its default."""
    gen.add_argument("--prompt", required=True, help="text for the model to continue")
    gen.add_argument("--target", default=None, help="target model (default: the offline SmolLM2-135M-Instruct)")
    gen.add_argument(
        "--draft",
        default=None,
        help=f"a registered drafter ({', '.join(DRAFTERS)}), a draft model's name or folder, or a draft head's "
        f"folder (default: {DEFAULT_DRAFT} for the offline target, {FALLBACK_DRAFT} for any other)",
    )
    gamma_help = f"the most draft tokens per iteration, {GAMMA_MIN}..{GAMMA_MAX} (default: %(default)s)"
    gen.add_argument("--gamma", type=int, default=DEFAULT_GAMMA, help=gamma_help)
    gen.add_argument("--temperature", type=float, default=1.0, help="0 is greedy (default: %(default)s)")
    gen.add_argument("--top-k", type=int, default=None, help="keep only the k likeliest tokens (default: all)")
    gen.add_argument(
        "--top-p", type=float, default=None, help="keep the fewest tokens whose mass reaches p, 0..1 (default: all)"
    )
    gen.add_argument("--seed", type=int, default=0, help="seeds the run's one random generator (default: %(default)s)")
    gen.add_argument("--max-new-tokens", type=int, default=64, help="the most tokens to write (default: %(default)s)")
    gen.add_argument(
        "--tree",
        default="branches",
        choices=TREE_MODES,
        help="a tree-drafting draft's tree: off (chains), branches, dynamic (EAGLE-2's) (default: %(default)s)",
    )
    gen.add_argument(
        "--rule",
        default="exact",
        choices=CLI_RULES,
        help="the acceptance rule: exact (Algorithm 1, token by token) or block (block verification, "
        "Sun et al. 2024: a chain's drafts judged together, never fewer kept in expectation; drafts a chain, no "
        "tree) (default: %(default)s)",
    )
    gen.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    gen.add_argument(
        "--dtype",
        default=None,
        choices=("float32", "bfloat16", "float16"),
        help="default: bfloat16 on cuda, float32 on cpu",
    )
    gen.add_argument(
        "--weights",
        default=None,
        choices=WEIGHT_FORMATS,
        help="the target's weights: shipped (the GGUF's Q4_1/Q8_0 blocks, the default where the native kernel "
        "builds) or float32 (expanded once); output identical either way",
    )
    gen.add_argument("--out", type=Path, default=None, help="write the trace JSON here (default: not written)")
    gen.add_argument(
        "--csv", type=Path, default=None, help="also write one CSV row per draft token here (default: not written)"
    )
    gen.add_argument("--no-color", action="store_true", help="plain text output (default: colours in a terminal)")
    with_defaults(gen)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in DELEGATED:  # the recipes and the bench raise SpecvizError like the rest
            return importlib.import_module(DELEGATED[argv[0]][0]).main(argv[1:])
        if argv and argv[0] == "app":
            import subprocess

            return subprocess.call([sys.executable, "-m", APP_MODULE, *argv[1:]])
        args = build_parser().parse_args(argv)
        if args.command == "generate":
            return _generate(args)
        return _validate(args.path)
    except SpecvizError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _generate(args) -> int:
    from specviz.decoding.decoder import speculative_generate

    trace = speculative_generate(
        args.prompt,
        target=args.target,
        draft=args.draft,
        device=args.device,
        dtype=args.dtype,
        weights=args.weights,
        options=DecodeOptions(
            gamma=args.gamma,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=args.seed,
            max_new_tokens=args.max_new_tokens,
            tree=args.tree,
            rule=args.rule,
        ),
    )
    color = not args.no_color and sys.stdout.isatty()
    print(render_tokens(trace, color=color))
    print()
    print(render_summary(trace))
    if args.out:
        args.out.write_text(trace.to_json(indent=1), encoding="utf-8")
        print(f"trace written to {args.out}")
    if args.csv:
        args.csv.write_text(trace.to_csv(), encoding="utf-8")
        print(f"per-token CSV written to {args.csv}")
    return 0


def _validate(path: Path) -> int:
    from specviz.errors import TraceError
    from specviz.traces.trace import Trace

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"Cannot read {path}: {exc.strerror}.") from None
    trace = Trace.from_json(data)
    s = trace.summary
    print(
        f"{path}: valid {trace.schema} trace ({trace.mode}), {s['iterations']} iterations, {s['new_tokens']} new tokens"
    )
    return 0


def render_tokens(trace, color: bool = True) -> str:
    """The generated text, each token marked by how it was produced, with the app's words: accepted,
    rejected (the first refused draft), discarded (drafts after it, never checked), resampled, bonus."""
    parts = []
    for it in trace.iterations:
        for row in iteration_tokens(it):
            parts.append(_paint(row["token"], row["status"], color))
    if not trace.iterations:
        return trace.output_text
    legend = "legend: " + " ".join(
        _paint(name, status, color)
        for name, status in (
            ("accepted", "accepted"),
            ("rejected", "rejected"),
            ("discarded", "discarded"),
            ("resampled", "resampled"),
            ("bonus", "bonus"),
        )
    )
    return "".join(parts) + "\n\n" + legend


def _paint(text: str, status: str, color: bool) -> str:
    if color:
        return f"{ANSI[status]}{text}{ANSI['reset']}"
    if status in ("rejected", "discarded"):
        return f"[-{text}-]"
    return text


def render_summary(trace) -> str:
    s = trace.summary

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    return (
        f"iterations {s['iterations']}, new tokens {s['new_tokens']}, drafted {s['drafted']}, "
        f"accepted {s['accepted']}\n"
        f"acceptance rate {fmt(s['acceptance_rate'], '.3f')}, mean accepted length "
        f"{fmt(s['mean_accepted_length'], '.2f')} tokens/iteration, alpha {fmt(s['alpha'], '.3f')}\n"
        f"wall {s['wall_ms']:.0f} ms, {s['tokens_per_s']:.1f} tokens/s"
    )
