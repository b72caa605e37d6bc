"""The distribution-equivalence lab: does speculative decoding really sample from the target?

For one prompt (token ids) and one pair, the lab

1. samples the first k generated tokens n times with speculative decoding under a chosen rule
   (the exact rule, or one of the wrong variants in specviz.decoding.verify.RULES), and n times with the
   target alone;
2. computes the target's EXACT distribution over those k-token outcomes by forward passes through
   the target with the same sampling transform (specviz.engine.sampling.probabilities), expanding every
   prefix whose probability reaches `min_prob` and pooling the rest into one "other" cell;
3. compares each empirical distribution with the exact one by a chi-square (or G) test,
   after merging cells whose expected count is too small for the test to be valid, with a
   p-value simulated from the exact distribution (specviz.labs.lab_stats says why).

Everything it returns is plain data (ints, floats, lists), so the app can plot it and keep it in
session state. Sample i uses seed `seed + 2 i` for speculative decoding and `seed + 2 i + 1` for
the target alone: the two samplers are independent, and raising n keeps the earlier samples.
Samples are independent decodes, so on a target whose passes batch (specviz.serving.batching) up to
config.LAB_WORKERS of them decode at once, one thread each, every target pass serving all
of them (a CPU pass streams the weights once for all their rows): the same tokens as one at a time,
since the seeds fix them.

An outcome is the tuple of the first k output tokens; it is shorter when the text ends at an
end-of-sequence token before k tokens (the decoder stops there, and so does the enumeration).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import torch

from specviz import config
from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.decoding.verify import RULE_LABELS, RULE_NAMES, RULES
from specviz.engine.models import LoadedModel
from specviz.engine.sampling import probabilities
from specviz.labs.lab_stats import FitResult, goodness_of_fit
from specviz.serving.hooks import ServingHooks

FORWARD_BATCH = 64  # prefixes per target forward pass when enumerating the exact distribution

Outcome = tuple[int, ...]
Job = TypeVar("Job")
Sample = TypeVar("Sample")


@dataclass
class ExactDistribution:
    """The target's probability of every k-token outcome above `min_prob`, plus the rest pooled."""

    k: int
    outcomes: list[Outcome]  # most likely first
    probs: list[float]  # probs[i] = P_target(outcomes[i])
    other_prob: float  # total probability of every outcome not listed (pruned below min_prob)
    min_prob: float
    forward_passes: int  # target forward passes (of batched prefixes) the enumeration took

    def index(self) -> dict[Outcome, int]:
        return {o: i for i, o in enumerate(self.outcomes)}


@dataclass
class LabResult:
    """Counts per outcome for both samplers, the exact probabilities, and both tests.

    The cells are `outcomes` followed by one "other" cell (index len(outcomes)): parallel lists
    `exact`, `spec_counts` and `target_counts` have len(outcomes) + 1 entries.
    """

    rule: str
    rule_label: str  # what the rule does (specviz.decoding.verify.RULE_LABELS)
    k: int
    gamma: int
    sampling: dict[str, Any]  # temperature, top_k, top_p
    seed: int
    n_requested: int
    outcomes: list[list[int]]
    exact: list[float]
    spec_counts: list[int]
    target_counts: list[int]
    n_spec: int  # samples actually drawn (fewer than n_requested when stopped early)
    n_target: int
    spec_test: FitResult
    target_test: FitResult | None  # None when the target-alone sampler was not run
    stopped: bool
    impossible_spec: int  # speculative samples whose outcome has exact probability 0 (a sure sign of a bug)
    impossible_target: int
    min_prob: float
    rule_name: str = ""  # the rule in a few words, as the page's dropdown names it (specviz.decoding.verify.RULE_NAMES)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----- the exact distribution ------------------------------------------------------------------


