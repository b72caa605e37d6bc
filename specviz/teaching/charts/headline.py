"""The headline numbers of a run, as labelled values with a one-line help: speedup (the median
pair of its timed pairs, with their range: specviz.traces.speedup), tokens/s of both runs (the median
pair's, so the speedup is their ratio), target passes against the target alone's, acceptance rate,
mean accepted length, α and iterations; and the words around them: the timing status while pairs
come in, how sure the speedup is when its pairs scatter, and whether the run was batched with other
sessions'. Each takes the run's Spread when the caller has one, so numbers drawn side by side come
from one reading of the pairs (the timing thread appends pairs while a page is drawn).

One home for their wording and rounding: the app shows them as metrics, the notebook view as an
HTML grid, so a number reads the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.teaching import glossary
from specviz.traces.speedup import (
    NO_BASELINE,
    SURE_WITHIN,
    Spread,
    speedup_spread,
    timing_progress,
    why_no_speedup,
)
from specviz.traces.trace import Trace

_READ = object()  # "no spread handed in": read it from the trace

SPEEDUP_HELP = (
    "tokens/s of speculative decoding ÷ tokens/s of the target alone, timed as pairs on the same settings, "
    "back to back in alternating order (the run itself is the first pair). The number is the median pair's "
    "(of an even count, the slower of the two middle ones); under it, the range: the slowest and the fastest "
    "pair, and how many pairs. Both tok/s beside it are the median pair's two runs, so the speedup is their ratio"
)


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    help: str = ""
    note: str = ""  # a small line under the value (the speedup's range)


def rate_text(tokens_per_s: float) -> str:
    """tokens/s to three significant figures, so two of them divide back to the speedup shown
    (8.2 and 10.3 rounded to one decimal could be 1.2% off each: 0.80× read as 0.78×)."""
    if tokens_per_s >= 100:
        return f"{tokens_per_s:.0f}"
    if tokens_per_s >= 10:
        return f"{tokens_per_s:.1f}"
    return f"{tokens_per_s:.2f}" if tokens_per_s >= 1 else f"{tokens_per_s:.3f}"


def _rate_help(tokens: int, ms: float, run: dict, pairs: int) -> str:
    """A tok/s metric's help: the median pair's run, and this run's own when that is another pair."""
    if pairs == 1:
        return f"tokens per second: {tokens} tokens in {ms:.0f} ms (the one timed pair)"
    return (
        f"tokens per second of the median pair of {pairs} (see Speedup): {tokens} tokens in {ms:.0f} ms. "
        f"The run on show, the first pair: {run['new_tokens']} tokens in {run['wall_ms']:.0f} ms"
    )


def headline_metrics(trace: Trace, baseline: Trace | None, spread: Spread | None = _READ) -> list[list[Metric]]:
    """Two rows of four: speed (against the baseline when there is one), then acceptance.
    `spread`: the run's speedup_spread, when the caller read it already (one reading for all)."""
    s = trace.summary
    if spread is _READ:
        spread = speedup_spread(trace, baseline)
    if spread is not None:
        b = baseline.summary
        speed = [
            Metric("Speedup", f"{spread.median:.2f}×", SPEEDUP_HELP, range_note(spread)),
            Metric(
                "Speculative tok/s",
                rate_text(spread.speculative_tok_s),
                _rate_help(spread.speculative_tokens, spread.speculative_ms, s, spread.pairs),
            ),
            Metric(
                "Target-only tok/s",
                rate_text(spread.target_tok_s),
                _rate_help(spread.target_tokens, spread.target_ms, b, spread.pairs),
            ),
            Metric(
                "Target passes",
                f"{s['target_calls']} vs {s['new_tokens']}",
                passes_help(trace),
                "spec. vs alone",  # under the number: whose each is (cut to "speculative vs alo…" at 1024 px)
            ),
        ]
    else:
        spec = trace.mode == "speculative"
        speed = [
            Metric("Speedup", "n/a", why_no_speedup(trace, baseline) or NO_BASELINE, pairs_to_come(trace)),
            Metric(f"{'Speculative' if spec else 'Target-only'} tok/s", f"{s['tokens_per_s']:.1f}"),
            Metric("Target passes", f"{s['target_calls']}", f"for {s['new_tokens']} tokens"),
            Metric("Wall time (ms)", f"{s['wall_ms']:.0f}"),
        ]
    rate, alpha = s.get("acceptance_rate"), s.get("alpha")
    acceptance = [
        Metric(
            glossary.ACCEPTANCE_RATE.label,
            "n/a" if rate is None else f"{rate:.0%}",
            f"{glossary.ACCEPTANCE_RATE.definition} ({s['accepted']} of {s['drafted']}). "
            f"{glossary.WHY_RATE_AND_ALPHA_DIFFER}",
        ),
        Metric(
            glossary.MEAN_ACCEPTED_LENGTH.label,
            f"{s['mean_accepted_length']:.2f}",
            glossary.MEAN_ACCEPTED_LENGTH.definition,
        ),
        Metric(
            glossary.ALPHA.label,
            "n/a" if alpha is None else f"{alpha:.3f}",
            f"{glossary.ALPHA.definition}. {glossary.WHY_RATE_AND_ALPHA_DIFFER}",
        ),
        Metric("Iterations", f"{s['iterations']}", "one target pass each"),
    ]
    return [speed, acceptance]


