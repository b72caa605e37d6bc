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
from specviz.teaching.charts.words import words
from specviz.traces.speedup import (
    NO_BASELINE,
    ONLY_BATCHED,
    SURE_WITHIN,
    Spread,
    speedup_spread,
    timing_progress,
    why_no_speedup,
)
from specviz.traces.trace import Trace

_READ = object()  # "no spread handed in": read it from the trace

SPEEDUP_HELP = words()["headline_speedup_help"]  # in English; speedup_help(lang) in a language


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    help: str = ""
    note: str = ""  # a small line under the value (the speedup's range)


def rate_text(tokens_per_s: float) -> str:
    """tokens/s to three significant figures, so two of them divide back to the speedup shown
    (two rates rounded to one decimal could each be off in the last place, and their ratio with them)."""
    if tokens_per_s >= 100:
        return f"{tokens_per_s:.0f}"
    if tokens_per_s >= 10:
        return f"{tokens_per_s:.1f}"
    return f"{tokens_per_s:.2f}" if tokens_per_s >= 1 else f"{tokens_per_s:.3f}"


def no_speedup_words(trace: Trace, baseline: Trace | None, lang: str = "en") -> str:
    """Why a run shows "n/a" for its speedup (specviz.traces.speedup.why_no_speedup), in `lang`."""
    why = why_no_speedup(trace, baseline) or NO_BASELINE
    key = {NO_BASELINE: "headline_no_baseline", ONLY_BATCHED: "headline_only_batched"}.get(why)
    return words(lang)[key] if key else why


def _rate_help(tokens: int, ms: float, run: dict, pairs: int, w: dict[str, str]) -> str:
    """A tok/s metric's help: the median pair's run, and this run's own when that is another pair."""
    if pairs == 1:
        return w["headline_rate_help_one"].format(tokens=tokens, ms=ms)
    return w["headline_rate_help"].format(
        pairs=pairs, tokens=tokens, ms=ms, run_tokens=run["new_tokens"], run_ms=run["wall_ms"]
    )


def _speed_row(trace: Trace, baseline: Trace | None, spread: Spread | None, lang: str) -> list[Metric]:
    w, s = words(lang), trace.summary
    if spread is not None:
        b = baseline.summary
        return [
            Metric(w["headline_speedup"], f"{spread.median:.2f}×", speedup_help(lang), range_note(spread, lang)),
            Metric(
                w["headline_spec_tok_s"],
                rate_text(spread.speculative_tok_s),
                _rate_help(spread.speculative_tokens, spread.speculative_ms, s, spread.pairs, w),
            ),
            Metric(
                w["headline_target_tok_s"],
                rate_text(spread.target_tok_s),
                _rate_help(spread.target_tokens, spread.target_ms, b, spread.pairs, w),
            ),
            Metric(
                w["headline_passes"],
                w["headline_passes_value"].format(calls=s["target_calls"], tokens=s["new_tokens"]),
                passes_help(trace, lang),
                w["headline_passes_note"],  # under the number: whose each is (cut to "speculative vs alo…" at 1024 px)
            ),
        ]
    spec = trace.mode == "speculative"
    return [
        Metric(
            w["headline_speedup"], w["headline_na"], no_speedup_words(trace, baseline, lang), pairs_to_come(trace, lang)
        ),
        Metric(w["headline_spec_tok_s" if spec else "headline_target_tok_s"], f"{s['tokens_per_s']:.1f}"),
        Metric(w["headline_passes"], f"{s['target_calls']}", w["headline_for_tokens"].format(n=s["new_tokens"])),
        Metric(w["headline_wall_ms"], f"{s['wall_ms']:.0f}"),
    ]


def headline_metrics(
    trace: Trace, baseline: Trace | None, spread: Spread | None = _READ, lang: str = "en"
) -> list[list[Metric]]:
    """Two rows of four: speed (against the baseline when there is one), then acceptance, in `lang`.
    `spread`: the run's speedup_spread, when the caller read it already (one reading for all)."""
    s, w = trace.summary, words(lang)
    if spread is _READ:
        spread = speedup_spread(trace, baseline)
    rate, alpha = s.get("acceptance_rate"), s.get("alpha")
    why = glossary.why_rate_and_alpha_differ(lang)
    rated, mean, alpha_term = (
        glossary.term(name, lang) for name in ("acceptance_rate", "mean_accepted_length", "alpha")
    )
    acceptance = [
        Metric(
            rated.label,
            w["headline_na"] if rate is None else f"{rate:.0%}",
            w["headline_rate_of"].format(
                definition=rated.definition, accepted=s["accepted"], drafted=s["drafted"], why=why
            ),
        ),
        Metric(mean.label, f"{s['mean_accepted_length']:.2f}", mean.definition),
        Metric(
            alpha_term.label,
            w["headline_na"] if alpha is None else f"{alpha:.3f}",
            w["headline_alpha_help"].format(definition=alpha_term.definition, why=why),
        ),
        Metric(w["headline_iterations"], f"{s['iterations']}", w["headline_iterations_help"]),
    ]
    return [_speed_row(trace, baseline, spread, lang), acceptance]


