"""Closed forms of speculative decoding (Leviathan et al. 2023, arXiv 2211.17192, Section 3).

Pure Python, no torch: the theory page, the sweep and the lesson import it freely, and so can a
notebook without any model installed. p is the target, q the draft; the letters follow the paper:

    alpha   expected acceptance rate E[beta], beta = sum_x min(p(x), q(x))     (Cor. 3.6)
    gamma   draft tokens proposed per iteration
    c       cost coefficient: time of one draft step / time of one target step (Def. 3.7)
    v       verification cost: time of one target pass over the gamma + 1 positions / one target
            step. The paper assumes v = 1 (the positions run in parallel); on a CPU they do not,
            so every formula here takes v, 1 by default (specviz.traces.speedup measures it)
    c_hat   arithmetic operations per token of the draft / of the target       (Def. 3.10)

All the formulas rest on the paper's simplifying assumption that the betas are i.i.d.; the tokens
emitted per iteration are then a geometric variable capped at gamma + 1.

It also holds the paper's own check values: Table 1 (c = c_hat = 0) and Table 4 (expected vs
empirically measured walltime improvement for T5-XXL), copied from Appendix A.3 of arXiv
2211.17192v2 into assets/paper/ as CSV files, so the tests and the theory page can show that
these formulas reproduce them.
"""

from __future__ import annotations

import csv
import math
import numbers
import typing
from dataclasses import dataclass
from typing import Any

from specviz.shipped import ASSETS

__all__ = [
    "SLIDER_RANGES",
    "TABLE_1",
    "TABLE_4",
    "PaperRow",
    "SpeedOpsRow",
    "best_gamma",
    "estimate_alpha",
    "explain_measurement",
    "measured_point",
    "expected_tokens_per_iteration",
    "operations_factor",
    "slider_range",
    "speedup_possible",
    "tokens_per_iteration_distribution",
    "walltime_improvement",
]


# ----- the closed forms ------------------------------------------------------------------------


def expected_tokens_per_iteration(alpha: float, gamma: int) -> float:
    """(1 - alpha^(gamma+1)) / (1 - alpha), Eq. (1); gamma + 1 in the limit alpha -> 1.

    Computed as the geometric sum 1 + alpha + ... + alpha^gamma, which is the same number without
    the 0/0 at alpha = 1 or the cancellation just below it.
    """
    _check_alpha(alpha)
    _check_gamma(gamma)
    return sum(alpha**k for k in range(gamma + 1))


def walltime_improvement(alpha: float, gamma: int, c: float, v: float = 1.0) -> float:
    """Expected walltime improvement factor: (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + v)).

    One iteration costs gamma draft steps (c each, in target steps) plus one verification pass (v
    target steps), and emits expected_tokens_per_iteration tokens; the baseline pays one target
    step per token. v = 1 is the paper's Thm. 3.8.
    """
    _check_c(c, "c")
    _check_v(v)
    return expected_tokens_per_iteration(alpha, gamma) / (gamma * c + v)


def operations_factor(alpha: float, gamma: int, c_hat: float = 0.0) -> float:
    """Expected factor of increase in total arithmetic operations (Thm. 3.11):
    (1 - alpha) (gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1)).

    Each iteration runs the target on gamma + 1 positions (and the draft gamma times), so rejected
    drafts are paid for without producing tokens: speed is bought with extra arithmetic.
    """
    _check_c(c_hat, "c_hat")
    return (gamma * c_hat + gamma + 1) / expected_tokens_per_iteration(alpha, gamma)


def speedup_possible(alpha: float, c: float, v: float = 1.0, gamma_max: int = 16) -> bool:
    """True when some gamma gives a walltime improvement above 1. At v = 1 that is alpha > c
    (Cor. 3.9), for every gamma; with a dearer verification (v > 1) it is asked of gamma up to
    gamma_max directly, since the corollary's argument no longer holds.

    Why alpha > c at v = 1: at gamma = 1 the improvement is (1 + alpha) / (1 + c), above 1 exactly
    when alpha > c. If alpha <= c, every gamma loses: 1 + alpha + ... + alpha^gamma <= 1 + gamma
    alpha <= 1 + gamma c, because alpha^k <= alpha for k >= 1.
    """
    _check_alpha(alpha)
    _check_c(c, "c")
    _check_v(v)
    if v == 1.0:
        return alpha > c
    return walltime_improvement(alpha, best_gamma(alpha, c, gamma_max, v), c, v) > 1


