"""The distribution lab on tiny random models: the exact rule passes, the wrong rules are caught.

Target and draft are two different random-initialised Llamas over a 12-token vocabulary, with the
initialisation scaled up so their distributions are peaky and far apart (beta about 0.3 at the
first position): every rejection path runs often, and a wrong rule shifts the output a lot.

gamma = 1 and k = 2: the first token is a verified draft or a resample, and when the draft is
accepted the second token is the bonus, so a rule that mishandles the bonus would show too.
Seeds are fixed, so every p-value here is deterministic on a given torch build.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict

import pytest
import torch

from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import speculative_generate
from specviz.decoding.verify import RULE_NAMES, WRONG_RULES
from specviz.engine import toy
from specviz.engine.toy import PEAKY
from specviz.labs import lab_stats
from specviz.labs.lab import exact_distribution, marginal, run_lab
from specviz.labs.lab_stats import goodness_of_fit

PROMPT = [3, 1, 4, 1, 5]
K, GAMMA, N = 2, 1, 500
# Each correct sampler fails a chi-square test at level a with probability a. The suite runs about
# ten such tests with fixed seeds, so 0.001 keeps a false alarm unlikely (about 1%), while the wrong
# rules still land near p = 1e-16.
ALPHA_LEVEL = 0.001


def tiny_llama(seed: int, layers: int, init_scale: float = PEAKY, vocab: int = 12, eos: int | None = None):
    """The lab's tiny models: peaky, over a 12-token vocabulary, so p and q differ a lot."""
    return toy.tiny_llama(vocab, seed=seed, layers=layers, init_scale=init_scale, eos=eos, name=f"lab-tiny-{seed}")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared CPU two spinning threads
    made each run about 20 times slower (170 ms against 7.5 ms). Restored after this module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def pair():
    return tiny_llama(seed=1, layers=2), tiny_llama(seed=2, layers=1)


@pytest.fixture(scope="module")
def exact(pair):
    target, _ = pair
    return exact_distribution(target, PROMPT, K, SamplingConfig(1.0), min_prob=0.0)


def test_pair_is_far_apart(pair):
    target, draft = pair
    with torch.inference_mode():
        p = torch.softmax(target.model(torch.tensor([PROMPT])).logits[0, -1], -1)
        q = torch.softmax(draft.model(torch.tensor([PROMPT])).logits[0, -1], -1)
    beta = float(torch.minimum(p, q).sum())
    assert 0.05 < beta < 0.6, beta  # rejections are frequent but acceptances happen too


def test_exact_distribution_is_a_distribution(pair, exact):
    assert len(exact.outcomes) == 12**K  # min_prob = 0: every pair of tokens with p > 0 is listed
    assert sum(exact.probs) + exact.other_prob == pytest.approx(1.0, abs=1e-6)
    assert exact.probs == sorted(exact.probs, reverse=True)
    # pruning keeps the listed probabilities exact and moves the rest to "other"
    target, _ = pair
    pruned = exact_distribution(target, PROMPT, K, SamplingConfig(1.0), min_prob=0.02)
    full = dict(zip(exact.outcomes, exact.probs, strict=True))
    assert 0 < len(pruned.outcomes) < len(exact.outcomes)
    assert pruned.other_prob > 0
    for outcome, prob in zip(pruned.outcomes, pruned.probs, strict=True):
        assert prob >= 0.02
        assert prob == pytest.approx(full[outcome], rel=1e-5)
    assert sum(pruned.probs) + pruned.other_prob == pytest.approx(1.0, abs=1e-6)


def test_exact_rule_and_target_alone_are_not_rejected(pair, exact):
    target, draft = pair
    result = run_lab(PROMPT, target=target, draft=draft, rule="exact", k=K, n=N, gamma=GAMMA, seed=0, exact=exact)
    assert result.n_spec == result.n_target == N and not result.stopped
    assert sum(result.spec_counts) == sum(result.target_counts) == N
    assert result.spec_test.cells >= 5  # a real test, not one merged cell
    assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test
    assert result.target_test.p_value > ALPHA_LEVEL, result.target_test
    assert result.impossible_spec == result.impossible_target == 0


