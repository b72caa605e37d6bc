"""The distribution lab's test (specviz.labs.lab): observed counts against the target's exact
probabilities by a chi-square (or G) test, small cells merged (`goodness_of_fit`, a FitResult), its
p-value simulated from the exact distribution itself (SIMULATIONS says why). The control, the target
alone, is tested the same way; what the page says of it is specviz.teaching.charts.lab.control_verdict.

No torch: numbers in, numbers out (numpy, and scipy for the statistic).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_EXPECTED = 5.0  # Cochran's rule: every cell of a chi-square test should expect >= 5 counts
# Even with every cell at 5 or more, the chi-square curve's tail is a little too thin for a test of
# a few hundred samples over ten cells: on the lab's default toy test (n 500) it rejected correct
# samples more often than its level said (scripts/lab_false_alarms.py; the rates: docs/benchmarks.md,
# "Figures once kept in code comments", "The lab"). So the p-value is simulated instead: the share of SIMULATIONS
# samples of n drawn from p itself whose statistic reaches the observed one, which rejects a correct
# sampler at level a at most a fraction a of the time, by construction. Its resolution is
# 1 / (SIMULATIONS + 1), about 5e-6; a statistic beyond every simulated one gets the chi-square
# approximation's p-value, far below any level the page uses, so a wrong rule still shows how far.
SIMULATIONS = 200_000
SIMULATION_SEED = 20_230_211  # fixed: the same counts always get the same p-value
SIMULATION_CHUNK = 50_000  # simulated samples per numpy call (bounds memory: 50 000 x cells counts)


# The lab's significance level: below this p-value the lab (its page, `specviz check`) says the test
# rejects. At 0.01 one run in 100 of the correct rule or the control was called "not the target's
# distribution" (the page's very first run, seed 0, was one of them: p-value 0.0084). At 0.001 a correct
# sampler is rejected about 1 run in 1000 (docs/reliability.md, measured), while the wrong rules at the
# default n = 500 land near p-value 1e-17: fourteen orders of magnitude below the level, caught all the same.
SIGNIFICANCE = 0.001


@dataclass
class FitResult:
    """A goodness-of-fit test of observed counts against n times the exact probabilities."""

    method: str  # "chi2" (Pearson) or "g" (log-likelihood ratio)
    statistic: float | None  # None when there is nothing to test, or an impossible sample decided it
    dof: int  # cells after merging, minus one
    p_value: float | None  # None when fewer than two cells remain (nothing to test) or n = 0
    cells: int  # cells after merging
    n: int  # samples tested
    impossible: int = 0  # samples in cells of probability 0: any one of them refutes the hypothesis
    simulated: int = 0  # null samples behind the p-value (SIMULATIONS); 0: the chi-square approximation's


def goodness_of_fit(
    counts: Sequence[int], probs: Sequence[float], method: str = "chi2", simulations: int = SIMULATIONS
) -> FitResult:
    """Test observed counts against probabilities (renormalised in float64), merging small cells.

    Why merging: the chi-square approximation needs every expected count to be at least about 5.
    Cells are taken from the most to the least expected; those below MIN_EXPECTED are pooled into
    one cell, and if that pool still expects too little it is folded into the smallest kept cell.
    The p-value is simulated from `simulations` multinomial samples of the merged cells (see
    SIMULATIONS for why); simulations=0 gives the chi-square approximation's.
    A sample in a cell of probability 0 is impossible under the hypothesis, so it decides the test
    on its own: p-value 0, statistic None (it would be infinite; None keeps the result strict JSON),
    and `impossible` counts those samples. Merging them into other cells would only dilute them.
    """
    from scipy import stats

    if method not in ("chi2", "g"):
        raise ValueError(f"method must be 'chi2' or 'g'; got {method!r}.")
    if isinstance(simulations, bool) or not isinstance(simulations, int) or simulations < 0:
        raise ValueError(f"simulations must be a whole number >= 0; got {simulations!r}.")
    n = int(sum(counts))
    total = math.fsum(probs)
    if n == 0 or total <= 0:
        return FitResult(method, None, 0, None, 0, n)
    impossible = sum(c for c, p in zip(counts, probs, strict=True) if p <= 0 and c > 0)
    if impossible:
        return FitResult(method, None, max(0, len(counts) - 1), 0.0, len(counts), n, impossible)
    expected = [n * p / total for p in probs]
    order = sorted(range(len(expected)), key=lambda i: -expected[i])
    kept_obs, kept_exp = [], []
    pool_obs, pool_exp = 0, 0.0
    for i in order:
        if expected[i] >= MIN_EXPECTED:
            kept_obs.append(counts[i])
            kept_exp.append(expected[i])
        else:
            pool_obs += counts[i]
            pool_exp += expected[i]
    if pool_exp >= MIN_EXPECTED or (pool_exp > 0 and not kept_exp):
        kept_obs.append(pool_obs)
        kept_exp.append(pool_exp)
    elif kept_exp:  # fold a too-small pool into the smallest kept cell
        kept_obs[-1] += pool_obs
        kept_exp[-1] += pool_exp
    cells = len(kept_exp)
    if cells < 2:
        return FitResult(method, None, 0, None, cells, n)
    lambda_ = "pearson" if method == "chi2" else "log-likelihood"
    result = stats.power_divergence(kept_obs, kept_exp, lambda_=lambda_)
    statistic, p_value = float(result.statistic), float(result.pvalue)
    if simulations:
        null = _null_statistics(tuple(kept_exp), n, lambda_, simulations)
        # Ties count as reaching the statistic: a hair of tolerance for float sums in another order.
        reached = len(null) - int(np.searchsorted(null, statistic * (1 - 1e-12) - 1e-12, side="left"))
        if reached:
            p_value = (1 + reached) / (simulations + 1)
        else:  # beyond every simulated statistic: the approximation says how far beyond
            p_value = min(p_value, 1 / (simulations + 1))
    return FitResult(method, statistic, cells - 1, p_value, cells, n, simulated=simulations)


@functools.lru_cache(maxsize=32)
def _null_statistics(expected: tuple[float, ...], n: int, lambda_: str, simulations: int) -> np.ndarray:
    """The statistic of `simulations` samples of n drawn from the cells' own probabilities, sorted.
    Cached: a lab run tests every rule and the control against the same merged cells."""
    rng = np.random.default_rng(SIMULATION_SEED)
    probs = np.asarray(expected, dtype=np.float64) / n
    probs /= probs.sum()
    exp = np.asarray(expected, dtype=np.float64)
    parts = []
    for start in range(0, simulations, SIMULATION_CHUNK):
        draws = rng.multinomial(n, probs, size=min(SIMULATION_CHUNK, simulations - start)).astype(np.float64)
        if lambda_ == "pearson":  # scipy's power_divergence, written out: its generic path is ten times slower
            parts.append(((draws - exp) ** 2 / exp).sum(axis=1))
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                parts.append(2 * np.where(draws > 0, draws * np.log(draws / exp), 0.0).sum(axis=1))
    return np.sort(np.concatenate(parts))
