"""specviz.labs.theory against the paper's own numbers, brute force, and hand-derived cases."""

from __future__ import annotations

import itertools

import pytest

from specviz.labs import theory
from specviz.labs.theory import (
    TABLE_1,
    TABLE_4,
    best_gamma,
    estimate_alpha,
    expected_tokens_per_iteration,
    operations_factor,
    speedup_possible,
    tokens_per_iteration_distribution,
    walltime_improvement,
)

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

ALPHAS = [0.0, 0.05, 0.1, 0.3, 0.5, 0.62, 0.75, 0.8, 0.9, 0.95, 0.99, 1.0]
CS = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]


def test_table_4_expected_speedups_within_0_1():
    assert len(TABLE_4) == 12
    for row in TABLE_4:
        assert row.predicted() == pytest.approx(row.expected, abs=0.1), row


def test_design_check_value():
    # The paper's Table 4, first row: alpha = .75, gamma = 7, c = .02 gives about 3.2 expected (3.4 measured).
    assert walltime_improvement(0.75, 7, 0.02) == pytest.approx(3.2, abs=0.05)
    first = TABLE_4[0]
    assert (first.alpha, first.gamma, first.c, first.expected, first.empirical) == (0.75, 7, 0.02, 3.2, 3.4)


def test_table_1_speed_and_operations():
    for row in TABLE_1:
        assert walltime_improvement(row.alpha, row.gamma, 0.0) == pytest.approx(row.speed, abs=0.006), row
        assert operations_factor(row.alpha, row.gamma, 0.0) == pytest.approx(row.operations, abs=0.006), row


def test_expected_tokens_closed_form_and_limit():
    for alpha, gamma in itertools.product([0.0, 0.2, 0.5, 0.9, 0.999], range(0, 9)):
        closed = (1 - alpha ** (gamma + 1)) / (1 - alpha)
        assert expected_tokens_per_iteration(alpha, gamma) == pytest.approx(closed, rel=1e-9)
    for gamma in range(0, 9):
        assert expected_tokens_per_iteration(1.0, gamma) == gamma + 1
        # continuous at alpha -> 1
        assert expected_tokens_per_iteration(1 - 1e-9, gamma) == pytest.approx(gamma + 1, rel=1e-6)
    assert expected_tokens_per_iteration(0.0, 5) == 1.0


def test_walltime_is_thm_3_8():
    for alpha, gamma, c in [(0.6, 3, 0.05), (0.3, 1, 0.5), (0.99, 12, 0.01)]:
        closed = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))
        assert walltime_improvement(alpha, gamma, c) == pytest.approx(closed, rel=1e-12)
    # Cor. 3.9: at gamma = 1 the factor is (1 + alpha) / (1 + c)
    assert walltime_improvement(0.4, 1, 0.1) == pytest.approx(1.4 / 1.1)


def _brute_force_best(alpha, c, gamma_max):
    values = [
        (1 - alpha ** (g + 1)) / (1 - alpha) / (g * c + 1) if alpha < 1 else (g + 1) / (g * c + 1)
        for g in range(1, gamma_max + 1)
    ]
    top = max(values)
    return 1 + values.index(top), top


@pytest.mark.parametrize("gamma_max", [1, 4, 16])
def test_best_gamma_matches_brute_force_on_a_grid(gamma_max):
    for alpha, c in itertools.product(ALPHAS, CS):
        gamma = best_gamma(alpha, c, gamma_max)
        brute_gamma, brute_value = _brute_force_best(alpha, c, gamma_max)
        # the same optimum value; the same gamma unless two gammas tie to rounding
        assert walltime_improvement(alpha, gamma, c) == pytest.approx(brute_value, rel=1e-12)
        if gamma != brute_gamma:
            assert walltime_improvement(alpha, brute_gamma, c) == pytest.approx(brute_value, rel=1e-12)


def test_best_gamma_hand_derived_cases():
    # alpha = .5, c = .1: gamma 1, 2, 3 give 1.5/1.1 = 1.364, 1.75/1.2 = 1.458, 1.875/1.3 = 1.442.
    assert best_gamma(0.5, 0.1) == 2
    # c = 0: every extra draft is free and adds alpha^gamma > 0 tokens, so the largest gamma wins.
    assert best_gamma(0.5, 0.0, gamma_max=10) == 10
    assert best_gamma(0.9, 0.0, gamma_max=16) == 16
    # alpha = 1: (gamma + 1) / (gamma c + 1) grows with gamma whenever c < 1.
    assert best_gamma(1.0, 0.5, gamma_max=8) == 8
    # alpha = 0: one token per iteration whatever gamma, so every draft is pure cost.
    assert best_gamma(0.0, 0.05) == 1
    assert best_gamma(0.0, 0.0) == 1  # all gammas tie at 1.0; ties go to the smallest
    # alpha = .1, c = .2: 1.1/1.2 = .917 at gamma 1, 1.11/1.4 = .793 at gamma 2: no gain, gamma 1 least bad.
    assert best_gamma(0.1, 0.2) == 1
    # The paper's Table 4 row EnDe T5-small temp 0 used gamma 7; the optimum is nearby (flat curve).
    assert 6 <= best_gamma(0.75, 0.02) <= 10


def test_no_gamma_gives_a_speedup_when_alpha_at_most_c():
    for alpha, c in itertools.product(ALPHAS, CS):
        possible = speedup_possible(alpha, c)
        assert possible == (alpha > c)
        gains = [walltime_improvement(alpha, g, c) for g in range(1, 17)]
        if alpha <= c:
            assert max(gains) <= 1.0 + 1e-12, (alpha, c)
        else:
            assert max(gains) > 1.0, (alpha, c)
            # Cor. 3.9: the gain is at least (1 + alpha) / (1 + c)
            assert max(gains) >= (1 + alpha) / (1 + c) - 1e-12