@pytest.mark.parametrize("rule", ["accept_if_equal", "resample_from_p"])
def test_wrong_rules_are_rejected(pair, exact, rule):
    from specviz.teaching.charts.lab import SIGNIFICANCE, rules_figure

    target, draft = pair
    result = run_lab(
        PROMPT, target=target, draft=draft, rule=rule, k=K, n=N, gamma=GAMMA, seed=0, exact=exact, with_target=False
    )
    assert result.target_test is None
    # Caught by many orders of magnitude below the page's level, not just below it.
    assert result.spec_test.p_value < SIGNIFICANCE * 1e-6, result.spec_test
    assert result.rule_label.startswith("WRONG")
    # The comparison chart draws it where its p-value is, named as the dropdown names it.
    assert result.rule_name == RULE_NAMES[rule]
    fig = rules_figure({rule: result.to_dict()}, WRONG_RULES)
    assert fig.layout.yaxis.type == "log"
    assert list(fig.data[0].y) == [result.spec_test.p_value]
    assert [x.replace("<br>", " ") for x in fig.data[0].x] == [html.escape(RULE_NAMES[rule])]


def test_no_bonus_changes_the_run_but_not_the_distribution(pair, exact):
    """The 'no_bonus' variant is slower, not wrong: see test_verify_exact for the proof.

    After all gamma drafts are accepted it drafts again instead of drawing the bonus from p; the
    next token is then verified with the exact rule and is distributed as p all the same. So the
    lab must NOT reject it, while its samples and its iteration count do differ from the exact rule.
    """
    target, draft = pair
    no_bonus = run_lab(
        PROMPT, target=target, draft=draft, rule="no_bonus", k=K, n=N, gamma=GAMMA, seed=0, exact=exact,
        with_target=False,
    )  # fmt: skip
    assert no_bonus.spec_test.p_value > ALPHA_LEVEL, no_bonus.spec_test
    # The bonus position is reached (first draft accepted), and skipping it costs iterations.
    iterations, outputs = {}, {}
    for rule in ("exact", "no_bonus"):
        runs = [
            speculative_generate(
                PROMPT, target=target, draft=draft, trace=False,
                options=DecodeOptions(gamma=GAMMA, seed=s, max_new_tokens=8, rule=rule),
            )
            for s in range(30)
        ]  # fmt: skip
        iterations[rule] = sum(r.summary["iterations"] for r in runs)
        outputs[rule] = [r.output_token_ids for r in runs]
        assert sum(r.summary["accepted"] for r in runs) > 0
    assert iterations["no_bonus"] > iterations["exact"]
    assert outputs["no_bonus"] != outputs["exact"]  # same seeds, different samples: the variant is live


def test_progress_and_early_stop(pair, exact):
    target, draft = pair
    calls = []
    result = run_lab(
        PROMPT, target=target, draft=draft, k=K, n=50, gamma=GAMMA, exact=exact,
        on_progress=lambda done, total: calls.append((done, total)),
        should_stop=lambda: len(calls) >= 7,
    )  # fmt: skip
    assert result.stopped
    assert calls == [(i, 100) for i in range(1, 8)]
    assert result.n_spec == 4 and result.n_target == 3
    assert sum(result.spec_counts) == 4 and sum(result.target_counts) == 3
    json.dumps(result.to_dict(), allow_nan=False)  # plain data all the way down, strict JSON


def test_marginal_of_the_first_token(pair, exact):
    target, draft = pair
    result = run_lab(PROMPT, target=target, draft=draft, k=K, n=20, gamma=GAMMA, exact=exact)
    first = marginal(result, 0)
    assert sum(first["exact"]) == pytest.approx(1.0, abs=1e-6)
    assert sum(first["spec_counts"]) == sum(first["target_counts"]) == 20
    with torch.inference_mode():
        p = torch.softmax(target.model(torch.tensor([PROMPT])).logits[0, -1], -1)
    for token, prob in zip(first["tokens"], first["exact"], strict=True):
        if token is not None:
            assert prob == pytest.approx(float(p[token]), abs=1e-5)
    with pytest.raises(ValueError):
        marginal(result, K)


def test_greedy_has_one_outcome_and_nothing_to_test(pair):
    target, draft = pair
    result = run_lab(PROMPT, target=target, draft=draft, k=K, n=5, gamma=GAMMA, temperature=0.0)
    assert result.exact[: len(result.outcomes)] == [1.0]
    assert result.spec_counts[0] == result.target_counts[0] == 5
    assert result.spec_test.p_value is None and result.spec_test.cells == 1


