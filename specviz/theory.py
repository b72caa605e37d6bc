"""Closed forms of speculative decoding (Leviathan et al. 2023, arXiv 2211.17192, Section 3).

Pure Python, no torch: the theory page, the sweep and the lesson import it freely, and so can a
notebook without any model installed. p is the target, q the draft; the letters follow the paper:

    alpha   expected acceptance rate E[beta], beta = sum_x min(p(x), q(x))     (Cor. 3.6)
    gamma   draft tokens proposed per iteration
    c       cost coefficient: time of one draft step / time of one target step (Def. 3.7)
    c_hat   arithmetic operations per token of the draft / of the target       (Def. 3.10)

All the formulas rest on the paper's simplifying assumption that the betas are i.i.d.; the tokens
emitted per iteration are then a geometric variable capped at gamma + 1.

It also holds the paper's own check values: Table 1 (c = c_hat = 0) and Table 4 (expected vs
empirically measured walltime improvement for T5-XXL), copied from Appendix A.3 of arXiv
2211.17192v2, so the tests and the theory page can show that these formulas reproduce them.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

__all__ = [
    "TABLE_1",
    "TABLE_4",
    "PaperRow",
    "SpeedOpsRow",
    "best_gamma",
    "estimate_alpha",
    "estimate_c",
    "expected_tokens_per_iteration",
    "operations_factor",
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


def walltime_improvement(alpha: float, gamma: int, c: float) -> float:
    """Expected walltime improvement factor (Thm. 3.8): (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)).

    One iteration costs gamma draft steps (c each, in target steps) plus one target pass, and emits
    expected_tokens_per_iteration tokens; the baseline pays one target step per token.
    """
    _check_c(c, "c")
    return expected_tokens_per_iteration(alpha, gamma) / (gamma * c + 1)


def operations_factor(alpha: float, gamma: int, c_hat: float = 0.0) -> float:
    """Expected factor of increase in total arithmetic operations (Thm. 3.11):
    (1 - alpha) (gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1)).

    Each iteration runs the target on gamma + 1 positions (and the draft gamma times), so rejected
    drafts are paid for without producing tokens: speed is bought with extra arithmetic.
    """
    _check_c(c_hat, "c_hat")
    return (gamma * c_hat + gamma + 1) / expected_tokens_per_iteration(alpha, gamma)


def speedup_possible(alpha: float, c: float) -> bool:
    """True when some gamma gives a walltime improvement above 1, i.e. when alpha > c (Cor. 3.9).

    Why both ways: at gamma = 1 the improvement is (1 + alpha) / (1 + c), above 1 exactly when
    alpha > c. If alpha <= c, every gamma loses: 1 + alpha + ... + alpha^gamma <= 1 + gamma alpha
    <= 1 + gamma c, because alpha^k <= alpha for k >= 1.
    """
    _check_alpha(alpha)
    _check_c(c, "c")
    return alpha > c


def best_gamma(alpha: float, c: float, gamma_max: int = 16) -> int:
    """The gamma in 1..gamma_max that maximises walltime_improvement (Sec. 3.5).

    gamma is an integer, so we simply try them all. Ties go to the smaller gamma (less wasted work).
    When no gamma gives a speedup (alpha <= c) this is still the least bad gamma; ask
    speedup_possible whether drafting pays at all. With c = 0 and 0 < alpha the improvement grows
    with gamma, so the answer is gamma_max.
    """
    _check_gamma(gamma_max)
    if gamma_max < 1:
        raise ValueError(f"gamma_max must be at least 1; got {gamma_max!r}.")
    best, best_value = 1, walltime_improvement(alpha, 1, c)
    for gamma in range(2, gamma_max + 1):
        value = walltime_improvement(alpha, gamma, c)
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
    `trace` is a specviz.trace.Trace or its dict form.
    """
    alpha = _summary(trace).get("alpha")
    return None if alpha is None else float(alpha)


