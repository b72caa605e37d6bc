"""The measured speedup of a run and its spread, and the cost numbers c and v: one home for each.

A speedup is tokens/s of speculative decoding ÷ tokens/s of the target alone on the same
settings. One short run timed once is mostly noise on a shared CPU (three identical runs gave
speedups far apart: docs/benchmarks.md, "Figures once kept in code comments", "The speedup's
pairs"), so the app times *pairs*: the speculative run and the target alone
back to back, in alternating order, several times. Both halves of a pair meet the same machine
state, so the ratio within a pair is steadier than either time.

Every speed number a page shows comes from one set of pairs, `figure_pairs` (the run's own first
pair included, unless it was batched): the speedup is the *median pair*'s ratio (of an even count,
the slower of the two middle ones, so that it is always one real pair's), both tokens/s are that
same pair's two runs (so speedup = speculative tok/s ÷ target-only tok/s), the range is the lowest
and highest pair's ratio, and the count is how many pairs that is: the count the timing line
counts to (`timing_progress`). When the range reaches further than SURE_WITHIN either side of the
median, the figure is less sure than that and the pages say so (`Spread.sure`).

A trace keeps its pairs in `extra.timing.pairs` (each with the numbers below for both runs); a
trace without them has one pair: its own summary and its baseline's.

c and v (specviz.teaching.glossary.C, VERIFY_COST) are both in units of one single-token step of the target
alone, so the paper's cost model reads: an iteration costs γc + v target steps.

    c   the draft's time per drafted token ÷ the target alone's time per step
    v   the target's time per verification pass ÷ the target alone's time per step (1 in the paper)

Each is the median over the pairs, so the same run gives the same c and v on every page, in the
bench and in the exports. No torch here: the charts and the theory read it.

Batched timings never count. A run decoded batched with other sessions (specviz.serving.batching:
config.batched, and a pass it shared, extra.batch.most_sessions > 1; `was_batched`) spent part of
each verify phase waiting for their drafting and shared its passes, so its wall time is no solo
run's. A pair with a batched run is marked "batched" and left out of every figure and every count:
`extra.timing.wanted` is the solo pairs a run wants (counted_pairs), so a batched first pair (the app's own run,
when another session's shared it) does not take the place of one. A run with no solo pair has no
speedup, c or v yet (`why_no_speedup` says so), until one is timed on the same settings.

A disturbed pair does not count either, while undisturbed ones are enough. The app times its pairs
in the server that also draws the pages, and a page drawn there while a pair ran (any script run,
even the timing line's own poll) stalled whichever half it fell in, pulling its speedup down or up
from what identical runs read (docs/benchmarks.md, "Figures once kept in code comments", "The
speedup's pairs"). The app marks them `disturbed`; they take no place in
`wanted` and none in the figures, unless no undisturbed solo pair is in at all. The app times a
disturbed pair again, as many times at most as the run wants pairs; when those retries are spent
(a busy machine, where a pair takes longer than the pages' poll), `keep_disturbed` counts the
disturbed pairs it has, earliest first (marked `kept`), so the run still ends with the pairs it
said it wanted and the count on the page is the count the timing line counted to.

The run's own first pair is "streamed" (the page drew its tokens as they came) and counts like any
other: leaving it out made the tokens/s beside the speedup come from a pair outside its range, and
the timing line count to one pair more than the result showed (issue 35). Among several pairs the
median shrugs off one slow pair.
"""

from __future__ import annotations

import gc
import math
import statistics
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from specviz.config import SPEEDUP_MAX_PAIRS, SPEEDUP_MIN_PAIRS, SPEEDUP_TIMED_SECONDS

# How close identical runs' speedups should agree (issue 24's trust goal: ±10% of their median). A
# run whose pairs reach further than this from their median is "not sure" to that: the pages say so.
SURE_WITHIN = 0.10

# What a pair keeps of each run's summary: enough for its speedup, c and v.
PAIR_FIELDS = ("new_tokens", "wall_ms", "iterations", "drafted", "draft_ms", "verify_ms")
SPECULATIVE_FIRST, TARGET_FIRST = "speculative first", "target alone first"


