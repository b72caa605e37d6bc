"""The headline numbers of a run, as labelled values with a one-line help: speedup (the median of
its timed pairs, with their range: specviz.speedup), tokens/s of both runs, target passes against
the target alone's, acceptance rate, mean accepted length, α and iterations; and the words around
them: the timing status while pairs come in, and whether the run was batched with other sessions'.

One home for their wording and rounding: the app shows them as metrics, the notebook view as an
HTML grid, so a number reads the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz import glossary
from specviz.speedup import NO_BASELINE, speedup, speedup_spread, timing_progress, why_no_speedup
from specviz.trace import Trace


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    help: str = ""
    note: str = ""  # a small line under the value (the speedup's range)


def headline_metrics(trace: Trace, baseline: Trace | None) -> list[list[Metric]]:
    """Two rows of four: speed (against the baseline when there is one), then acceptance."""
    s = trace.summary
    spread = speedup_spread(trace, baseline)
    if spread is not None:
        b = baseline.summary
        speed = [
            Metric(
                "Speedup",
                f"{spread.median:.2f}×",
                "tokens/s of speculative decoding ÷ tokens/s of the target alone, timed as pairs on the same "
                "settings, back to back in alternating order: the median pair, and the range of all of them",
                range_note(spread),
            ),
            Metric(
                "Speculative tok/s",
                f"{s['tokens_per_s']:.1f}",
                f"tokens per second: {s['new_tokens']} tokens in {s['wall_ms']:.0f} ms",
            ),
            Metric(
                "Target-only tok/s",
                f"{b['tokens_per_s']:.1f}",
                f"tokens per second: {b['new_tokens']} tokens in {b['wall_ms']:.0f} ms",
            ),
            Metric(
                "Target passes",
                f"{s['target_calls']} vs {s['new_tokens']}",
                f"speculative decoding needed {s['target_calls']} target passes for {s['new_tokens']} tokens; the "
                f"target alone needs one per token, {s['new_tokens']}. Fewer passes are a gain only if each one, "
                "with its drafting, costs little more than a single step: the speedup says whether it did",
            ),
        ]
    else:
        spec = trace.mode == "speculative"
        speed = [
            Metric("Speedup", "n/a", why_no_speedup(trace, baseline) or NO_BASELINE, pairs_to_come(trace)),
            Metric(f"{'Speculative' if spec else 'Target-only'} tok/s", f"{s['tokens_per_s']:.1f}"),
            Metric("Target calls", f"{s['target_calls']}", f"for {s['new_tokens']} tokens"),
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


def timing_status(trace: Trace, baseline: Trace | None) -> str | None:
    """The line a page shows while a run's further pairs are timed: how many are in and the speedup
    so far (None: the run has no timing started)."""
    progress = timing_progress(trace)
    if progress is None:
        return None
    spread = speedup_spread(trace, baseline)
    head = f"Timing the speedup again on the same settings, each run alone: {progress[0]} of {progress[1]} pairs in"
    if spread is None:  # only the batched run itself so far: no number until a solo pair is in
        return head + ". The speedup shows once the first pair is in."
    span = "" if spread.pairs == 1 else f" ({spread.low:.2f}–{spread.high:.2f})"
    return f"{head}, so far {spread.median:.2f}×{span}. The page updates when the last pair is in."


def batch_words(trace: Trace, baseline: Trace | None) -> str | None:
    """What a student is told of a run decoded batched with other sessions' (specviz.batching), from
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


def passes_versus_time(trace: Trace, baseline: Trace | None) -> str | None:
    """A plain sentence when fewer target passes still lost time (the counts must not read as a
    gain the clock did not show); None otherwise."""
    ratio = speedup(trace, baseline)
    s = trace.summary
    if ratio is None or ratio >= 1 or s["target_calls"] >= s["new_tokens"]:
        return None
    return (
        f"Fewer target passes ({s['target_calls']} instead of {s['new_tokens']}) still took longer ({ratio:.2f}×): "
        "drafting and the larger verification passes cost more than the passes saved."
    )