def estimate_c(trace: Any) -> float | None:
    """c per verify pass (specviz.glossary.C_PER_VERIFY) = (draft time per drafted token) / (target
    verify time per iteration): what one speculative trace can measure without a baseline. Where a
    baseline was run, c proper (glossary.C) divides by the single-token step instead (the bench,
    the sweep and the race do).

    Why this choice: Thm. 3.8 prices one iteration at gamma c T + T, where T is one target pass
    (the paper assumes the gamma + 1 verified positions run in parallel at the cost of one step).
    Dividing the run's total draft time by the drafted tokens gives c T, and its total verify time
    by the iterations gives T, so gamma c T + T is the measured cost of an average iteration.
    On hardware where verifying gamma + 1 positions costs more than one step (a CPU, say), T is the
    verify pass as measured, not a single-token step; the predicted speedup is then optimistic.

    Uses the summary (draft_ms, verify_ms, drafted, iterations), so it works for untraced runs
    too. None when the run drafted nothing (autoregressive, or an n-gram draft that never matched).
    Untraced runs skip the per-iteration device sync, so on a GPU their split is less precise.
    """
    s = _summary(trace)
    drafted, iterations = s.get("drafted") or 0, s.get("iterations") or 0
    verify_ms = s.get("verify_ms") or 0.0
    if drafted <= 0 or iterations <= 0 or verify_ms <= 0:
        return None
    draft_per_token = float(s.get("draft_ms") or 0.0) / drafted
    verify_per_iteration = float(verify_ms) / iterations
    return draft_per_token / verify_per_iteration


def measured_point(trace: Any, baseline: Any = None) -> dict[str, Any] | None:
    """What a speculative trace measured, for the theory charts' point: α, c per verify pass, γ,
    tokens per iteration and (with a baseline) the measured speedup. None for a target-alone run."""
    if trace.mode != "speculative":
        return None
    from specviz.trace import speedup  # trace imports nothing heavy; kept local so theory stays standalone

    return {
        "alpha": estimate_alpha(trace),
        "c": estimate_c(trace),
        "gamma": trace.config.get("gamma"),
        "tokens": trace.summary.get("mean_accepted_length"),
        "speedup": speedup(trace, baseline),
    }


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


# Leviathan et al. 2023, arXiv 2211.17192v2, Table 1 (Section 3.5).
TABLE_1: tuple[SpeedOpsRow, ...] = (
    SpeedOpsRow(0.6, 2, 1.53, 1.96),
    SpeedOpsRow(0.7, 3, 1.58, 2.53),
    SpeedOpsRow(0.8, 2, 1.23, 2.44),
    SpeedOpsRow(0.8, 5, 1.63, 3.69),
    SpeedOpsRow(0.9, 2, 1.11, 2.71),
    SpeedOpsRow(0.9, 10, 1.60, 6.86),
)

# Leviathan et al. 2023, arXiv 2211.17192v2, Table 4 (Appendix A.3), all twelve rows.
TABLE_4: tuple[PaperRow, ...] = (
    PaperRow("EnDe", "T5-small", 0, 7, 0.75, 0.02, 3.2, 3.4),
    PaperRow("EnDe", "T5-base", 0, 7, 0.80, 0.04, 3.3, 2.8),
    PaperRow("EnDe", "T5-large", 0, 7, 0.82, 0.11, 2.5, 1.7),
    PaperRow("EnDe", "T5-small", 1, 7, 0.62, 0.02, 2.3, 2.6),
    PaperRow("EnDe", "T5-base", 1, 5, 0.68, 0.04, 2.4, 2.4),
    PaperRow("EnDe", "T5-large", 1, 3, 0.71, 0.11, 2.0, 1.4),
    PaperRow("CNNDM", "T5-small", 0, 5, 0.65, 0.02, 2.4, 3.1),
    PaperRow("CNNDM", "T5-base", 0, 5, 0.73, 0.04, 2.6, 3.0),
    PaperRow("CNNDM", "T5-large", 0, 3, 0.74, 0.11, 2.0, 2.2),
    PaperRow("CNNDM", "T5-small", 1, 5, 0.53, 0.02, 1.9, 2.3),
    PaperRow("CNNDM", "T5-base", 1, 3, 0.55, 0.04, 1.8, 2.2),
    PaperRow("CNNDM", "T5-large", 1, 3, 0.56, 0.11, 1.6, 1.7),
)


# ----- argument checks: clear words instead of a silent nonsense number -------------------------
# numbers.Real / numbers.Integral so numpy scalars from a slider grid pass too.


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a number from 0 to 1; got {alpha!r}.")


def _check_gamma(gamma: int) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Integral) or gamma < 0:
        raise ValueError(f"gamma must be a whole number >= 0; got {gamma!r}.")


def _check_c(c: float, name: str) -> None:
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {c!r}.")
