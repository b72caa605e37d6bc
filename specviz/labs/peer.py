"""llama.cpp as a measured peer: `python -m specviz bench --llama-cpp PATH` (or a `llama-completion` on PATH).

The engine CPU users run is llama.cpp, on the very file specviz ships (the offline target's GGUF). So
this runs llama.cpp's `llama-completion` on that file, with the same chat-templated prompts, new tokens
and threads, greedy, interleaved with specviz in one process (the order rotates every round), and sets
their tokens per second side by side:

    llama.cpp            its plain decode (no speculation): the decode rate it reports (its "eval
                         time": the tokens after the first, which its prompt pass writes)
    specviz default      the default drafter (speculative), for each weight format asked for
    specviz target alone the target alone, the same

specviz's rates are taken the same way: the tokens after the first iteration (which reads the prompt)
over the time they took; the whole call's rate (prompt included) is kept beside it. Each figure is the
median over the prompts and rounds; each ratio is over llama.cpp's in the same round. llama.cpp's own
parsing (`parse_timings`) is tested on its real output (tests/fixtures/llama_completion_stderr.txt).
CI does not build llama.cpp; docs/benchmarks.md says how it was built and names the release.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

BINARY = "llama-completion"
# "common_perf_print: prompt eval time = 215.66 ms / 37 tokens (...)" and
# "common_perf_print:        eval time = 1372.94 ms / 95 runs (...)"
_PROMPT = re.compile(r"prompt eval time\s*=\s*([\d.]+) ms\s*/\s*(\d+) tokens")
_EVAL = re.compile(r"(?<!prompt )eval time\s*=\s*([\d.]+) ms\s*/\s*(\d+) runs")


def find_binary(path: str | None) -> Path:
    """llama-completion: PATH itself, or inside the folder PATH (or its bin/), or on the shell's PATH."""
    from specviz.errors import ConfigError

    candidates = []
    if path:
        given = Path(path).expanduser()
        folders = (given, given / "bin", given / "build" / "bin")
        candidates = [given] if given.is_file() else [folder / BINARY for folder in folders]
    elif found := shutil.which(BINARY):
        candidates = [Path(found)]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    where = f"at {path}" if path else "on PATH"
    raise ConfigError(
        f"No {BINARY} found {where}. Build llama.cpp's CPU tools (docs/benchmarks.md, 'llama.cpp as a peer') "
        f"and pass --llama-cpp with the binary or its build folder."
    )


def parse_timings(stderr: str) -> dict:
    """llama-completion's timing lines -> {"prompt_tokens", "prompt_ms", "decode_runs", "decode_ms"}."""
    from specviz.errors import SpecvizError

    prompt, decode = _PROMPT.search(stderr), _EVAL.search(stderr)
    if prompt is None or decode is None:
        raise SpecvizError("llama-completion printed no timings (its 'prompt eval time' and 'eval time' lines)")
    return {
        "prompt_tokens": int(prompt.group(2)),
        "prompt_ms": float(prompt.group(1)),
        "decode_runs": int(decode.group(2)),
        "decode_ms": float(decode.group(1)),
    }


def version(binary: Path) -> str:
    """What the binary says of itself (`--version`: its version, build and compiler)."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        from specviz.errors import SpecvizError

        raise SpecvizError(f"{binary} does not run here ({type(exc).__name__}: {exc})") from exc
    return " ".join(line.strip() for line in (out.stdout + out.stderr).splitlines() if line.strip())


def run_llama_cpp(binary: Path, gguf: Path, prompt_text: str, new_tokens: int, threads: int) -> dict:
    """One greedy decode of llama.cpp; its rates (tokens per second) as parse_timings reads them."""
    command = [
        str(binary), "-m", str(gguf), "-p", prompt_text, "-n", str(new_tokens), "-t", str(threads),
        "--temp", "0", "-no-cnv", "--seed", "0",
    ]  # fmt: skip
    from specviz.errors import SpecvizError

    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:  # not runnable here, or hung: said, never a traceback
        raise SpecvizError(f"llama-completion could not run ({type(exc).__name__}: {exc})") from exc
    if out.returncode != 0:
        raise SpecvizError(f"llama-completion failed (exit {out.returncode}): {out.stderr.strip()[-300:]}")
    t = parse_timings(out.stderr)
    tokens = t["decode_runs"] + 1  # the prompt pass writes the first
    return {
        **t,
        "decode_tokens_per_s": t["decode_runs"] / t["decode_ms"] * 1e3,
        "tokens_per_s": tokens / (t["prompt_ms"] + t["decode_ms"]) * 1e3,
    }


def run_specviz(target, draft, ids: list[int], new_tokens: int, temperature: float, seed: int) -> dict:
    """One decode of specviz (draft None: the target alone); its rates taken as llama.cpp's are."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate

    first: list[tuple[float, int]] = []

    def after(progress) -> None:
        if not first:
            first.append((time.perf_counter(), progress.new_tokens))

    options = DecodeOptions(temperature=temperature, seed=seed, max_new_tokens=new_tokens)
    start = time.perf_counter()
    if draft is None:
        trace = autoregressive_generate(ids, target=target, options=options, trace=False, on_iteration=after)
    else:
        trace = speculative_generate(ids, target=target, draft=draft, options=options, trace=False, on_iteration=after)
    end = time.perf_counter()
    tokens = trace.summary["new_tokens"]
    (t1, n1) = first[0]
    return {
        "tokens": tokens,
        "output": trace.output_token_ids,
        "decode_tokens_per_s": (tokens - n1) / (end - t1) if end > t1 and tokens > n1 else 0.0,
        "tokens_per_s": tokens / (end - start),
    }