@dataclass(frozen=True)
class Spread:
    """The median pair's speedup and both its tokens/s, the range of all the pairs, and their count.

    speculative_tok_s ÷ target_tok_s is the median exactly: all three come from the median pair."""

    median: float  # the median pair's speedup (of an even count, the slower middle pair's)
    low: float
    high: float
    pairs: int  # the pairs these figures come from
    wanted: int  # pairs the run will have when its timing is complete
    timed: int = 0  # pairs that count (counted_pairs) timed so far, a streamed first one included (0: as pairs)
    speculative_tok_s: float = 0.0  # the median pair's speculative run: its tokens ÷ its wall time
    target_tok_s: float = 0.0  # the median pair's target alone
    speculative_tokens: int = 0  # the median pair's runs' tokens and wall times, for the tooltips
    speculative_ms: float = 0.0
    target_tokens: int = 0
    target_ms: float = 0.0
    # Some pair the figures come from ran while a page was drawn in the same process (a busy server:
    # its retries spent, keep_disturbed counted it): the figures were measured under load.
    under_load: bool = False

    @property
    def complete(self) -> bool:
        return max(self.timed, self.pairs) >= self.wanted

    @property
    def sure(self) -> bool:
        """Whether every pair is within SURE_WITHIN of the median (one pair: no spread to judge by)."""
        return self.low >= self.median * (1 - SURE_WITHIN) and self.high <= self.median * (1 + SURE_WITHIN)

    def text(self) -> str:
        """'1.31× (1.22–1.38 over 5 pairs)'; one pair has no range to show."""
        if self.pairs == 1:
            return f"{self.median:.2f}× (one pair)"
        return f"{self.median:.2f}× ({self.low:.2f}–{self.high:.2f} over {self.pairs} pairs)"


@dataclass(frozen=True)
class Costs:
    """c and v of one run (median over its pairs) and the target alone's step they are measured in."""

    step_ms: float  # the target alone's time per single-token step
    c: float | None  # None: the run drafted nothing
    v: float | None  # None: the run verified nothing
    iteration: float | None  # a whole speculative iteration (drafting, verifying, the rest), in steps
    alone_token: float | None  # the target alone's wall time per token (its step and its loop), in steps


def pair_record(
    speculative: dict,
    target_alone: dict,
    order: str,
    traced: bool,
    streamed: bool = False,
    batched: bool = False,
    disturbed: bool = False,
) -> dict[str, Any]:
    """One timed pair as a trace keeps it, from the two runs' summaries. `streamed`: the two ran
    while a page drew their tokens as they came (the app's own run: its first pair). `batched`:
    either run shared its passes with other sessions (figures never use it). `disturbed`: a page was
    drawn in the same process while the pair ran (see the module's docstring)."""
    return {
        "order": order,
        "traced": traced,
        "streamed": streamed,
        "batched": batched,
        "disturbed": disturbed,
        "speculative": {k: speculative.get(k) for k in PAIR_FIELDS},
        "target_alone": {k: target_alone.get(k) for k in PAIR_FIELDS},
    }


def order_of_pair(index: int) -> str:
    """Pairs alternate which run goes first, so a drift of the machine does not favour one side."""
    return SPECULATIVE_FIRST if index % 2 == 0 else TARGET_FIRST


def start_timing(
    trace: Any, baseline: Any, streamed: bool = False, timed_seconds: float = SPEEDUP_TIMED_SECONDS
) -> dict[str, Any]:
    """Make a run and its baseline the first timed pair of the run; returns trace.extra["timing"],
    whose "wanted" says how many solo pairs it should have in all (pairs_wanted; a batched pair
    never counts, so a batched run still gets that many solo ones). `streamed`: the run drew its
    tokens on a page as it went (see figure_pairs)."""
    traced = bool(trace.config.get("traced", True))
    batched = was_batched(trace, baseline)
    first = pair_record(trace.summary, baseline.summary, SPECULATIVE_FIRST, traced, streamed, batched)
    seconds = (trace.summary["wall_ms"] + baseline.summary["wall_ms"]) / 1000
    trace.extra["timing"] = {"pairs": [first], "wanted": pairs_wanted(seconds, timed_seconds)}
    return trace.extra["timing"]


def time_pair(
    run_speculative: Callable[[], Any],
    run_target_alone: Callable[[], Any],
    index: int,
    traced: bool,
    disturbed: Callable[[], bool] = lambda: False,
):
    """Time pair number `index` (0-based): run both (each a call returning its Trace; `traced`
    says whether they record a full trace), in the order order_of_pair gives; return its record.
    `disturbed`, asked once both have run: whether something stalled them meanwhile (the app's pages)."""
    with _no_garbage_collection():
        if order_of_pair(index) == SPECULATIVE_FIRST:
            spec = run_speculative()
            base = run_target_alone()
        else:
            base = run_target_alone()
            spec = run_speculative()
    batched = was_batched(spec, base)
    return pair_record(spec.summary, base.summary, order_of_pair(index), traced, batched=batched, disturbed=disturbed())