def speedup_help(lang: str = "en") -> str:
    """What the Speedup figure is and how it was timed (SPEEDUP_HELP in English)."""
    return words(lang)["headline_speedup_help"]


def passes_help(trace: Trace, lang: str = "en") -> str:
    """What "Target passes 6 vs 14" means, said where it shows: whose 6 (speculative decoding's target
    passes, one per iteration), whose 14 (the target alone's, one per token, for the same tokens), and
    why fewer passes can still lose time."""
    s = trace.summary
    return words(lang)["headline_passes_help"].format(calls=s["target_calls"], tokens=s["new_tokens"])


def range_note(spread, lang: str = "en") -> str:
    """'1.22–1.38 over 5 pairs', or what is still being timed."""
    w = words(lang)
    if not spread.complete:
        span = "" if spread.pairs == 1 else w["headline_span"].format(low=spread.low, high=spread.high)
        return w["headline_timing_in"].format(span=span, timed=spread.timed, wanted=spread.wanted)
    note = (
        w["headline_one_pair"]
        if spread.pairs == 1
        else w["headline_range"].format(low=spread.low, high=spread.high, pairs=spread.pairs)
    )
    return note + w["headline_under_load_mark"] if spread.under_load else note


def pairs_to_come(trace: Trace, lang: str = "en") -> str:
    """'timing alone: 2 of 9 pairs in…' while a run's solo pairs are still due, else ''."""
    progress = timing_progress(trace)
    if progress is None or progress[0] >= progress[1]:
        return ""
    return words(lang)["headline_pairs_to_come"].format(done=progress[0], wanted=progress[1])


def sureness(spread: Spread | None, lang: str = "en") -> str | None:
    """How sure a finished speedup is, when less than SURE_WITHIN (identical runs' goal); None when
    every pair is within it of the median, or while pairs still come in."""
    if spread is None or not spread.complete:
        return None
    if spread.under_load:  # never shown as a clean figure, to this visitor or a later one of a shared recording
        return words(lang)["headline_under_load"]
    if spread.pairs == 1:
        return words(lang)["headline_timed_once"]
    if spread.sure:
        return None
    off = max(spread.median - spread.low, spread.high - spread.median) / spread.median
    return words(lang)["headline_how_sure"].format(
        pairs=spread.pairs, low=spread.low, high=spread.high, off=off, within=SURE_WITHIN, median=spread.median
    )


def timing_status(trace: Trace, baseline: Trace | None, spread: Spread | None = _READ, lang: str = "en") -> str | None:
    """The line a page shows while a run's further pairs are timed: how many are in and the speedup
    so far (None: the run has no timing started). Its count is the count the figures show."""
    progress = timing_progress(trace)
    if progress is None:
        return None
    if spread is _READ:
        spread = speedup_spread(trace, baseline)
    if spread is not None:  # the same reading as the figures beside it
        progress = (spread.timed, spread.wanted)
    w = words(lang)
    head = w["headline_timing_head"].format(timed=progress[0], wanted=progress[1])
    if spread is None:  # only the batched run itself so far: no number until a solo pair is in
        return head + w["headline_timing_first"]
    span = "" if spread.pairs == 1 else w["headline_timing_span"].format(low=spread.low, high=spread.high)
    return head + w["headline_timing_so_far"].format(median=spread.median, span=span)


def batch_words(trace: Trace, baseline: Trace | None, lang: str = "en") -> str | None:
    """What a student is told of a run decoded batched with other sessions' (specviz.serving.batching), from
    the trace's own record, in `lang`; None when no target pass of it (or of its baseline) served another run."""
    runs = [run for run in (trace, baseline) if run is not None and run.config.get("batched")]
    # most_sessions counts the decodes of its fullest pass, this run's own included.
    others = max([(run.extra.get("batch") or {}).get("most_sessions") or 0 for run in runs], default=0) - 1
    if others < 1:
        return None
    w = words(lang)
    whom = w["headline_batch_one"] if others == 1 else w["headline_batch_many"].format(n=others)
    return w["headline_batched"].format(whom=whom)


def passes_versus_time(
    trace: Trace, baseline: Trace | None, spread: Spread | None = _READ, lang: str = "en"
) -> str | None:
    """A plain sentence when fewer target passes still lost time (the counts must not read as a
    gain the clock did not show); None otherwise. It reads the headline's own figure, as shown (a
    "1.00×" is no loss), so it never says other than the Speedup beside it."""
    if spread is _READ:
        spread = speedup_spread(trace, baseline)
    s = trace.summary
    if spread is None or float(f"{spread.median:.2f}") >= 1 or s["target_calls"] >= s["new_tokens"]:
        return None
    return words(lang)["headline_passes_lost"].format(calls=s["target_calls"], tokens=s["new_tokens"],
                                                      speedup=spread.median)  # fmt: skip