def compare(targets: dict, draft: str, prompts: list[str], new_tokens: int, rounds: int, threads: int, binary, log):
    """Interleaved rounds over the prompts: llama.cpp, then for each weight format (targets: {format:
    LoadedModel}) the default and the target alone at T=0, and both at T=1; the order rotates every round.
    Returns the report: per method, every sample and the medians, and each ratio over llama.cpp's."""
    from specviz.decoding.prompting import prompt_text, prompt_token_ids
    from specviz.engine.models import gguf_location

    any_target = next(iter(targets.values()))
    tokenizer = any_target.tokenizer
    texts = [prompt_text(tokenizer, p) for p in prompts]
    ids = [prompt_token_ids(tokenizer, p) for p in prompts]
    methods = ["llama.cpp"] + [f"{w} {m} T={t}" for w in targets for t in (0, 1) for m in ("default", "alone")]
    samples: dict[str, list[dict]] = {m: [] for m in methods}
    for r in range(rounds):
        for i in range(len(prompts)):
            order = methods[r % len(methods) :] + methods[: r % len(methods)]
            for method in order:
                if method == "llama.cpp":
                    got = run_llama_cpp(binary, gguf_location(), texts[i], new_tokens, threads)
                else:
                    weights, kind, temp = method.split(" ")
                    drafter = draft if kind == "default" else None
                    got = run_specviz(targets[weights], drafter, ids[i], new_tokens, float(temp[2:]), seed=r)
                    got.pop("output")
                samples[method].append({"round": r, "prompt": i, **got})
            log(f"round {r + 1}/{rounds}, prompt {i + 1}/{len(prompts)}")
    return _report(samples, version(binary))


def _report(samples: dict[str, list[dict]], llama_version: str) -> dict:
    def rates(method: str) -> dict:
        return {(s["round"], s["prompt"]): s["decode_tokens_per_s"] for s in samples[method]}

    reference = rates("llama.cpp")
    rows = {}
    for method, runs in samples.items():
        ratios = [s["decode_tokens_per_s"] / reference[(s["round"], s["prompt"])] for s in runs]
        rows[method] = {
            "decode_tokens_per_s": statistics.median(s["decode_tokens_per_s"] for s in runs),
            "tokens_per_s": statistics.median(s["tokens_per_s"] for s in runs),
            "x_llama_cpp": statistics.median(ratios),
            "x_llama_cpp_range": [min(ratios), max(ratios)],
        }
        if " default " in method:  # the speedup over its own target alone, round by round
            alone = rates(method.replace(" default ", " alone "))
            over = [s["decode_tokens_per_s"] / alone[(s["round"], s["prompt"])] for s in runs]
            rows[method]["x_target_alone"] = statistics.median(over)
    return {"llama_cpp_version": llama_version, "methods": rows, "samples": samples}


def table(report: dict) -> str:
    """The report as markdown: one row per method."""
    lines = [
        "| method | decode tok/s | whole call tok/s | × llama.cpp (median, range) | × its target alone |",
        "| --- | --- | --- | --- | --- |",
    ]
    for method, row in report["methods"].items():
        lo, hi = row["x_llama_cpp_range"]
        over = f"{row['x_target_alone']:.2f}" if "x_target_alone" in row else ""
        lines.append(
            f"| {method} | {row['decode_tokens_per_s']:.1f} | {row['tokens_per_s']:.1f} | "
            f"{row['x_llama_cpp']:.2f} ({lo:.2f}–{hi:.2f}) | {over} |"
        )
    return "\n".join(lines)