def was_batched(*runs: Any) -> bool:
    """Whether any of these traces decoded batched with other sessions: config.batched, and a pass
    shared with another decode (extra.batch.most_sessions above 1; unknown counts as shared).

    A decode that asked to batch and met nobody (most_sessions 1) is timed as a solo run: each of
    its passes was LeanLlama.forward's own computation (a forward_many of one request), and it never
    waited for another decode, since a decode that waits for another's work always has its request
    swept into that one's pass (specviz.serving.batching). So the app's runs, all decoded batched=True, keep
    their own first pair on a quiet server, and lose it only when another session really shared it."""
    return any(run.config.get("batched") and _most_sessions(run) > 1 for run in runs)


def _most_sessions(run: Any) -> int:
    """The most decodes one of a batched run's passes served (2 when not recorded: assume shared)."""
    return int((run.extra.get("batch") or {}).get("most_sessions", 2))


@contextmanager
def _no_garbage_collection():
    """timeit's rule: no garbage collection during a timing. A full collection with the models
    loaded is long beside a short run, and it fell inside one run of a pair or the other at random
    (docs/benchmarks.md, "Figures once kept in code comments", "The speedup's pairs"). None is forced
    before the pair either: with collection off while both runs go, one there would only add its
    cost to every pair of every run (docs/benchmarks.md, "The test suite's time")."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def pairs_wanted(first_pair_seconds: float, timed_seconds: float = SPEEDUP_TIMED_SECONDS) -> int:
    """How many pairs a run gets: enough that short runs have `timed_seconds` of timing in all
    (their single timings are the noisiest), between SPEEDUP_MIN_PAIRS and SPEEDUP_MAX_PAIRS.
    timed_seconds 0 asks for no timing beyond the run itself: its own pair is all it gets (a server
    whose CPU is wanted elsewhere; the pages then say the speedup is from one pair), or one solo pair
    when its own was batched and so does not count."""
    if timed_seconds == 0:
        return 1
    if first_pair_seconds <= 0:
        return SPEEDUP_MAX_PAIRS
    wanted = math.ceil(timed_seconds / first_pair_seconds)
    return max(SPEEDUP_MIN_PAIRS, min(SPEEDUP_MAX_PAIRS, wanted))


def timed_pairs(trace: Any, baseline: Any) -> list[dict]:
    """The pairs of a run: those in trace.extra.timing, else the one its summaries make."""
    if baseline is None or baseline is trace or trace.mode != "speculative":
        return []
    pairs = (trace.extra.get("timing") or {}).get("pairs") or []
    if pairs:
        return pairs
    traced = bool(trace.config.get("traced", True))
    return [
        pair_record(trace.summary, baseline.summary, SPECULATIVE_FIRST, traced, batched=was_batched(trace, baseline))
    ]


def solo_pairs(pairs: list[dict]) -> list[dict]:
    """The pairs whose runs decoded alone (a batched pair's times are no solo run's)."""
    return [p for p in pairs if not p.get("batched")]


def counted_pairs(pairs: list[dict]) -> list[dict]:
    """The pairs that count towards a run's `wanted`: solo and not disturbed (or kept although
    disturbed, keep_disturbed)."""
    return [p for p in solo_pairs(pairs) if not p.get("disturbed") or p.get("kept")]


def keep_disturbed(timing: dict) -> None:
    """When a run's retries of disturbed pairs are spent: mark its disturbed solo pairs `kept`,
    earliest first, until its counted pairs reach `wanted` (or none are left), so the figures and
    their count are the pairs the timing line promised. Their spread shows in the range."""
    missing = timing["wanted"] - len(counted_pairs(timing["pairs"]))
    for pair in solo_pairs(timing["pairs"]):
        if missing <= 0:
            return
        if pair.get("disturbed") and not pair.get("kept"):
            pair["kept"] = True
            missing -= 1


def timing_progress(trace: Any) -> tuple[int, int] | None:
    """(pairs in that count, pairs wanted) of a run whose timing was started, else None. When the
    timing is over, wanted is what came in (background.TimingPairs, trace_store), so the count
    reaches the N that the figures' count shows."""
    timing = trace.extra.get("timing") or {}
    if "pairs" not in timing:
        return None
    timed = len(counted_pairs(timing["pairs"]))
    return timed, max(timing.get("wanted") or 0, timed)


def figure_pairs(pairs: list[dict]) -> list[dict]:
    """The pairs every speed number of a run comes from (the speedup, both tokens/s, the range and
    the count): the pairs that count (counted_pairs), the run's own streamed first pair included, so
    the count is the one the timing line counts to. Never a batched pair: its runs shared their
    passes with other sessions, so their times are no solo run's. A disturbed pair ran while a page
    was drawn, which slowed its two runs unevenly: only when no other solo pair is in do the figures
    fall back on it. The trace keeps every pair."""
    return counted_pairs(pairs) or solo_pairs(pairs)


