"""`python -m specviz check`: the algorithm's central claim proven on this machine, with the pair the app loads.

specviz promises two things: it is faster, and the output is unchanged. The suite proves the second on
the project's machines; a user runs it on another CPU, another torch, a GPU. This runs the same proofs
where the user is, on the pair the app would load, and says what it found:

    kernels     which kernels and forward the load chose, and why (what the rest ran on; never fails)
    greedy      greedy speculative output equals transformers' own generate() on built-in prompts; a
                difference passes only at a near-tie (the target's float32 top-2 logit gap at that token
                within the dtype's tolerance, specviz.traces.sameness), and is named with its gap
    chi2        per drafter and rule: the first sampled tokens against the target's exact p, the lab's
                calibrated test (specviz.labs.lab): p above the lab's SIGNIFICANCE shared by the check's
                tests (each at SIGNIFICANCE / their number) and no sample of probability 0
    invariants  every trace the check made passes the trace's validation (specviz.traces.validation)
    speed       c, v(rows) and one speedup with its spread, timed in interleaved pairs (never fails:
                a speed is a measurement, not a verdict)

The report prints, is written as JSON (the machine, its CPU flags, torch, device, dtype, the kernels,
every verdict with its statistic) to --out and as this machine's last report (<cache>/check.json, which
the Lab page shows), and the exit status is 1 when a check failed, naming it. --rule runs the drafts
under one of the lab's rules: the wrong ones must fail it. --quick: the default drafter, the exact
rule, two prompts, within a minute on two cores; the full check: every offered drafter and both exact
rules, within ten.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CHECK_SCHEMA = "specviz.check/1"
GREEDY_PROMPTS = (  # the checks' own prompts: none is in any draft's training prompts
    "List three fruits and one fact about each.",
    "Write a Python function that reverses a string.",
    "Once upon a time, a robot",
)
# The chi-square's setting: a short user turn, its first CHI2_TOKENS tokens sampled at T=1 with top-k
# CHI2_TOP_K, so the target's exact distribution has few enough outcomes (27) for CHI2_SAMPLES samples to
# test cell by cell. At T=1 without top-k this model's first tokens spread so wide that the test merged
# them into 2 cells and the wrong rules passed; here, on the offline pair, resample_from_p fell near
# p = 1e-18 and accept_if_equal near 1e-5 while the exact rule stayed above the level
# (docs/benchmarks.md, "specviz check").
CHI2_PROMPT = "Write a short poem about the sea."
CHI2_TOKENS, CHI2_TOP_K, CHI2_SAMPLES = 3, 3, 400
CPU_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_fp16", "avx512_bf16", "amx_tile", "asimd")


@dataclass
class Plan:
    """What a check runs: quick or full."""

    prompts: int  # greedy prompts
    greedy_tokens: int
    drafters: tuple[str, ...]
    rules: tuple[str, ...]
    samples: int  # per drafter and rule (the lab's n)
    pair_tokens: int  # the timed pairs' tokens
    pairs: int


@dataclass
class Verdict:
    check: str
    passed: bool
    said: str  # one line: what was found
    detail: dict[str, Any] = field(default_factory=dict)  # the statistics behind it


def plan_for(quick: bool, rule: str | None, default_draft: str) -> Plan:
    """The quick check (the default drafter, two prompts) or the full one (every offered drafter)."""
    from specviz.config import DRAFTERS, PAPER_DRAFT

    rules = (rule,) if rule else ("exact",) if quick else ("exact", "block")
    if quick:
        return Plan(2, 16, (default_draft,), rules, CHI2_SAMPLES, 16, 3)
    # Every offered drafter and the paper's preset; not "self", whose q is p: every draft passes, so its
    # test could not fail.
    offered = tuple(k.name for k in DRAFTERS.values() if k.offered and k.name != "self") + (PAPER_DRAFT,)
    return Plan(3, 24, offered, rules, CHI2_SAMPLES, 48, 5)


def machine() -> dict[str, Any]:
    """The machine the verdicts hold for: CPU, the flags its kernels care about, cores, torch, Python."""
    import torch

    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu": model, "cpu_flags": [f for f in CPU_FLAGS if f in flags], "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
        "platform": platform.platform(), "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }  # fmt: skip


def kernels_verdict(target, draft) -> Verdict:
    """What the load chose, and why: the target's kernels, forward and weights, the head's step."""
    from specviz.engine.kernels import describe

    head = getattr(getattr(draft, "head_drafter", draft), "head", None)
    detail = {
        "target": target.name, "device": target.device, "dtype": target.dtype, "weights": target.weights,
        "weights_note": target.weights_note, "forward": target.forward, "kernels": target.kernels,
        "kernels_said": describe(target.kernels), "draft": getattr(draft, "name", str(draft)),
        "draft_kernels": getattr(head, "kernels", None),
        "draft_step": None if head is None else _head_step(head),
    }  # fmt: skip
    said = f"{target.weights} weights, {target.forward} forward, kernels: {describe(target.kernels)}"
    return Verdict("kernels", True, said, detail)


def _head_step(head) -> str:
    """How the draft head's steps run: natively, static (CUDA graphs) or eager."""
    return "native" if head.native is not None else "static" if head.static is not None else "eager"


