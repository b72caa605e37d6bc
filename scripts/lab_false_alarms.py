"""Measure the distribution lab's false-alarm rate: how often its test rejects a correct sampler.

The lab's control is the target alone, tested against the target's own exact distribution: a
correct sampler, so a calibrated test at level a rejects it in a fraction a of runs, and no more.
This script runs what the page runs by default (the toy pair, the page's k, n, γ and temperature,
specviz.teaching.charts.lab.DEFAULTS) for many seeds and counts the rejections at several levels.

Seeds: run j uses the page's seed j * 2 n, so no two runs share a sample (run_lab draws sample i
of seed s with seeds s + 2 i and s + 2 i + 1); run 0 is the page's default seed 0.

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python scripts/lab_false_alarms.py --seeds 200
    ... --rule exact        # also the speculative samples under a correct rule (about twice as long)
    ... --simulate 100000   # also the test alone on multinomial draws from the exact p (a minute)
    ... --reuse-counts runs.json --replay 5000   # the decoder's counts of an earlier --counts run,
                            # and 5000 runs replayed without the decoder (checked against those)

The decoder runs took 3 to 10 s per seed of n = 500 on one core of a busy 2-core AMD EPYC; --simulate
checks the test's calibration far more precisely than 200 seeds can, without the decoder.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from specviz.config import SamplingConfig
from specviz.engine import toy
from specviz.engine.machine import cpu_name
from specviz.engine.models import LoadedModel
from specviz.engine.sampling import draw, probabilities
from specviz.labs.lab import draw_sample, exact_distribution
from specviz.labs.lab_stats import goodness_of_fit
from specviz.teaching.charts.lab import DEFAULTS, SIGNIFICANCE

LEVELS = sorted({0.05, 0.01, 0.001, SIGNIFICANCE}, reverse=True)


def rates(p_values: list[float]) -> dict[str, dict]:
    """Rejections at each level, with a 95% Clopper-Pearson interval for the rate."""
    out = {}
    for level in LEVELS:
        hits = sum(p < level for p in p_values)
        ci = stats.binomtest(hits, len(p_values), level).proportion_ci(0.95)
        out[f"{level:g}"] = {"rejected": hits, "runs": len(p_values), "rate": hits / len(p_values),
                             "ci95": [round(ci.low, 5), round(ci.high, 5)]}  # fmt: skip
    return out


class Replay:
    """The control's samples without the decoder: the target's next-token probabilities of every
    prefix (specviz.engine.sampling.probabilities, computed once), and the decoder's own generator and
    draw(), seeded as run_lab seeds the target alone. main() checks it against the decoder's
    samples, seed by seed, before trusting it for more seeds than the decoder has time for."""

    def __init__(self, target, prompt: list[int], k: int, sampling: SamplingConfig) -> None:
        self.target, self.prompt, self.k, self.sampling = target, prompt, k, sampling
        self.probs: dict[tuple[int, ...], torch.Tensor] = {}

    def next_probs(self, prefix: tuple[int, ...]) -> torch.Tensor:
        if prefix not in self.probs:
            with torch.inference_mode():
                ids = torch.tensor([self.prompt + list(prefix)])
                logits = self.target.model(ids).logits[0, -1, : self.target.vocab_size]
            self.probs[prefix] = probabilities(logits, self.sampling)
        return self.probs[prefix]

    def sample(self, seed: int, i: int) -> tuple[int, ...]:
        generator = torch.Generator().manual_seed(seed + 2 * i + 1)  # run_lab's seed of the target alone
        out: tuple[int, ...] = ()
        for _ in range(self.k):
            x = draw(self.next_probs(out), generator)
            out += (x,)
            if x == self.target.eos_token_id:
                break
        return out


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)  # as the page runs the toy pair (specviz.engine.toy.one_thread)
    page = PageRun.default(args.n)
    n, cells = page.n, page.cells
    report: dict = {
        "cpu": cpu_name(), "torch_threads": torch.get_num_threads(), "k": page.k, "gamma": page.gamma, "n": n,
        "temperature": page.sampling.temperature, "significance": SIGNIFICANCE, "seeds": args.seeds,
        "expected_counts_below_5": sum(n * p < 5 for p in cells), "cells": len(cells),
    }  # fmt: skip
    kinds = ["target"] + (["spec"] if args.rule else [])
    counts: dict[str, list[list[int]]] = {kind: [] for kind in kinds}
    if args.reuse_counts:
        counts = {kind: json.loads(args.reuse_counts.read_text())[kind][: args.seeds] for kind in kinds}
        report["decoder_counts_from"] = str(args.reuse_counts)
    started = time.monotonic()
    decoder_counts(page, counts, args.seeds, args.rule)
    report["decoder_seconds"] = round(time.monotonic() - started, 1)
    names = {"target": "control", "spec": f"speculative_{args.rule}"}
    for kind in kinds:
        # The same samples under both tests: the chi-square approximation's p-value (what the page
        # used before) and the lab's test as it is now (simulated, specviz.labs.lab_stats.SIMULATIONS).
        approx = [goodness_of_fit(row, cells, simulations=0).p_value for row in counts[kind]]
        lab = [goodness_of_fit(row, cells).p_value for row in counts[kind]]
        report[names[kind]] = {"chi2_approximation": rates(approx), "lab_test": rates(lab),
                               "seed0_p_value": {"chi2_approximation": approx[0], "lab_test": lab[0]}}  # fmt: skip
    if args.replay:
        report["replayed_control"] = replayed_control(page, args.replay, counts["target"])
    if args.simulate:
        report["simulated_control"] = simulated_control(page, args.simulate)
    if args.counts:
        args.counts.write_text(json.dumps({"cells": cells, **counts}) + "\n")
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200, help="runs of the page (default 200)")
    parser.add_argument("--n", type=int, default=DEFAULTS["toy"]["n"], help="samples per run (the page's default)")
    parser.add_argument("--rule", choices=["exact", "no_bonus"], help="also test speculative samples under this rule")
    parser.add_argument("--simulate", type=int, default=0, help="also this many multinomial runs of the test alone")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--counts", type=Path, help="write every run's counts per cell here")
    parser.add_argument("--reuse-counts", type=Path, help="take the decoder's counts from an earlier --counts file")
    parser.add_argument("--replay", type=int, default=0, help="also this many runs replayed without the decoder")
    return parser.parse_args()


@dataclass(frozen=True)
class PageRun:
    """What the page runs by default: the toy pair and prompt, its k, γ and temperature, n samples
    per run, and the exact distribution's cells (its outcomes' probabilities, then "other")."""

    target: LoadedModel
    draft: LoadedModel
    prompt: list[int]
    k: int
    gamma: int
    n: int
    sampling: SamplingConfig
    cells: list[float]
    index: dict[tuple[int, ...], int]  # outcome -> its cell

    @classmethod
    def default(cls, n: int) -> PageRun:
        d = DEFAULTS["toy"]
        sampling = SamplingConfig(d["temperature"], None, None)
        target, draft = toy.toy_pair(**toy.LAB_TOY)
        prompt = list(toy.LAB_TOY_PROMPT)
        exact = exact_distribution(target, prompt, d["k"], sampling)
        cells = exact.probs + [exact.other_prob]
        return cls(target, draft, prompt, d["k"], d["gamma"], n, sampling, cells, exact.index())

    def cell(self, outcome) -> int:
        """The cell of a sample's first k tokens ("other", the last, when not listed)."""
        return self.index.get(tuple(outcome[: self.k]), len(self.cells) - 1)


