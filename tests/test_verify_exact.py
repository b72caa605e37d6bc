"""The verification maths, checked exactly: the output of one step is distributed as p.

For gamma = 1 the output distribution of one verification step has a closed form built from the
functions in specviz.decoding.verify:

    P(out = x) = q(x) a(x) + (sum_y q(y) (1 - a(y))) res(x),   a = min(1, p/q), res = norm(max(0, p - q))

(accepted draft, plus rejection mass times the resample). For gamma = 2 we enumerate the first
two emitted tokens over a context-dependent p and q. Then the same formulas with the residual
replaced by p, and with the accept-if-equal rule, must NOT give p: so these tests would fail if
the maths were wrong. A last part samples the real `verify` function and compares it to these
exact distributions.
"""

from __future__ import annotations

import pytest
import torch

from specviz.decoding.verify import accept_probability, residual_distribution, verify

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

V = 6  # small vocabulary: every case can be enumerated
DTYPES = [torch.float64, torch.float32]


def _random_dist(gen, v=V, zeros=0, peaky=1.0):
    x = torch.rand(v, generator=gen, dtype=torch.float64) ** (1 + 3 * peaky)
    if zeros:
        x[torch.randperm(v, generator=gen)[:zeros]] = 0.0
    return x / x.sum()


def _one_hot(i, v=V):
    x = torch.zeros(v, dtype=torch.float64)
    x[i] = 1.0
    return x


def cases():
    """(name, p, q) over V tokens: random, and every edge case the brief lists."""
    gen = torch.Generator().manual_seed(1234)
    out = []
    for i in range(60):
        out.append((f"random{i}", _random_dist(gen, peaky=i % 3), _random_dist(gen, peaky=(i + 1) % 3)))
    for i in range(20):
        p = _random_dist(gen)  # p > 0 everywhere ...
        q = _random_dist(gen, zeros=1 + i % (V - 1))  # ... and q = 0 on some of it
        out.append((f"q_zero_where_p_positive{i}", p, q))
        out.append((f"p_zero_where_q_positive{i}", q.clone(), p.clone()))
    for i in range(5):
        p = _random_dist(gen)
        out.append((f"p_equals_q{i}", p, p.clone()))
        out.append((f"one_hot_q{i}", p, _one_hot(i % V)))
        out.append((f"one_hot_p{i}", _one_hot(i % V), p))
    p = _random_dist(gen, zeros=3)
    disjoint_q = (p == 0).to(torch.float64)
    out.append(("disjoint_support", p, disjoint_q / disjoint_q.sum()))
    out.append(("one_hot_equal", _one_hot(2), _one_hot(2)))
    out.append(("one_hot_different", _one_hot(2), _one_hot(4)))
    return out


CASES = cases()


def step_output(p, q, rule="exact"):
    """Exact distribution of the token one gamma = 1 verification emits first, from specviz.decoding.verify.

    Drafts only come from where q > 0, so a(x) is only needed there (0/0 elsewhere is masked).
    """
    safe_q = torch.where(q > 0, q, torch.ones_like(q))
    a = torch.where(q > 0, accept_probability(p, safe_q), torch.zeros_like(q))
    if rule == "accept_if_equal":
        a = p  # WRONG: keep draft x only when a sample from p equals it: probability p(x)
    accepted = q * a
    reject_mass = (q * (1 - a)).sum()
    corrected = p if rule == "resample_from_p" else residual_distribution(p, q)
    return accepted + reject_mass * corrected


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_step_gamma_1_reproduces_p(dtype):
    for name, p, q in CASES:
        p, q = p.to(dtype), q.to(dtype)
        out = step_output(p, q)
        assert out.sum().item() == pytest.approx(1.0, abs=1e-6), name
        assert torch.allclose(out, p, atol=1e-6, rtol=0), (name, out, p)


def _context_tables(gen):
    """p1, q1 [V]; p2, q2 [V, V] (row x1: the distributions after x1). Includes zeros in q and p."""
    p1, q1 = _random_dist(gen), _random_dist(gen, zeros=2)
    p2 = torch.stack([_random_dist(gen, zeros=i % 3) for i in range(V)])
    q2 = torch.stack([_random_dist(gen, zeros=(i + 1) % 3) for i in range(V)])
    return p1, q1, p2, q2