def best_gamma(alpha: float, c: float, gamma_max: int = 16, v: float = 1.0) -> int:
    """The gamma in 1..gamma_max that maximises walltime_improvement (Sec. 3.5).

    gamma is an integer, so we simply try them all. Ties go to the smaller gamma (less wasted work).
    When no gamma gives a speedup this is still the least bad gamma; ask speedup_possible whether
    drafting pays at all. With c = 0 and 0 < alpha the improvement grows with gamma, so the answer
    is gamma_max.
    """
    _check_gamma(gamma_max)
    if gamma_max < 1:
        raise ValueError(f"gamma_max must be at least 1; got {gamma_max!r}.")
    best, best_value = 1, walltime_improvement(alpha, 1, c, v)
    for gamma in range(2, gamma_max + 1):
        value = walltime_improvement(alpha, gamma, c, v)
        if value > best_value:
            best, best_value = gamma, value
    return best


def tokens_per_iteration_distribution(alpha: float, gamma: int) -> list[float]:
    """P(an iteration emits k tokens) for k = 1..gamma+1: a geometric variable capped at gamma + 1.

    k tokens (k <= gamma) means k - 1 accepted drafts then a rejection (and its resample):
    alpha^(k-1) (1 - alpha). gamma + 1 tokens means all gamma drafts accepted plus the bonus:
    alpha^gamma. Index 0 of the returned list is k = 1.
    """
    _check_alpha(alpha)
    _check_gamma(gamma)
    return [alpha ** (k - 1) * (1 - alpha) for k in range(1, gamma + 1)] + [alpha**gamma]


# ----- estimates from a measured run -----------------------------------------------------------


def estimate_alpha(trace: Any) -> float | None:
    """The trace's measured alpha: mean beta over the positions the text reached (summary.alpha).

    None for an untraced run (benchmarks keep no per-token betas) or a run that drafted nothing.
    `trace` is a specviz.traces.trace.Trace or its dict form.
    """
    alpha = _summary(trace).get("alpha")
    return None if alpha is None else float(alpha)


def measured_point(trace: Any, baseline: Any = None) -> dict[str, Any] | None:
    """What a speculative trace measured, for the theory charts' point and explain_measurement:
    α; c and v (specviz.traces.speedup.measured_costs: against its target alone, None without one); γ;
    tokens and drafts per iteration; the cost of a whole iteration in target steps; the measured
    speedup with its spread. None for a target-alone run."""
    if trace.mode != "speculative":
        return None
    from specviz.traces.speedup import measured_costs, speedup_spread  # no torch there either

    costs = measured_costs(trace, baseline)
    spread = speedup_spread(trace, baseline)
    s = trace.summary
    return {
        "alpha": estimate_alpha(trace),
        "c": None if costs is None else costs.c,
        "v": None if costs is None else costs.v,
        "iteration_steps": None if costs is None else costs.iteration,
        "alone_token_steps": None if costs is None else costs.alone_token,
        "gamma": trace.config.get("gamma"),
        "tokens": s.get("mean_accepted_length"),
        "drafts_per_iteration": (s.get("drafted") or 0) / s["iterations"] if s.get("iterations") else None,
        "speedup": None if spread is None else spread.median,
        "spread": spread,
    }


# The Theory page's sliders for alpha, c and v before a trace widens them (slider_range), on a
# 0.01 grid. v starts below 1: a run here measured a verification pass at 0.84 of a target-alone
# step (the target alone pays per-step overheads a pass over gamma + 1 positions shares), and a
# range starting at the paper's 1 silently set such a run's v to 1.00.
SLIDER_RANGES = {"alpha": (0.0, 1.0), "c": (0.0, 1.0), "v": (0.5, 3.0)}
SLIDER_STEP = 0.01