def passes_help(trace: Trace) -> str:
    """What "Target passes 6 vs 14" means, said where it shows: whose 6 (speculative decoding's target
    passes, one per iteration), whose 14 (the target alone's, one per token, for the same tokens), and
    why fewer passes can still lose time."""
    s = trace.summary
    return (
        f"{s['target_calls']}: the target passes speculative decoding ran, one per iteration (each verifies "
        f"its drafts), for its {s['new_tokens']} tokens. {s['new_tokens']}: the passes the target alone needs "
        "for the same tokens, one per token. Fewer passes can still lose time: a pass that checks several "
        "tokens costs more than a one-token step, the drafting costs time too, and drafts the target refuses "
        "buy nothing. The speedup says which won"
    )


def range_note(spread) -> str:
    """'1.22–1.38 over 5 pairs', or what is still being timed."""
    if not spread.complete:
        span = "" if spread.pairs == 1 else f"{spread.low:.2f}–{spread.high:.2f}, "
        return f"{span}timing: {spread.timed} of {spread.wanted} pairs in…"
    if spread.pairs == 1:
        return "one pair"
    return f"{spread.low:.2f}–{spread.high:.2f} over {spread.pairs} pairs"


def pairs_to_come(trace: Trace) -> str:
    """'timing alone: 2 of 9 pairs in…' while a run's solo pairs are still due, else ''."""
    progress = timing_progress(trace)
    if progress is None or progress[0] >= progress[1]:
        return ""
    return f"timing alone: {progress[0]} of {progress[1]} pairs in…"


def sureness(spread: Spread | None) -> str | None:
    """How sure a finished speedup is, when less than SURE_WITHIN (identical runs' goal); None when
    every pair is within it of the median, or while pairs still come in."""
    if spread is None or not spread.complete:
        return None
    if spread.pairs == 1:
        return (
            "Timed once: a single pair on a shared machine can be off by a third either way, so read this "
            "speedup as a rough figure (a run in the app is timed several times)."
        )
    if spread.sure:
        return None
    off = max(spread.median - spread.low, spread.high - spread.median) / spread.median
    return (
        f"How sure: its {spread.pairs} pairs ranged from {spread.low:.2f}× to {spread.high:.2f}× (up to {off:.0%} "
        f"from the median), wider than the ±{SURE_WITHIN:.0%} within which identical runs should agree. The "
        f"timings scattered on this machine, so the speedup is only known to lie in that range, most likely "
        f"near {spread.median:.2f}×."
    )


def timing_status(trace: Trace, baseline: Trace | None, spread: Spread | None = _READ) -> str | None:
    """The line a page shows while a run's further pairs are timed: how many are in and the speedup
    so far (None: the run has no timing started). Its count is the count the figures show."""
    progress = timing_progress(trace)
    if progress is None:
        return None
    if spread is _READ:
        spread = speedup_spread(trace, baseline)
    if spread is not None:  # the same reading as the figures beside it
        progress = (spread.timed, spread.wanted)
    head = f"Timing the speedup again on the same settings, each run alone: {progress[0]} of {progress[1]} pairs in"
    if spread is None:  # only the batched run itself so far: no number until a solo pair is in
        return head + ". The speedup shows once the first pair is in."
    span = "" if spread.pairs == 1 else f" ({spread.low:.2f}–{spread.high:.2f})"
    return f"{head}, so far {spread.median:.2f}×{span}. The page updates when the last pair is in."


def batch_words(trace: Trace, baseline: Trace | None) -> str | None:
    """What a student is told of a run decoded batched with other sessions' (specviz.engine.batching), from
    the trace's own record; None when no target pass of it (or of its baseline) served another run."""
    runs = [run for run in (trace, baseline) if run is not None and run.config.get("batched")]
    # most_sessions counts the decodes of its fullest pass, this run's own included.
    others = max([(run.extra.get("batch") or {}).get("most_sessions") or 0 for run in runs], default=0) - 1
    if others < 1:
        return None
    whom = "another session's run" if others == 1 else f"{others} other sessions' runs"
    return (
        f"Decoded together with {whom} (one target pass verified all of them at once); "
        "its speed is timed alone afterwards, so the speedup never comes from this shared run."
    )


def passes_versus_time(trace: Trace, baseline: Trace | None, spread: Spread | None = _READ) -> str | None:
    """A plain sentence when fewer target passes still lost time (the counts must not read as a
    gain the clock did not show); None otherwise. It reads the headline's own figure, as shown (a
    "1.00×" is no loss), so it never says other than the Speedup beside it."""
    if spread is _READ:
        spread = speedup_spread(trace, baseline)
    s = trace.summary
    if spread is None or float(f"{spread.median:.2f}") >= 1 or s["target_calls"] >= s["new_tokens"]:
        return None
    return (
        f"Fewer target passes ({s['target_calls']} instead of {s['new_tokens']}) still took longer "
        f"({spread.median:.2f}×): "
        "drafting and the larger verification passes cost more than the passes saved."
    )