def exact_distribution(
    target: LoadedModel,
    prompt_ids: Sequence[int],
    k: int,
    sampling: SamplingConfig,
    min_prob: float = 1e-4,
) -> ExactDistribution:
    """P_target over the first k generated tokens, by expanding prefixes breadth first.

    At each depth every live prefix is fed through the target (batched, no cache: these are short
    one-off passes) and its next-token probabilities come from the same `probabilities` the
    decoder uses. A prefix whose probability falls below `min_prob` is not expanded: its mass goes
    to `other_prob`, so the listed probabilities stay exact and the cells still sum to one.
    At most 1 / min_prob prefixes are alive at any depth, which bounds the cost on a real vocabulary.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1; got {k!r}.")
    if not 0 <= min_prob < 1:
        raise ValueError(f"min_prob must be in [0, 1); got {min_prob!r}.")
    eos = target.eos_token_id
    device = torch.device(target.device)
    prompt = torch.tensor(list(prompt_ids), dtype=torch.long, device=device)
    # Only the last position's logits are needed; on a real vocabulary the full [B, L, V] would
    # cost hundreds of MB per batch.
    only_last = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(target.model.forward).parameters else {}
    frontier: list[tuple[Outcome, float]] = [((), 1.0)]
    finished: dict[Outcome, float] = {}
    other = 0.0
    passes = 0
    with torch.inference_mode():
        for depth in range(k):
            next_frontier: list[tuple[Outcome, float]] = []
            for start in range(0, len(frontier), FORWARD_BATCH):
                chunk = frontier[start : start + FORWARD_BATCH]
                rows = [
                    torch.cat([prompt, torch.tensor(prefix, dtype=torch.long, device=device)]) for prefix, _ in chunk
                ]
                logits = target.model(torch.stack(rows), **only_last).logits[:, -1, : target.vocab_size]  # [B, V]
                passes += 1
                next_probs = probabilities(logits, sampling).double().cpu()  # [B, V]
                for (prefix, prefix_prob), row in zip(chunk, next_probs, strict=True):
                    joint = prefix_prob * row  # [V] P(prefix + x)
                    keep = joint >= max(min_prob, 1e-300)  # never list zero-probability outcomes
                    other += float(joint[~keep].sum())
                    for x in keep.nonzero()[:, 0].tolist():
                        outcome = prefix + (x,)
                        if depth == k - 1 or x == eos:  # the decoder stops at end of sequence
                            finished[outcome] = float(joint[x])
                        else:
                            next_frontier.append((outcome, float(joint[x])))
            frontier = next_frontier
    ordered = sorted(finished.items(), key=lambda item: -item[1])
    return ExactDistribution(
        k=k,
        outcomes=[o for o, _ in ordered],
        probs=[p for _, p in ordered],
        other_prob=max(0.0, other),
        min_prob=min_prob,
        forward_passes=passes,
    )


# ----- the experiment --------------------------------------------------------------------------


def run_lab(
    prompt_ids: Sequence[int],
    *,
    target: LoadedModel,
    draft: Any,
    rule: str = "exact",
    k: int = 2,
    n: int = 1000,
    gamma: int = 2,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    min_prob: float = 1e-4,
    method: str = "chi2",
    with_target: bool = True,
    exact: ExactDistribution | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    tree: bool | str = True,
) -> LabResult:
    """Sample the first k tokens n times each way and test both samplers against the exact p.

    `draft` is what speculative_generate accepts: a LoadedModel, a Drafter, or a name.
    Speculative runs ask for max(k, gamma + 2) tokens and only the first k are counted. Why: the
    decoder drafts at most (tokens still to go) - 1 per iteration, so gamma + 1 lets the first
    iteration draft a full gamma, and one more lets the token after gamma accepted drafts be a
    real draft-and-verify step under the no-bonus variant (rather than a plain target step, which
    would make it sample-for-sample identical to the exact rule). Choose k > gamma so that the
    bonus position is among the counted tokens.
    on_progress(done, total) is called after every sample; should_stop() is checked before each
    one, and a stopped run returns what it has.
    Pass `exact` (from exact_distribution) to reuse one enumeration across rules; tree: DecodeOptions.tree.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}; got {rule!r}.")
    if n < 1:
        raise ValueError(f"n must be at least 1; got {n!r}.")
    sampling = SamplingConfig(temperature, top_k, top_p)
    prompt_ids = list(prompt_ids)
    if exact is None:
        exact = exact_distribution(target, prompt_ids, k, sampling, min_prob)
    elif exact.k != k:
        raise ValueError(f"The exact distribution is over {exact.k} tokens but k is {k}.")
    tally = _Tally(exact, k)
    workers = sample_workers(target, draft)
    draw = functools.partial(
        _draw_job, prompt_ids=prompt_ids, target=target, draft=draft, rule=rule, k=k, gamma=gamma, sampling=sampling,
        seed=seed, batched=workers > 1, tree=tree,
    )  # fmt: skip
    kinds = ("spec", "target") if with_target else ("spec",)
    jobs = [(which, i) for i in range(n) for which in kinds]

    def record(sample: tuple[str, list[int]]) -> None:
        done = tally.add(sample)
        if on_progress is not None:
            on_progress(done, len(jobs))

    stopped = draw_in_parallel(jobs, draw, workers, should_stop, record)
    return tally.result(rule, gamma, sampling, seed, n, method, with_target, stopped)