def greedy_verdict(target, draft: str, plan: Plan, rule: str, traces: list) -> Verdict:
    """Greedy speculative output against transformers' own generate() on the same loaded model."""
    import torch

    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import speculative_generate
    from specviz.decoding.prompting import prompt_token_ids

    found = []
    for prompt in GREEDY_PROMPTS[: plan.prompts]:
        ids = prompt_token_ids(target.tokenizer, prompt)
        with torch.inference_mode():
            out = target.model.generate(
                torch.tensor([ids], device=target.device), max_new_tokens=plan.greedy_tokens, do_sample=False,
                pad_token_id=target.eos_token_id, eos_token_id=target.eos_token_id,  # stops where the decoder does
            )  # fmt: skip
        reference = out[0, len(ids) :].tolist()
        options = DecodeOptions(temperature=0, max_new_tokens=plan.greedy_tokens, rule=rule)
        trace = speculative_generate(ids, target=target, draft=draft, options=options)
        traces.append(trace)
        found.append({"prompt": prompt, **_compared(target, ids, trace.output_token_ids, reference)})
    failed = [f for f in found if f["verdict"] == "mismatch"]
    ties = [f for f in found if f["verdict"] == "near_tie"]
    said = f"{len(found) - len(failed) - len(ties)} of {len(found)} prompts identical to transformers' generate()"
    said += "".join(f"; near-tie at token {t['at']} (logit gap {t['gap']:.2e})" for t in ties)
    said += "".join(f"; MISMATCH at token {m['at']} (logit gap {m['gap']:.3f}): {m['prompt']!r}" for m in failed)
    return Verdict("greedy", not failed, said, {"tokens": plan.greedy_tokens, "rule": rule, "prompts": found})


def _compared(target, ids: list[int], got: list[int], reference: list[int]) -> dict[str, Any]:
    """identical, or where they part and the target's float32 top-2 logit gap there (a near-tie when
    within the dtype's tolerance: rounding may flip it; a mismatch otherwise)."""
    import torch

    from specviz.traces.sameness import near_tie_tolerance

    at = next((i for i, (a, b) in enumerate(zip(got, reference, strict=False)) if a != b), None)
    if at is None and len(got) == len(reference):
        return {"verdict": "identical"}
    at = min(len(got), len(reference)) if at is None else at
    with torch.inference_mode():
        prefix = torch.tensor([ids + reference[:at]], device=target.device)
        top = target.model(prefix).logits[0, -1].float().topk(2).values
    gap = float(top[0] - top[1])
    verdict = "near_tie" if gap <= near_tie_tolerance(target.dtype) else "mismatch"
    return {
        "verdict": verdict,
        "at": at + 1,
        "gap": gap,
        "speculative": got[at : at + 1],
        "transformers": reference[at : at + 1],
    }