def joint_two_tokens_gamma_2(p1, q1, p2, q2, rule="exact"):
    """Exact P(y1, y2) of the first two emitted tokens with gamma = 2, by enumeration.

    Iteration 1 drafts x1 ~ q1, then x2 ~ q2[x1]. If x1 is accepted, y1 = x1 and y2 is decided by
    the second verification (accept x2 or resample from the residual of p2[x1], q2[x1]).
    If x1 is rejected, y1 comes from the residual and y2 from the next iteration, whose first
    token is again one verification step at p2[y1], q2[y1].
    """
    safe = torch.where(q1 > 0, q1, torch.ones_like(q1))
    a1 = torch.where(q1 > 0, accept_probability(p1, safe), torch.zeros_like(q1))
    if rule == "accept_if_equal":
        a1 = p1
    reject1 = (q1 * (1 - a1)).sum()
    res1 = p1 if rule == "resample_from_p" else residual_distribution(p1, q1)
    joint = torch.zeros(V, V, dtype=p1.dtype)
    for y1 in range(V):
        second = step_output(p2[y1], q2[y1], rule)  # y2 after y1: same one-step rule either way
        joint[y1] = (q1[y1] * a1[y1] + reject1 * res1[y1]) * second
    return joint


def test_gamma_2_first_two_tokens_reproduce_p():
    gen = torch.Generator().manual_seed(99)
    for _ in range(30):
        p1, q1, p2, q2 = _context_tables(gen)
        joint = joint_two_tokens_gamma_2(p1, q1, p2, q2)
        assert torch.allclose(joint.sum(1), p1, atol=1e-12)  # first emitted token
        assert torch.allclose(joint, p1[:, None] * p2, atol=1e-12)  # both tokens


@pytest.mark.parametrize("rule", ["resample_from_p", "accept_if_equal"])
def test_wrong_rules_break_the_formula(rule):
    deviations = [(step_output(p, q, rule) - p).abs().max().item() for _, p, q in CASES]
    assert max(deviations) > 1e-3, f"{rule} looks exact: the formula or the test is wrong"
    gen = torch.Generator().manual_seed(7)
    p1, q1, p2, q2 = _context_tables(gen)
    assert (joint_two_tokens_gamma_2(p1, q1, p2, q2, rule) - p1[:, None] * p2).abs().max() > 1e-3


def test_resample_from_p_is_exact_only_in_its_degenerate_cases():
    # With q = p nothing is ever rejected, and with disjoint supports everything is: then the
    # resample distribution does not matter / equals p. Anywhere between, it is wrong.
    for name, p, q in CASES:
        dev = (step_output(p, q, "resample_from_p") - p).abs().max().item()
        b = torch.minimum(p, q).sum().item()
        if b < 1e-9 or b > 1 - 1e-9:
            assert dev < 1e-9, name
        elif name.startswith("random"):
            assert dev > 1e-6, name


def test_no_bonus_keeps_the_distribution_of_the_first_two_tokens():
    """Evidence that the 'no_bonus' variant is slower but NOT distribution-changing.

    With gamma = 1 and no bonus, after an accepted x1 the next iteration drafts again from
    q2[x1] and verifies it with the exact rule, which emits p2[x1] (the test above). After a
    rejection it is the exact rule anyway. So P(y1, y2) = p1(y1) p2(y2 | y1), exactly as the bonus
    would give. This test pins that down so the lab's expectations stay honest.
    """
    gen = torch.Generator().manual_seed(5)
    for _ in range(10):
        p1, q1, p2, q2 = _context_tables(gen)
        first = step_output(p1, q1)  # iteration 1: accepted draft or resample
        joint = first[:, None] * torch.stack([step_output(p2[y], q2[y]) for y in range(V)])
        assert torch.allclose(joint, p1[:, None] * p2, atol=1e-12)


# ----- the real verify(): sampled, compared with the exact distributions above ----------------


def _sample_first_tokens(p, q, rule, n, seed):
    """Draw n first emitted tokens from specviz.decoding.verify.verify with gamma = 1 (p has the bonus row)."""
    gen = torch.Generator().manual_seed(seed)
    p_rows = torch.stack([p, p]).float()  # row 1 (bonus) is irrelevant to the first token
    counts = torch.zeros(V)
    for _ in range(n):
        x = torch.multinomial(q.float(), 1, generator=gen)
        verdict = verify(x, q.float()[None], p_rows, gen, greedy=False, rule=rule)
        token = int(x[0]) if verdict.accepted_count == 1 else verdict.correction_token
        counts[token] += 1
    return counts