def slider_range(name: str, measured: float | None = None) -> tuple[float, float]:
    """(low, high) of the Theory page's slider for "alpha", "c" or "v": SLIDER_RANGES[name], widened
    outward to the 0.01 grid so that it holds a measured value (a draft as slow as its target
    measures c above 1; a cheap pass v below 0.5). v never reaches 0, where the formulas divide by
    nothing, and alpha stays in [0, 1]; a value that is not a finite number widens nothing."""
    if name not in SLIDER_RANGES:
        raise ValueError(f"name must be one of {', '.join(SLIDER_RANGES)}; got {name!r}.")
    low, high = SLIDER_RANGES[name]
    if isinstance(measured, numbers.Real) and not isinstance(measured, bool) and math.isfinite(measured):
        # round() first: 0.84 / 0.01 is 83.99999999999999, whose floor would widen the range needlessly
        low = min(low, math.floor(round(measured / SLIDER_STEP, 9)) * SLIDER_STEP)
        high = max(high, math.ceil(round(measured / SLIDER_STEP, 9)) * SLIDER_STEP)
    hard_low, hard_high = {"alpha": (0.0, 1.0), "c": (0.0, math.inf), "v": (SLIDER_STEP, math.inf)}[name]
    return round(max(low, hard_low), 2), round(min(high, hard_high), 2)


@dataclass(frozen=True)
class Explanation:
    """A measured run beside its predictions: the paper's (v = 1) and the one with its measured v,
    and where the run parts from the formula (rows of what the formula assumes and what the run did)."""

    paper: float  # tau(alpha, gamma) / (gamma c + 1), Thm 3.8
    predicted: float  # tau(alpha, gamma) / (gamma c + v)
    spread: Any  # the run's timed pairs (specviz.traces.speedup.Spread): their median and range
    rows: list[tuple[str, float, float]]  # (what, the formula's value, the run's value)
    causes: list[str]  # the rows that part by more than CAUSE_SHARE, in words

    measured = property(lambda self: self.spread.median)  # the median of the run's timed pairs
    low = property(lambda self: self.spread.low)
    high = property(lambda self: self.spread.high)
    pairs = property(lambda self: self.spread.pairs)

    @property
    def within(self) -> bool:
        """The prediction lies inside the measured range (of two or more pairs)."""
        return self.pairs >= 2 and self.low <= self.predicted <= self.high

    def sentence(self) -> str:
        if self.within:
            return (
                f"The prediction with the measured v, {self.predicted:.2f}×, lies inside the measured range "
                f"({self.low:.2f}–{self.high:.2f}× over {self.pairs} pairs): what is left between them is timing noise."
            )
        if self.pairs < 2:
            where = f"beside the one timed pair ({self.measured:.2f}×)"
        else:
            side = "above" if self.predicted > self.high else "below"
            where = f"{side} the measured range ({self.low:.2f}–{self.high:.2f}× over {self.pairs} pairs)"
        why = "; ".join(self.causes) if self.causes else "no single row stands out, so it is timing noise"
        return (
            f"The prediction with the measured v, {self.predicted:.2f}×, lies {where}. "
            f"Where the run parts from the formula: {why}."
        )


CAUSE_SHARE = 0.05  # a row whose measured value differs from the formula's by more is named as a cause
# The keys of Explanation.rows, in their order: the words of each row in a language are the
# catalogue's (specviz.teaching.charts.theory_text.explanation_sentence); `rows` and `causes` stay English.
ROW_KEYS = ("tokens", "drafts", "iteration_cost", "alone_cost")


def parts(formula: float, run: float) -> bool:
    """The run's value of a row parts from the formula's by more than CAUSE_SHARE: a cause."""
    return abs(run - formula) > CAUSE_SHARE * abs(formula)