def chi2_verdicts(target, plan: Plan, traces: list, log) -> list[Verdict]:
    """Per drafter and rule: the lab's test of the first CHI2_TOKENS sampled tokens against the exact p,
    and one sampled trace for the invariants."""
    from specviz.config import DecodeOptions, SamplingConfig
    from specviz.decoding.decoder import speculative_generate
    from specviz.labs.lab import exact_distribution, run_lab
    from specviz.labs.lab_stats import SIGNIFICANCE

    ids = _chi2_ids(target.tokenizer)
    sampling = SamplingConfig(1.0, top_k=CHI2_TOP_K)
    exact = exact_distribution(target, ids, k=CHI2_TOKENS, sampling=sampling, min_prob=1e-3)
    # The lab's level for the whole check (Bonferroni): with 14 tests at 0.001 each, a correct machine
    # would fail one about once in 70 full checks; the wrong rules still land far below the shared level.
    level = SIGNIFICANCE / (len(plan.drafters) * len(plan.rules))
    verdicts = []
    for drafter in plan.drafters:
        for rule in plan.rules:
            log(f"chi2: {drafter}, rule {rule}, {plan.samples} samples")
            result = run_lab(
                ids, target=target, draft=drafter, rule=rule, k=CHI2_TOKENS, n=plan.samples, gamma=2, exact=exact,
                with_target=False, top_k=CHI2_TOP_K,
            )  # fmt: skip
            test = result.spec_test
            passed = result.impossible_spec == 0 and test.p_value is not None and test.p_value > level
            p_said = "n/a" if test.p_value is None else f"{test.p_value:.3g}"
            said = f"{drafter}, rule {rule}: p = {p_said} over {test.n} samples, {test.cells} cells"
            if result.impossible_spec:
                said += f", {result.impossible_spec} samples the target gives probability 0"
            detail = {"drafter": drafter, "rule": rule, "level": level, **asdict(test),
                      "impossible": result.impossible_spec}  # fmt: skip
            verdicts.append(Verdict("chi2", passed, said, detail))
            options = DecodeOptions(temperature=1.0, top_k=CHI2_TOP_K, max_new_tokens=16, rule=rule, seed=1)
            traces.append(speculative_generate(ids, target=target, draft=drafter, options=options))
    return verdicts