@pytest.mark.parametrize("rule", ["exact", "resample_from_p", "accept_if_equal"])
def test_verify_function_samples_its_exact_distribution(rule):
    scipy_stats = pytest.importorskip("scipy.stats")
    p = torch.tensor([0.50, 0.25, 0.15, 0.06, 0.03, 0.01], dtype=torch.float64)
    q = torch.tensor([0.05, 0.10, 0.15, 0.20, 0.25, 0.25], dtype=torch.float64)
    n = 6000
    counts = _sample_first_tokens(p, q, rule, n, seed=11)
    predicted = step_output(p, q, rule)
    # the sampler follows the formula for ITS rule ...
    expected = (predicted * n).numpy()
    assert scipy_stats.chisquare(counts.numpy(), expected).pvalue > 0.001
    # ... and that is p only for the exact rule
    p_value_vs_p = scipy_stats.chisquare(counts.numpy(), (p * n).numpy()).pvalue
    if rule == "exact":
        assert p_value_vs_p > 0.001
    else:
        assert p_value_vs_p < 1e-6


# ----- draft trees: two first candidates, recursive rejection sampling (specviz.decoding.verify.choose_branch)


def without(q, x):
    """q with token x removed, renormalised: what the second candidate is drawn from."""
    rest = q.clone()
    rest[x] = 0.0
    return rest / rest.sum()


def two_candidate_output(p, q, residual_update=True):
    """Exact distribution of the first token emitted when two first candidates are drawn from q
    without replacement and tested in turn: candidate 1 against p; after its rejection candidate 2
    (from q without candidate 1) against p2 = norm(max(0, p - q)); after that rejection a resample
    from norm(max(0, p2 - q2)). residual_update=False tests candidate 2 against p itself (wrong)."""
    out = torch.zeros_like(p)
    for x1 in range(V):
        if q[x1] == 0:
            continue
        a1 = min(1.0, float(p[x1] / q[x1]))
        out[x1] += q[x1] * a1
        if q[x1] == 1:  # nothing else to draw: the tree is a chain
            out += q[x1] * (1 - a1) * residual_distribution(p, q)
            continue
        p2 = residual_distribution(p, q) if residual_update else p
        q2 = without(q, x1)
        for x2 in range(V):
            if q2[x2] == 0:
                continue
            a2 = min(1.0, float(p2[x2] / q2[x2]))
            out[x2] += q[x1] * (1 - a1) * q2[x2] * a2
            out += q[x1] * (1 - a1) * q2[x2] * (1 - a2) * residual_distribution(p2, q2)
    return out


@pytest.mark.parametrize(("name", "p", "q"), CASES, ids=[c[0] for c in CASES])
def test_two_first_candidates_reproduce_p(name, p, q):
    torch.testing.assert_close(two_candidate_output(p, q), p, atol=1e-9, rtol=0)


def test_testing_the_second_candidate_against_p_itself_breaks_the_formula():
    broken = [
        name for name, p, q in CASES if (two_candidate_output(p, q, residual_update=False) - p).abs().max() > 1e-3
    ]
    assert len(broken) > len(CASES) // 2, broken


def test_choose_branch_and_verify_sample_the_exact_distribution():
    """The real functions, sampled: two candidates drawn without replacement, choose_branch, then
    verify on the kept one-draft branch; the first emitted token must be distributed as p."""
    scipy_stats = pytest.importorskip("scipy.stats")
    from specviz.decoding.verify import choose_branch
    from specviz.engine.sampling import draw

    p = torch.tensor([0.50, 0.25, 0.15, 0.06, 0.03, 0.01])
    q = torch.tensor([0.05, 0.10, 0.15, 0.20, 0.25, 0.25])
    gen = torch.Generator().manual_seed(5)
    n, counts, kept_second = 6000, torch.zeros(V), 0
    for _ in range(n):
        x1 = draw(q, gen)
        q2 = without(q.double(), x1).float()
        x2 = draw(q2, gen)
        firsts, q_firsts = torch.tensor([x1, x2]), torch.stack([q, q2])
        branch, p_b, r_b, rejected = choose_branch(firsts, q_firsts, p, gen, greedy=False)
        assert len(rejected) == branch
        p_rows = torch.stack([p_b, p])  # the kept branch: one draft, then the bonus row
        verdict = verify(firsts[branch : branch + 1], q_firsts[branch : branch + 1], p_rows, gen, False, "exact", r_b)
        token = int(firsts[branch]) if verdict.accepted_count == 1 else verdict.correction_token
        counts[token] += 1
        kept_second += branch == 1 and verdict.accepted_count == 1
    assert scipy_stats.chisquare(counts.numpy(), (p.double() * n).numpy()).pvalue > 0.001
    assert kept_second > 0.1 * n  # what the tree adds: the second candidate is often accepted