def test_end_of_sequence_ends_an_outcome_early():
    # Make the target's likeliest first token its end-of-sequence id, so short outcomes exist.
    target = tiny_llama(seed=1, layers=2)
    with torch.inference_mode():
        first = int(target.model(torch.tensor([PROMPT])).logits[0, -1].argmax())
    target.model.config.eos_token_id = first
    dist = exact_distribution(target, PROMPT, 3, SamplingConfig(1.0), min_prob=0.0)
    assert (first,) in dist.outcomes  # stops at end of sequence, like the decoder
    assert all(o[:-1].count(first) == 0 for o in dist.outcomes)
    assert sum(dist.probs) + dist.other_prob == pytest.approx(1.0, abs=1e-6)


def test_goodness_of_fit_merges_small_cells():
    # 4 big cells and many tiny ones: the tiny ones are pooled so every cell expects >= 5.
    probs = [0.3, 0.3, 0.2, 0.15] + [0.005] * 10
    counts = [30, 30, 20, 15] + [1, 0, 1, 0, 1, 1, 0, 0, 1, 0]
    result = goodness_of_fit(counts, probs)
    assert result.cells == 5 and result.dof == 4 and result.n == 100
    assert result.p_value > 0.5
    # a pool below 5 is folded into the smallest kept cell
    result = goodness_of_fit([50, 48, 2], [0.5, 0.48, 0.02])
    assert result.cells == 2
    # one observation of an impossible outcome refutes the hypothesis outright
    bad = goodness_of_fit([50, 49, 1], [0.5, 0.5, 0.0])
    assert bad.p_value == 0.0 and bad.statistic is None and bad.impossible == 1
    json.dumps(bad.__dict__, allow_nan=False)  # strict JSON: no Infinity
    g = goodness_of_fit([40, 40, 20], [0.6, 0.4, 0.0], method="g")
    assert g.method == "g" and g.p_value == 0.0
    g = goodness_of_fit([60, 40], [0.2, 0.8], method="g")
    assert g.method == "g" and g.p_value < 1e-3 and g.impossible == 0
    assert goodness_of_fit([0, 0], [0.5, 0.5]).p_value is None
    with pytest.raises(ValueError):
        goodness_of_fit([1, 2], [0.5, 0.5], method="ks")


def test_bad_arguments(pair):
    target, draft = pair
    with pytest.raises(ValueError):
        run_lab(PROMPT, target=target, draft=draft, rule="made_up", n=1)
    with pytest.raises(ValueError):
        run_lab(PROMPT, target=target, draft=draft, n=0)
    with pytest.raises(ValueError):
        exact_distribution(target, PROMPT, 0, SamplingConfig(1.0))


def test_a_rejected_control_is_called_a_false_alarm_not_denied():
    """The page's control (the target alone) got p = 0.0084 at the 0.01 level and the page still said
    sampling from p "should not be rejected". It must say plainly that this run was rejected by chance."""
    from specviz.teaching.charts.lab import SIGNIFICANCE, control_verdict

    rejected = goodness_of_fit([70, 30, 0], [0.5, 0.3, 0.2])
    assert rejected.p_value < SIGNIFICANCE
    level, text = control_verdict(asdict(rejected), 100, SIGNIFICANCE)
    assert level == "warning"
    assert "false alarm" in text and f"1 time in {round(1 / SIGNIFICANCE)}" in text and f"{SIGNIFICANCE:g}" in text
    assert "should not be rejected" not in text and "not rejected" not in text

    passed = goodness_of_fit([50, 30, 20], [0.5, 0.3, 0.2])
    level, text = control_verdict(asdict(passed), 100, SIGNIFICANCE)
    assert level == "caption" and f"not rejected at the {SIGNIFICANCE:g} level" in text and "false alarm" not in text
    assert control_verdict(None, 0, SIGNIFICANCE) is None  # no target-alone samples: nothing to say
    assert control_verdict(asdict(goodness_of_fit([5], [1.0])), 5, SIGNIFICANCE) is None  # one cell: no test