def _chi2_ids(tokenizer) -> list[int]:
    """The chi-square's prompt: the user's turn without a default system turn (fewer tokens per sample)."""
    template = getattr(tokenizer, "chat_template", None)
    if template and "<|im_start|>" in template:
        return tokenizer(f"<|im_start|>user\n{CHI2_PROMPT}<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    from specviz.decoding.prompting import prompt_token_ids

    return prompt_token_ids(tokenizer, CHI2_PROMPT)


def invariants_verdict(traces: list) -> Verdict:
    """Every trace the check made, validated: its schema and every invariant of the trace."""
    from specviz.errors import TraceError
    from specviz.traces.trace import validate

    problems = []
    for k, trace in enumerate(traces):
        try:
            validate(trace.to_dict())
        except TraceError as exc:
            problems.append(f"trace {k + 1} ({trace.config.get('draft')}): {exc}")
    said = f"{len(traces)} traces, {len(problems)} problems" + "".join(f"; {p}" for p in problems[:3])
    return Verdict("invariants", not problems, said, {"traces": len(traces), "problems": problems})


def speed_verdict(target, draft: str, plan: Plan) -> Verdict:
    """c, v(rows) and one speedup with its spread, in interleaved pairs (a measurement: never fails)."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.decoding.prompting import prompt_token_ids
    from specviz.engine.verify_cost import pass_costs
    from specviz.labs.bench import HELD_OUT_PROMPTS
    from specviz.traces.speedup import costs_of_pairs, spread_of_pairs, time_pair

    v, one_row_s = pass_costs(target)
    ids = prompt_token_ids(target.tokenizer, HELD_OUT_PROMPTS[0])
    options = DecodeOptions(temperature=0, max_new_tokens=plan.pair_tokens)

    def spec():
        return speculative_generate(ids, target=target, draft=draft, options=options, trace=False)

    def alone():
        return autoregressive_generate(ids, target=target, options=options, trace=False)

    spec(), alone()  # a warm-up: first calls pay for allocations
    pairs = [time_pair(spec, alone, i, traced=False) for i in range(plan.pairs)]
    spread, costs = spread_of_pairs(pairs), costs_of_pairs(pairs)
    said = "no speedup measured" if spread is None else spread.text()
    if costs is not None and costs.c is not None:
        said += f"; c {costs.c:.2f}"
    said += f"; v at 2..5 rows {' '.join(f'{x:.2f}' for x in v[2:6])} (one-row step {one_row_s * 1e3:.1f} ms)"
    detail = {"spread": None if spread is None else asdict(spread), "costs": None if costs is None else asdict(costs),
              "v": v, "one_row_ms": one_row_s * 1e3, "tokens": plan.pair_tokens}  # fmt: skip
    return Verdict("speed", True, said, detail)


def run_check(quick: bool, rule: str | None, device: str | None, dtype: str | None, log=print) -> dict[str, Any]:
    """Every check on the pair the app would load -> the report (what check_report prints and the JSON holds)."""
    from specviz.drafters import resolve_drafter
    from specviz.engine.models import default_draft, load_model

    started = time.perf_counter()
    target = load_model(None, device=device, dtype=dtype)
    draft_name = default_draft(target.name)
    plan = plan_for(quick, rule, draft_name)
    verdicts, traces = [kernels_verdict(target, resolve_drafter(draft_name, target))], []
    log("greedy: speculative against transformers' generate()")
    verdicts.append(greedy_verdict(target, draft_name, plan, plan.rules[0], traces))
    verdicts += chi2_verdicts(target, plan, traces, log)
    verdicts.append(invariants_verdict(traces))
    log("speed: timed pairs")
    verdicts.append(speed_verdict(target, draft_name, plan))
    failed = [v.check for v in verdicts if not v.passed]
    return {
        "schema": CHECK_SCHEMA, "quick": quick, "rule": rule or "exact", "made_at": _now(),
        "machine": machine(), "pair": {"target": target.name, "draft": draft_name}, "plan": asdict(plan),
        "verdicts": [asdict(v) for v in verdicts], "passed": not failed, "caught_by": sorted(set(failed)),
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def check_report(report: dict[str, Any]) -> str:
    """The report in a few lines: the machine, one line per verdict, the outcome and which check caught it."""
    m = report["machine"]
    kind = "quick" if report["quick"] else "full"
    lines = [f"specviz check ({kind}, rule {report['rule']}) on {m['cpu']}, {m['cores']} cores, torch {m['torch']}"]
    for v in report["verdicts"]:
        mark = "info" if v["check"] in ("kernels", "speed") else "pass" if v["passed"] else "FAIL"
        lines.append(f"  {v['check']:<10}  {mark}  {v['said']}")
    if report["passed"]:
        lines.append(f"verdict: every check passed ({report['seconds']:.0f} s)")
    else:
        lines.append(f"verdict: FAILED, caught by {', '.join(report['caught_by'])} ({report['seconds']:.0f} s)")
    return "\n".join(lines)


def last_report_path() -> Path:
    """This machine's last report, which the Lab page shows."""
    from specviz.engine.models import cache_dir

    return cache_dir() / "check.json"


def last_report() -> dict[str, Any] | None:
    """This machine's last report, or None when none was made (or it cannot be read)."""
    try:
        report = json.loads(last_report_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("schema") == CHECK_SCHEMA else None


def save_report(report: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(report, indent=1) + "\n"
    for path in [last_report_path()] + ([out] if out else []):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"note: could not write {path}: {exc}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    from specviz.decoding.verify import RULES
    from specviz.labs.command_help import with_defaults

    parser = argparse.ArgumentParser(prog="python -m specviz check", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="the default drafter and the exact rule, two prompts: about a minute"
    )
    parser.add_argument(
        "--rule",
        default=None,
        choices=RULES,
        help="run the drafts under this rule of the lab (the wrong ones must fail the check; default: the exact rules)",
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument(
        "--dtype",
        default=None,
        choices=("float32", "bfloat16", "float16"),
        help="default: bfloat16 on cuda, float32 on cpu",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write the JSON report here (it is always kept as this machine's last report)",
    )
    return with_defaults(parser)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    report = run_check(args.quick, args.rule, args.device, args.dtype, log)
    save_report(report, args.out)
    print(check_report(report))
    return 0 if report["passed"] else 1