def _draw_job(job: tuple[str, int], **settings) -> tuple[str, list[int]]:
    """One sample: job ("spec" or "target", i) -> (the same kind, its output token ids)."""
    which, i = job
    return which, draw_sample(which, i, **settings)


class _Tally:
    """A lab run's counts: each sampler's samples over the exact distribution's cells (its outcomes,
    then "other"), as they come in, and the run's result from them."""

    def __init__(self, exact: ExactDistribution, k: int):
        self.exact, self.k, self.index = exact, k, exact.index()
        self.other_cell = len(exact.outcomes)
        self.cell_probs = exact.probs + [exact.other_prob]
        self.counts = {"spec": [0] * (self.other_cell + 1), "target": [0] * (self.other_cell + 1)}
        self.drawn = {"spec": 0, "target": 0}
        self.impossible = {"spec": 0, "target": 0}

    def add(self, sample: tuple[str, list[int]]) -> int:
        """Count one (kind, output ids) sample -> how many both samplers have drawn so far."""
        which, output = sample
        cell = self.index.get(tuple(output[: self.k]), self.other_cell)
        self.counts[which][cell] += 1
        self.drawn[which] += 1
        if self.cell_probs[cell] == 0:
            self.impossible[which] += 1
        return self.drawn["spec"] + self.drawn["target"]

    def result(self, rule, gamma, sampling: SamplingConfig, seed, n, method, with_target, stopped) -> LabResult:
        """The counts tested against the exact probabilities, with the settings that drew them."""
        spec_counts, target_counts = self.counts["spec"], self.counts["target"]
        return LabResult(
            rule=rule,
            rule_label=RULE_LABELS[rule],
            rule_name=RULE_NAMES[rule],
            k=self.k,
            gamma=gamma,
            sampling={"temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p},
            seed=seed,
            n_requested=n,
            outcomes=[list(o) for o in self.exact.outcomes],
            exact=self.cell_probs,
            spec_counts=spec_counts,
            target_counts=target_counts,
            n_spec=self.drawn["spec"],
            n_target=self.drawn["target"],
            spec_test=goodness_of_fit(spec_counts, self.cell_probs, method),
            target_test=goodness_of_fit(target_counts, self.cell_probs, method) if with_target else None,
            stopped=stopped,
            impossible_spec=self.impossible["spec"],
            impossible_target=self.impossible["target"],
            min_prob=self.exact.min_prob,
            extra={"forward_passes": self.exact.forward_passes},
        )


def draw_sample(
    which: str,
    i: int,
    prompt_ids: list[int],
    *,
    target: LoadedModel,
    draft: Any,
    rule: str,
    k: int,
    gamma: int,
    sampling: SamplingConfig,
    seed: int,
    batched: bool = False,
    tree: bool | str = True,
) -> list[int]:
    """The output token ids of a lab run's sample i: "spec" (speculative decoding under `rule`, seed
    seed + 2 i) or "target" (the target alone, the control, seed seed + 2 i + 1). One home for the
    seeds, so that scripts/lab_false_alarms.py draws exactly the samples the page draws."""
    sampled = {"temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p}
    common = {"target": target, "trace": False, "hooks": ServingHooks(batched=batched)}
    if which == "spec":
        length = max(k, gamma + 2)
        options = DecodeOptions(gamma=gamma, seed=seed + 2 * i, max_new_tokens=length, rule=rule, tree=tree, **sampled)
        run = speculative_generate(prompt_ids, draft=draft, options=options, **common)
    elif which == "target":
        options = DecodeOptions(seed=seed + 2 * i + 1, max_new_tokens=k, **sampled)
        run = autoregressive_generate(prompt_ids, options=options, **common)
    else:
        raise ValueError(f"which must be 'spec' or 'target'; got {which!r}.")
    return run.output_token_ids


def sample_workers(target: LoadedModel, draft: Any) -> int:
    """How many of the lab's samples decode at once: config.LAB_WORKERS when the target's
    passes can batch (a lean target, specviz.serving.batching), so that every pass serves that many
    samples; 1 otherwise, and for a ready-made Drafter, whose state belongs to one decode."""
    from specviz.drafters import resolve_drafter
    from specviz.serving.batching import batcher_for

    if batcher_for(target) is None or not (draft is None or isinstance(draft, str | LoadedModel)):
        return 1
    resolve_drafter(draft, target)  # load a named draft once, here, rather than in every thread at once
    return config.LAB_WORKERS


def draw_in_parallel(
    jobs: list[Job],
    draw: Callable[[Job], Sample],
    workers: int,
    should_stop: Callable[[], bool] | None,
    record: Callable[[Sample], None],
) -> bool:
    """draw(job) for every job, up to `workers` at a time, each in a thread of its own (batched
    decodes share their target passes); record(sample) runs in the calling thread as each
    finishes, in whatever order they finish (the lab only counts). should_stop() is checked before
    each job starts; the started ones finish and are recorded. True when it stopped early."""
    stopped, started = False, 0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="specviz-lab") as pool:
        running: set[Future] = set()
        while True:
            while not stopped and started < len(jobs) and len(running) < workers:
                stopped = should_stop is not None and should_stop()
                if not stopped:
                    running.add(pool.submit(draw, jobs[started]))
                    started += 1
            if not running:
                return stopped
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                record(future.result())


def marginal(result: LabResult, position: int = 0) -> dict[str, list]:
    """Collapse a LabResult to the distribution of one token position (0 = the first token).

    Returns parallel lists: tokens (token id, or None for the "other" cell and for outcomes that
    ended before `position`), exact, spec_counts, target_counts. Handy for a bar chart when the
    joint has too many cells to show.
    """
    if not 0 <= position < result.k:
        raise ValueError(f"position must be in 0..{result.k - 1}; got {position!r}.")
    keys: list[int | None] = []
    rows: dict[int | None, list] = {}
    cells = [*result.outcomes, None]  # the last cell is "other"
    for cell, p, s, t in zip(cells, result.exact, result.spec_counts, result.target_counts, strict=True):
        key = cell[position] if cell is not None and position < len(cell) else None
        if key not in rows:
            keys.append(key)
            rows[key] = [0.0, 0, 0]
        rows[key][0] += p
        rows[key][1] += s
        rows[key][2] += t
    return {
        "tokens": keys,
        "exact": [rows[key][0] for key in keys],
        "spec_counts": [rows[key][1] for key in keys],
        "target_counts": [rows[key][2] for key in keys],
    }


def tokens_per_iteration(
    prompt_ids, *, target, draft, rule: str, gamma: int, temperature: float, seed: int, runs: int, tokens: int
) -> float:
    """Mean tokens emitted per iteration under a rule over `runs` short decodes: what a rule costs."""
    emitted = iterations = 0
    for i in range(runs):
        run = speculative_generate(
            list(prompt_ids),
            target=target,
            draft=draft,
            trace=False,
            options=DecodeOptions(
                gamma=gamma, temperature=temperature, seed=seed + 10_000 + i, max_new_tokens=tokens, rule=rule
            ),
        )
        emitted += run.summary["new_tokens"]
        iterations += run.summary["iterations"]
    return emitted / max(iterations, 1)


def compare_rules(
    prompt_ids: Sequence[int],
    *,
    target: LoadedModel,
    draft: Any,
    rules: Sequence[str],
    k: int,
    n: int,
    gamma: int,
    temperature: float,
    seed: int,
    cost_runs: int,
    cost_tokens: int,
    on_progress: Callable[[int, str, int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[dict[str, dict], dict[str, float]]:
    """The lab's whole run: every rule tested against one exact distribution, the target-alone
    samples drawn once and shared, and each rule's tokens per iteration.

    Returns ({rule: LabResult.to_dict()}, {rule: tokens per iteration}); stops after the rule
    during which should_stop() became true. on_progress(rule_index, rule, done, total)."""
    exact = exact_distribution(target, prompt_ids, k, SamplingConfig(temperature, None, None))
    results: dict[str, dict] = {}
    costs: dict[str, float] = {}
    for j, rule in enumerate(rules):
        progress = (lambda done, total, j=j, rule=rule: on_progress(j, rule, done, total)) if on_progress else None
        result = run_lab(
            prompt_ids, target=target, draft=draft, rule=rule, k=k, n=n, gamma=gamma, temperature=temperature,
            seed=seed, exact=exact, with_target=j == 0, on_progress=progress, should_stop=should_stop,
        ).to_dict()  # fmt: skip
        if j > 0:  # the target-alone samples do not depend on the rule: share the first ones
            first = results[rules[0]]
            for key in ("target_counts", "n_target", "target_test", "impossible_target"):
                result[key] = first[key]
        results[rule] = result
        if result["stopped"]:
            break
        costs[rule] = tokens_per_iteration(
            prompt_ids, target=target, draft=draft, rule=rule, gamma=gamma, temperature=temperature, seed=seed,
            runs=cost_runs, tokens=cost_tokens,
        )  # fmt: skip
    return results, costs