def pair_speedup(pair: dict) -> float | None:
    """tokens/s of the speculative run ÷ tokens/s of the target alone, within one pair."""
    spec, base = pair["speculative"], pair["target_alone"]
    if not spec.get("wall_ms") or not base.get("wall_ms") or not base.get("new_tokens"):
        return None
    return ((spec.get("new_tokens") or 0) / spec["wall_ms"]) / (base["new_tokens"] / base["wall_ms"])


def speedup_spread(trace: Any, baseline: Any) -> Spread | None:
    """The run's measured speedup: median, range and count over its figure pairs (None: no
    baseline, or only batched timings so far; why_no_speedup says which)."""
    wanted = (trace.extra.get("timing") or {}).get("wanted") if trace.mode == "speculative" else None
    pairs = list(timed_pairs(trace, baseline))  # one snapshot: the timing thread appends as it goes
    figures = figure_pairs(pairs)
    spread = spread_of_pairs(figures, wanted)
    if spread is None:
        return None
    loaded = any(p.get("disturbed") for p in figures)
    return replace(spread, timed=len(counted_pairs(pairs)), under_load=loaded)


def speedup(trace: Any, baseline: Any) -> float | None:
    """The speedup every page shows: the median of speedup_spread (None: no usable solo timing)."""
    spread = speedup_spread(trace, baseline)
    return None if spread is None else spread.median


NO_BASELINE = "no baseline recorded: run the target alone on the same settings"
ONLY_BATCHED = (
    "not available yet: this run was timed only while its target passes were batched with other "
    "sessions', which says nothing of a solo run's speed; a solo timing on the same settings gives it"
)


def why_no_speedup(trace: Any, baseline: Any) -> str | None:
    """Why a run has no speedup, in words a page shows beside "n/a"; None when it has one."""
    if speedup_spread(trace, baseline) is not None:
        return None
    pairs = timed_pairs(trace, baseline)
    if pairs and all(p.get("batched") for p in pairs):
        return ONLY_BATCHED
    return NO_BASELINE


def measured_costs(trace: Any, baseline: Any) -> Costs | None:
    """c and v of a run against its target alone (median over its figure pairs); None without a baseline."""
    return costs_of_pairs(figure_pairs(timed_pairs(trace, baseline)))


def spread_of_pairs(pairs: list[dict], wanted: int | None = None) -> Spread | None:
    """The median pair (its speedup and both its tokens/s), the range and the count of the pairs'
    speedups; `wanted`: the pairs there will be in all. The median pair of an even count is the
    slower of the two middle ones (statistics.median_low): a pair that was really timed, so its
    tokens/s divide to the speedup shown."""
    rated = sorted(((r, p) for p in pairs if (r := pair_speedup(p)) is not None), key=lambda rp: rp[0])
    if not rated:
        return None
    count = len(rated)
    ratio, middle = rated[(count - 1) // 2]
    spec, base = middle["speculative"], middle["target_alone"]
    return Spread(
        ratio, rated[0][0], rated[-1][0], count, max(wanted or 0, count), count,
        speculative_tok_s=tokens_per_s(spec), target_tok_s=tokens_per_s(base),
        speculative_tokens=int(spec.get("new_tokens") or 0), speculative_ms=float(spec["wall_ms"]),
        target_tokens=int(base["new_tokens"]), target_ms=float(base["wall_ms"]),
    )  # fmt: skip


def tokens_per_s(run: dict) -> float:
    """A pair's run's tokens per second (as trace.summarize computes a run's tokens_per_s)."""
    wall_ms = run.get("wall_ms") or 0.0
    return (run.get("new_tokens") or 0) / (wall_ms / 1e3) if wall_ms > 0 else 0.0


def costs_of_pairs(pairs: list[dict]) -> Costs | None:
    """c, v and the rest of Costs from timed pairs (median over them); None without a target step."""
    pairs = [p for p in pairs if _per(p["target_alone"], "verify_ms", "iterations")]
    if not pairs:
        return None
    steps, c, v, iteration, alone_token = [], [], [], [], []
    for pair in pairs:
        spec, base = pair["speculative"], pair["target_alone"]
        step = _per(base, "verify_ms", "iterations")
        steps.append(step)
        if (ms := _per(base, "wall_ms", "new_tokens")) is not None:
            alone_token.append(ms / step)
        for values, ms_field, count_field in ((c, "draft_ms", "drafted"), (v, "verify_ms", "iterations")):
            if (ms := _per(spec, ms_field, count_field)) is not None:
                values.append(ms / step)
        if (ms := _per(spec, "wall_ms", "iterations")) is not None:
            iteration.append(ms / step)
    return Costs(_median(steps), _median(c), _median(v), _median(iteration), _median(alone_token))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _per(run: dict, ms_field: str, count_field: str) -> float | None:
    count = run.get(count_field) or 0
    return None if not count or count <= 0 else float(run.get(ms_field) or 0.0) / count