def test_truncated_geometric_sums_to_one_and_has_the_right_mean():
    for alpha, gamma in itertools.product(ALPHAS, range(0, 12)):
        dist = tokens_per_iteration_distribution(alpha, gamma)
        assert len(dist) == gamma + 1
        assert all(x >= 0 for x in dist)
        assert sum(dist) == pytest.approx(1.0, abs=1e-12)
        mean = sum(k * pk for k, pk in enumerate(dist, start=1))
        assert mean == pytest.approx(expected_tokens_per_iteration(alpha, gamma), rel=1e-12)
    assert tokens_per_iteration_distribution(0.5, 2) == pytest.approx([0.5, 0.25, 0.25])
    assert tokens_per_iteration_distribution(1.0, 3) == [0.0, 0.0, 0.0, 1.0]


def test_alpha_from_a_trace_summary():
    summary = {"alpha": 0.7, "drafted": 40, "iterations": 10, "draft_ms": 20.0, "verify_ms": 100.0}
    assert estimate_alpha({"summary": summary}) == 0.7

    class FakeTrace:  # anything with a .summary, like specviz.traces.trace.Trace
        pass

    t = FakeTrace()
    t.summary = dict(summary, alpha=None, drafted=0)
    assert estimate_alpha(t) is None
    with pytest.raises(ValueError):
        estimate_alpha({"no": "summary"})


def test_verification_cost_v_divides_like_one_more_step():
    # v = 1 is Thm 3.8 exactly; every v scales the cost of an iteration, gamma c + v.
    for alpha, gamma, c in itertools.product(ALPHAS, range(1, 9), CS):
        tau = expected_tokens_per_iteration(alpha, gamma)
        assert walltime_improvement(alpha, gamma, c) == walltime_improvement(alpha, gamma, c, 1.0)
        assert walltime_improvement(alpha, gamma, c, 1.5) == pytest.approx(tau / (gamma * c + 1.5), rel=1e-12)
    # alpha 0.6, gamma 2, c 0.1: tau = 1.96; v = 1 gives 1.96 / 1.2 = 1.633, v = 1.8 gives 1.96 / 2.0 = 0.98.
    assert walltime_improvement(0.6, 2, 0.1, 1.8) == pytest.approx(0.98)


def test_a_dearer_verification_can_make_a_paying_pair_lose():
    # alpha > c pays at v = 1 (Cor 3.9) ...
    assert speedup_possible(0.3, 0.1)
    # ... but at v = 1.5 even the best gamma is below 1: tau <= 1 / 0.7 = 1.43 < 1.5 + gamma c.
    assert not speedup_possible(0.3, 0.1, 1.5)
    assert walltime_improvement(0.3, best_gamma(0.3, 0.1, 16, 1.5), 0.1, 1.5) < 1
    # Brute force agrees with speedup_possible for every v.
    for alpha, c, v in itertools.product(ALPHAS, CS, (1.0, 1.2, 2.0)):
        best = max(walltime_improvement(alpha, g, c, v) for g in range(1, 17))
        assert speedup_possible(alpha, c, v) == (best > 1), (alpha, c, v)


@pytest.mark.parametrize(
    "call",
    [
        lambda: expected_tokens_per_iteration(1.5, 3),
        lambda: expected_tokens_per_iteration(-0.1, 3),
        lambda: expected_tokens_per_iteration(float("nan"), 3),
        lambda: expected_tokens_per_iteration(0.5, -1),
        lambda: expected_tokens_per_iteration(0.5, 2.5),
        lambda: walltime_improvement(0.5, 3, -0.1),
        lambda: walltime_improvement(0.5, 3, float("inf")),
        lambda: best_gamma(0.5, 0.1, gamma_max=0),
        lambda: walltime_improvement(0.5, 3, 0.1, 0.0),
        lambda: walltime_improvement(0.5, 3, 0.1, float("nan")),
    ],
)
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_numpy_scalars_are_accepted():
    np = pytest.importorskip("numpy")
    assert walltime_improvement(np.float64(0.75), np.int64(7), np.float32(0.02)) == pytest.approx(3.157, abs=1e-3)


def test_public_names_exist():
    for name in theory.__all__:
        assert hasattr(theory, name)


def test_slider_ranges_hold_every_measured_value():
    """The Theory page's sliders start at theory.SLIDER_RANGES and widen to hold the trace's own
    value: v began at 1, so a measured 0.84 became 1.00 on the slider and in the headline."""
    assert theory.slider_range("v") == theory.SLIDER_RANGES["v"]
    assert theory.SLIDER_RANGES["v"][0] < 0.84 < theory.SLIDER_RANGES["v"][1]
    for name, value in [("v", 0.84), ("v", 0.123), ("v", 7.215), ("c", 1.3), ("c", 0.0159), ("alpha", 0.9)]:
        low, high = theory.slider_range(name, value)
        assert low <= round(value, 2) <= high and low <= value <= high, (name, value, low, high)
        assert (low, high) == (round(low, 2), round(high, 2))  # on the sliders' 0.01 grid
    assert theory.slider_range("c", 1.3) == (0.0, 1.3)  # widened exactly to the value, not beyond
    assert theory.slider_range("v", 1e-6)[0] > 0  # v never reaches 0: the formulas divide by it
    assert theory.slider_range("alpha", 1.5) == (0.0, 1.0)  # α is a probability
    assert theory.slider_range("v", float("nan")) == theory.slider_range("v", None) == theory.SLIDER_RANGES["v"]
    with pytest.raises(ValueError):
        theory.slider_range("gamma", 3)