def decoder_counts(page: PageRun, counts: dict[str, list[list[int]]], seeds: int, rule: str | None) -> None:
    """Run j = len(counts["target"]) .. seeds - 1 of the page, seed j * 2 n, with the decoder: each
    kind's counts per cell appended to counts[kind]."""
    started = time.monotonic()
    for j in range(len(counts["target"]), seeds):
        seed = j * 2 * page.n
        for kind in counts:
            row = [0] * len(page.cells)
            for i in range(page.n):
                out = draw_sample(kind, i, page.prompt, target=page.target, draft=page.draft, rule=rule or "exact",
                                  k=page.k, gamma=page.gamma, sampling=page.sampling, seed=seed)  # fmt: skip
                row[page.cell(out)] += 1
            counts[kind].append(row)
        if (j + 1) % 10 == 0:
            print(f"{j + 1}/{seeds} seeds, {time.monotonic() - started:.0f} s", flush=True)


def replayed_control(page: PageRun, runs: int, decoded: list[list[int]]) -> dict:
    """`runs` runs of the control replayed without the decoder, checked run for run against the
    decoder's counts `decoded`; their rejection rates only when every checked run is equal."""
    replay, replayed = Replay(page.target, page.prompt, page.k, page.sampling), []
    for j in range(runs):
        row = [0] * len(page.cells)
        for i in range(page.n):
            row[page.cell(replay.sample(j * 2 * page.n, i))] += 1
        replayed.append(row)
    same = sum(a == b for a, b in zip(replayed, decoded, strict=False))
    checked = min(runs, len(decoded))
    result = {
        "runs": runs,
        "equal_to_the_decoder": f"{same} of {checked} runs",
        "lab_test": rates([goodness_of_fit(row, page.cells).p_value for row in replayed]),
    }
    if same != checked:
        print(f"The replay differs from the decoder in {checked - same} of {checked} runs: not used.")
        result["lab_test"] = None
    return result


def simulated_control(page: PageRun, runs: int) -> dict:
    """The test alone on `runs` multinomial samples of n drawn from the exact cells."""
    rng = np.random.default_rng(1)  # not specviz.labs.lab_stats.SIMULATION_SEED: these stand for fresh samples
    probs = np.asarray(page.cells) / sum(page.cells)
    draws = [rng.multinomial(page.n, probs).tolist() for _ in range(runs)]
    return {
        "runs": runs,
        "chi2_approximation": rates([goodness_of_fit(row, page.cells, simulations=0).p_value for row in draws]),
        "lab_test": rates([goodness_of_fit(row, page.cells).p_value for row in draws]),
    }


if __name__ == "__main__":
    main()
