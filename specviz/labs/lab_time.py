"""How long a Distribution lab run takes and how far it is (no torch): the decodes that measure a
rule's tokens per iteration, what a toy run costs, and what the run's progress bar says.

The app's lab page (specviz_app/app_pages/lab.py) says the toy pair's duration before a run and
counts the time left during one; specviz.labs.lab.compare_rules does the sampling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

# Decodes used to measure tokens per iteration of a rule. 30 toy decodes of 16 tokens are about 380
# iterations: the mean is good to about ±0.02, well inside the 1.25 against 1.00 the page compares.
COST_RUNS = {"toy": 30, "sidebar": 6}
COST_TOKENS = {"toy": 16, "sidebar": 8}
# What a toy run costs in the app, as measured (one thread, a busy 2-core CPU; docs/benchmarks.md,
# "Figures once kept in code comments", "The lab"): nearly all of it the models' forward passes.
# Comparing all four rules took far longer than the page once promised, and fewer samples would
# weaken the tests, so the page says about how long it takes, and its bar counts down the time left.
TOY_MS = {"spec": 10.0, "target": 6.0, "cost": 1500.0}
TOY_LOAD_S = 10  # the first toy run of the app process also imports and builds the toy models
# The progress bar's words, str.format templates; the page passes its own, in the language on show
# (the catalogue's section "lab" has these keys in English and Chinese).
PROGRESS_WORDS = {
    "progress_rule": "Rule {rule_number} of {rules} ({rule}): {what}{left}",
    "progress_sample": "sample {sample} of {per}",
    "progress_measuring": "measuring tokens per iteration",
    "progress_left": " · about {seconds} s left",
}


def _rule_ms(n: int, first: bool) -> tuple[float, float]:
    """(sampling, measuring tokens per iteration) of one rule, in toy milliseconds; the first rule
    also samples the target alone."""
    return n * (TOY_MS["spec"] + (TOY_MS["target"] if first else 0.0)), TOY_MS["cost"]


def toy_seconds(n: int, rules: int) -> float:
    """About how long a toy run of `rules` rules at n samples takes (the target alone is sampled once)."""
    return sum(sum(_rule_ms(n, j == 0)) for j in range(rules)) / 1000


def share_done(n: int, rules: int, rule_index: int, done: int, total: int) -> float:
    """How much of a run is done when rule `rule_index` has drawn `done` of its `total` samples:
    the toy's costs weigh sampling against measuring tokens per iteration (any pair, roughly)."""
    before = sum(sum(_rule_ms(n, j == 0)) for j in range(rule_index))
    sampling, _ = _rule_ms(n, rule_index == 0)
    return (before + sampling * done / total) / (1000 * toy_seconds(n, rules))


def progress_text(
    n: int, rules: int, rule_index: int, rule: str, done: int, total: int, elapsed: float,
    say: Mapping[str, str] = PROGRESS_WORDS,
):  # fmt: skip
    """(share done, the progress bar's words) of a run of `rules` rules at n samples, `elapsed`
    seconds in, as compare_rules's on_progress(rule_index, rule, done, total) reports it; `say`: the
    words (PROGRESS_WORDS' keys), `rule` as it is to be shown."""
    # The first rule also samples the target alone, one after each speculative sample: count pairs.
    pairs = 2 if rule_index == 0 else 1
    sample, per = (done + pairs - 1) // pairs, total // pairs
    what = say["progress_measuring"] if done == total else say["progress_sample"].format(sample=sample, per=per)
    fraction = share_done(n, rules, rule_index, done, total)
    left = say["progress_left"].format(seconds=f"{elapsed * (1 - fraction) / fraction:.0f}") if fraction > 0.02 else ""
    return fraction, say["progress_rule"].format(
        rule_number=rule_index + 1, rules=rules, rule=rule, what=what, left=left
    )


def reporter(
    n: int, rules: int, show: Callable[[float, str], object], say: Mapping[str, str] = PROGRESS_WORDS,
    names: Mapping[str, str] | None = None,
) -> Callable[[int, str, int, int], None]:  # fmt: skip
    """compare_rules's on_progress for a run of `rules` rules at n samples, starting now: it passes
    show(share done, words) about 50 times per rule (in the app each one is a message to the browser).
    `say`: the words (PROGRESS_WORDS' keys); `names`: how each rule is shown (its code name if absent)."""
    started = time.monotonic()

    def on_progress(rule_index: int, rule: str, done: int, total: int) -> None:
        if done % max(1, total // 50) == 0 or done == total:
            shown = (names or {}).get(rule, rule)
            show(*progress_text(n, rules, rule_index, shown, done, total, time.monotonic() - started, say))

    return on_progress
