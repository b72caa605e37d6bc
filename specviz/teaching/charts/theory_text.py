"""The Theory page's sentences, in the page's language: whether a trace drafted as the formula
assumes (one chain of exactly gamma drafts every iteration), where its c and v were measured, which
sliders show values other than the run's, and the formula's prediction set beside the measured
speedup with the rows where they part (specviz.labs.theory.Explanation). The figures beside them
are in specviz.teaching.charts.theory.

Pure functions: no torch, no streamlit; the words come from the charts' catalogue (charts.words).
"""

from __future__ import annotations

import re
from typing import Any

from specviz.config import PAPER_DRAFT
from specviz.labs.theory import ROW_KEYS, Explanation, parts
from specviz.teaching.charts.drafting import iterations_word, run_summary, stop_words
from specviz.teaching.charts.words import words
from specviz.traces.trace import Trace


def drafting_against_formula(trace: Trace, lang: str = "en") -> tuple[str, str] | None:
    """Whether `trace` drafted as the formula assumes, every iteration one chain of exactly γ drafts:
    (kind, sentence in `lang`), kind "paper" (the paper's algorithm: the assumption holds but for the
    first iteration and the last ones near max new tokens, which the sentence counts), "most" (more
    than half the iterations drafted fewer than γ, or a tree), "some" (fewer did); None: every
    iteration drafted one chain of γ."""
    w = words(lang)
    gamma = trace.config.get("gamma") or 0
    its = trace.iterations
    if not gamma or not its:
        return None
    short = [it for it in its if len(it["drafts"]) < gamma]
    trees = [it for it in its if it.get("tree")]
    if trace.config.get("draft") == PAPER_DRAFT:
        return "paper", _paper_sentence(its, short, gamma, lang)
    if not short and not trees:
        return None
    parts = []
    if short:
        parts.append(run_summary(trace, lang))
    if trees:
        parts.append(w["theory_trees"].format(trees=len(trees), iterations=iterations_word(len(its), lang)))
    parts.append(w["theory_assumes_chain"].format(gamma=gamma))
    kind = "most" if 2 * len({it["index"] for it in short + trees}) > len(its) else "some"
    return kind, w["theory_sentence_sep"].join(parts)


def _paper_sentence(its: list[dict[str, Any]], short: list[dict[str, Any]], gamma: int, lang: str) -> str:
    """The paper's algorithm, truthfully, in `lang`: which iterations drafted fewer than γ, and why."""
    w = words(lang)
    first = [it for it in short if (it.get("drafting") or {}).get("stop") == "no_features"]
    room = [it for it in short if it not in first and not (it.get("drafting") or {}).get("stop")]
    other = [it for it in short if it not in first and it not in room]
    text = w["theory_paper_holds"].format(
        gamma=gamma, full=len(its) - len(short), iterations=iterations_word(len(its), lang)
    )
    reasons = []
    if first:
        reasons.append(w["theory_reason_first"])
    if room:
        reasons.append(w["theory_reason_room"].format(iterations=iterations_word(len(room), lang)))
    if other:
        named, unknown = stop_words(lang), w["theory_stop_unrecorded"]
        stops = {named.get((it.get("drafting") or {}).get("stop"), unknown) for it in other}
        said = w["theory_list_sep"].join(sorted(stops))
        reasons.append(w["theory_reason_other"].format(iterations=iterations_word(len(other), lang), reasons=said))
    if reasons:
        text += w["theory_reasons_lead"] + w["theory_reasons_sep"].join(reasons)
    return text + w["theory_end"]


_RECORDED = re.compile(r"(?P<device>\S+), (?P<n>\d+) torch thread\(s\)")


def measured_where(trace: Trace, here: bool, lang: str = "en") -> str:
    """Where a trace's c and v were measured, in one sentence in `lang`: on this machine (`here`: the
    app made the run), else where the trace was recorded, as it records it (a shipped example's
    `recorded_with`, else its device), which need not be this machine."""
    w = words(lang)
    example = (trace.extra.get("example") or {}).get("recorded_with")
    device = trace.config.get("device") or w["theory_unnamed_device"]
    if here:
        return w["theory_measured_here"].format(device=device)
    if example:
        if found := _RECORDED.fullmatch(example):  # as the example files write it
            example = w["theory_recorded_with"].format(**found.groupdict())
        return w["theory_measured_example"].format(example=example)
    return w["theory_measured_elsewhere"].format(device=device)


def sliders_against_run(
    m: dict[str, Any] | None, alpha: float, gamma: int, c: float, v: float, lang: str = "en"
) -> str | None:
    """The sliders' values that are not the run's on show (m: theory.measured_point), as shown, in one
    sentence in `lang`: the sliders start from their own defaults, so their γ = 7 must not read as the
    run's γ. None when there is no run or every slider shows the run's value."""
    if m is None:
        return None
    w = words(lang)
    pairs = [("γ", gamma, m.get("gamma"), "{}"), ("α", alpha, m.get("alpha"), "{:.2f}")]
    pairs += [("c", c, m.get("c"), "{:.2f}"), ("v", v, m.get("v"), "{:.2f}")]
    differ = [
        w["theory_slider_differs"].format(name=name, mine=fmt.format(mine), run=fmt.format(run))
        for name, mine, run, fmt in pairs
        if run is not None and fmt.format(mine) != fmt.format(run)
    ]
    if not differ:
        return None
    return w["theory_sliders_not_run"].format(differ=w["theory_list_sep"].join(differ))


def explanation_rows(explained: Explanation, lang: str = "en") -> list[tuple[str, float, float]]:
    """Explanation.rows with each row's name in `lang`: (what, the formula's value, the run's value)."""
    w = words(lang)
    return [(w[f"theory_row_{key}"], f, r) for key, (_, f, r) in zip(ROW_KEYS, explained.rows, strict=True)]


def explanation_sentence(explained: Explanation, lang: str = "en") -> str:
    """Explanation.sentence() in `lang`: whether the prediction with the measured v lies in the
    measured range, and if not, the rows where the run parts from the formula (the causes)."""
    w, e = words(lang), explained
    if e.within:
        return w["theory_within"].format(predicted=e.predicted, low=e.low, high=e.high, pairs=e.pairs)
    if e.pairs < 2:
        where = w["theory_beside_one"].format(measured=e.measured)
    else:
        side = w["theory_above" if e.predicted > e.high else "theory_below"]
        where = w["theory_outside"].format(side=side, low=e.low, high=e.high, pairs=e.pairs)
    causes = [
        w["theory_cause"].format(what=what, run=r, formula=f) for what, f, r in explanation_rows(e, lang) if parts(f, r)
    ]
    why = w["theory_causes_sep"].join(causes) if causes else w["theory_noise"]
    return w["theory_parts"].format(predicted=e.predicted, where=where, why=why)
