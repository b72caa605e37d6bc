"""The Distribution lab's duration and progress words (specviz.labs.lab_time): what the page says
before a toy run and what its bar says during one."""

from __future__ import annotations

import pytest

from specviz.labs import lab_time


def test_four_rules_take_longer_than_one_and_the_target_alone_is_sampled_once():
    one, four = lab_time.toy_seconds(500, 1), lab_time.toy_seconds(500, 4)
    spec, target, cost = (lab_time.TOY_MS[k] for k in ("spec", "target", "cost"))
    assert one == pytest.approx((500 * (spec + target) + cost) / 1000)
    assert four == pytest.approx(one + 3 * (500 * spec + cost) / 1000)


def test_the_reporter_counts_samples_in_pairs_for_the_first_rule_and_thins_its_updates():
    shown: list[tuple[float, str]] = []
    report = lab_time.reporter(100, 2, lambda share, words: shown.append((share, words)))
    for done in range(1, 201):  # the first rule: 100 speculative and 100 target-alone samples
        report(0, "exact", done, 200)
    for done in range(1, 101):
        report(1, "no_bonus", done, 100)
    assert 90 <= len(shown) <= 110  # about 50 per rule, each one a message to the browser
    shares = [share for share, _ in shown]
    assert shares == sorted(shares) and 0 < shares[0] and shares[-1] < 1  # the last rule's cost decodes remain
    assert shown[0][1].startswith("Rule 1 of 2 (exact): sample 2 of 100")
    assert shown[-1][1].startswith("Rule 2 of 2 (no_bonus): measuring tokens per iteration")