def explain_measurement(point: dict[str, Any]) -> Explanation | None:
    """The predictions for a measured point (measured_point) and what separates them from the
    measurement. The measured speedup is tokens per iteration ÷ an iteration's cost in target steps
    × the target alone's cost per token in steps, so these rows account for the whole gap:

        tokens per iteration         tau(alpha, gamma)  vs new tokens ÷ iterations
        drafts per iteration         gamma              vs drafted ÷ iterations (early stops, the end)
        cost of an iteration         gamma c + v        vs its wall time ÷ one target step
        target alone, per token      1 step             vs its wall time per token ÷ one step

    None when the point lacks α, c, v or a measured speedup."""
    needed = ("alpha", "c", "v", "gamma", "tokens", "spread", "iteration_steps", "alone_token_steps")
    if any(point.get(k) is None for k in needed) or not point["gamma"]:
        return None
    alpha, gamma, c, v = point["alpha"], int(point["gamma"]), point["c"], point["v"]
    rows = [
        ("tokens per iteration", expected_tokens_per_iteration(alpha, gamma), point["tokens"]),
        ("drafts per iteration", float(gamma), point["drafts_per_iteration"]),
        ("cost of an iteration in target steps", gamma * c + v, point["iteration_steps"]),
        ("the target alone's cost per token in steps", 1.0, point["alone_token_steps"]),
    ]
    causes = [_cause(*row) for row in rows if parts(row[1], row[2])]
    predicted = walltime_improvement(alpha, gamma, c, v)
    return Explanation(walltime_improvement(alpha, gamma, c), predicted, point["spread"], rows, causes)


def _cause(what: str, formula: float, run: float) -> str:
    return f"{what} {run:.2f}, where the formula has {formula:.2f}"


def _summary(trace: Any) -> dict:
    summary = trace.get("summary") if isinstance(trace, dict) else getattr(trace, "summary", None)
    if not isinstance(summary, dict):
        raise ValueError("Expected a specviz Trace (or its dict) with a summary.")
    return summary


# ----- the paper's check values ----------------------------------------------------------------


@dataclass(frozen=True)
class SpeedOpsRow:
    """One row of Table 1: speed and total arithmetic operations vs the baseline, c = c_hat = 0."""

    alpha: float
    gamma: int
    operations: float  # the paper's "Operations" column (x baseline)
    speed: float  # the paper's "Speed" column (x baseline)


@dataclass(frozen=True)
class PaperRow:
    """One row of Table 4: T5-XXL (11B) target, T5 v1.1 draft, batch 1 on one TPU-v4."""

    task: str  # "EnDe" (WMT English-German translation) or "CNNDM" (CNN/DailyMail summarisation)
    draft: str  # the approximation model M_q
    temperature: float  # 0 = argmax, 1 = standard sampling
    gamma: int
    alpha: float
    c: float  # the paper estimated c from profiler traces
    expected: float  # "Exp": Thm. 3.8 at these alpha, gamma, c (rounded to one decimal)
    empirical: float  # "Emp": the measured walltime improvement (also Table 2's "Speed")

    def predicted(self) -> float:
        """Thm. 3.8 recomputed here, to compare with `expected`."""
        return walltime_improvement(self.alpha, self.gamma, self.c)


def _paper_table(filename: str, row: type) -> tuple:
    """One of the paper's tables, from its CSV in assets/paper/: a header of `row`'s field names,
    then one line per row of the paper, in the paper's order."""
    types = typing.get_type_hints(row)
    with (ASSETS / "paper" / filename).open(encoding="utf-8", newline="") as f:
        return tuple(row(**{name: types[name](value) for name, value in line.items()}) for line in csv.DictReader(f))


# Leviathan et al. 2023, arXiv 2211.17192v2, Table 1 (Section 3.5).
TABLE_1: tuple[SpeedOpsRow, ...] = _paper_table("leviathan_2023_table_1.csv", SpeedOpsRow)

# Leviathan et al. 2023, arXiv 2211.17192v2, Table 4 (Appendix A.3), all twelve rows.
TABLE_4: tuple[PaperRow, ...] = _paper_table("leviathan_2023_table_4.csv", PaperRow)


# ----- argument checks: clear words instead of a silent nonsense number -------------------------
# numbers.Real / numbers.Integral so numpy scalars from a slider grid pass too.


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a number from 0 to 1; got {alpha!r}.")


def _check_gamma(gamma: int) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Integral) or gamma < 0:
        raise ValueError(f"gamma must be a whole number >= 0; got {gamma!r}.")


def _check_v(v: float) -> None:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"v (verification pass ÷ target step) must be a number above 0; got {v!r}.")


def _check_c(c: float, name: str) -> None:
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {c!r}.")