def test_cells_expecting_under_5_are_pooled_before_the_statistic():
    """The chi-square statistic is taken over the merged cells, computed here by hand: a pooling
    that kept the small cells, pooled the wrong ones or folded into another cell gives another number."""
    # Expected 40, 30, 20 stay; 4, 3, 2 and 1 pool into one cell expecting 10 (observed 5+2+3+1 = 11).
    result = goodness_of_fit([38, 33, 18, 5, 2, 3, 1], [0.4, 0.3, 0.2, 0.04, 0.03, 0.02, 0.01], simulations=0)
    assert (result.cells, result.dof) == (4, 3)
    assert result.statistic == pytest.approx(4 / 40 + 9 / 30 + 4 / 20 + 1 / 10)
    # A pool expecting 2 + 1 = 3 < 5 is folded into the smallest kept cell: [45, 50 + 3 + 2] against [50, 50].
    result = goodness_of_fit([45, 50, 3, 2], [0.5, 0.47, 0.02, 0.01], simulations=0)
    assert (result.cells, result.dof) == (2, 1)
    assert result.statistic == pytest.approx(25 / 50 + 25 / 50)
    # The simulated p-value tests the same merged cells: same statistic, same degrees of freedom.
    simulated = goodness_of_fit([45, 50, 3, 2], [0.5, 0.47, 0.02, 0.01])
    assert (simulated.statistic, simulated.dof, simulated.simulated) == (result.statistic, 1, lab_stats.SIMULATIONS)
    # ... and its p-value is the exact binomial tail, ties included: P(|X - 50| >= 5) for X ~ Bin(100, 1/2).
    tail = sum(math.comb(100, x) for x in range(101) if abs(x - 50) >= 5) / 2**100
    assert simulated.p_value == pytest.approx(tail, abs=0.005)


def test_the_test_rejects_a_correct_sampler_at_most_at_its_level():
    """Every outcome of 100 samples over three cells expecting 6, 6 and 88, with its exact multinomial
    probability: the false-alarm rate of the test, exactly. The chi-square curve alone rejects such
    correct samples far more often than its level says (cells that expect few counts); the lab's
    simulated p-value must not (scripts/lab_false_alarms.py measures the page's own test)."""
    from specviz.teaching.charts.lab import SIGNIFICANCE

    n, probs = 100, [0.06, 0.06, 0.88]
    rates = {"lab": {}, "curve": {}}
    for level in (0.01, SIGNIFICANCE):
        for name, sims in (("lab", lab_stats.SIMULATIONS), ("curve", 0)):
            rates[name][level] = math.fsum(
                math.exp(
                    math.lgamma(n + 1) - sum(math.lgamma(c + 1) for c in counts)
                    + sum(c * math.log(p) for c, p in zip(counts, probs, strict=True))
                )
                for a in range(n + 1)
                for b in range(n + 1 - a)
                if goodness_of_fit(counts := [a, b, n - a - b], probs, simulations=sims).p_value < level
            )  # fmt: skip
    for level in (0.01, SIGNIFICANCE):
        assert rates["lab"][level] <= level, rates
    assert rates["curve"][SIGNIFICANCE] > 1.5 * SIGNIFICANCE, rates  # what the simulation is there for


def test_block_verification_is_not_rejected(pair):
    """Block verification (specviz.decoding.block) on a chain of gamma = 2, the first k = 3 tokens
    counted: a draft, then a draft or the block residual after one kept (where it differs from the
    token rule), then the bonus. At gamma = 1 it would be the exact rule itself."""
    from specviz.teaching.charts.lab import rules_figure

    target, draft = pair
    exact3 = exact_distribution(target, PROMPT, 3, SamplingConfig(1.0), min_prob=0.0)
    result = run_lab(PROMPT, target=target, draft=draft, rule="block", k=3, n=N, gamma=2, seed=0, exact=exact3)
    assert result.spec_test.cells >= 5, result.spec_test
    assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test
    assert result.target_test.p_value > ALPHA_LEVEL, result.target_test
    assert result.impossible_spec == 0
    assert result.rule_name == RULE_NAMES["block"] and "block" not in WRONG_RULES
    fig = rules_figure({"block": result.to_dict()}, WRONG_RULES)
    assert list(fig.data[0].y) == [result.spec_test.p_value]  # drawn among the correct rules
