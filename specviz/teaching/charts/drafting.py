"""Where an iteration left the paper's Algorithm 1, in words: how many of γ it drafted and why it
stopped, that it drafted a tree and which branch was kept, and why a first iteration has no draft.

Shared by the token stream's hover cards, the step inspector and the timeline, so the three say the
same thing. Reads the iteration's `drafting` (specviz.traces.trace; older traces lack it, and then only what
the drafts themselves show is said). The terms these sentences use are defined in specviz.teaching.glossary.
"""

from __future__ import annotations

from typing import Any

from specviz.engine.models import head_of
from specviz.teaching import glossary
from specviz.teaching.charts.acceptance import counted_iterations, position_table, predicted_mean_length
from specviz.teaching.charts.tokens import display_token
from specviz.teaching.charts.words import words


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 draft', '3 drafts' (many: the plural when it is not word + 's')."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def made_of(it: dict[str, Any], gamma: int | None = None) -> tuple[int, int]:
    """(drafts made, γ): γ the run's gamma when given, else the most this iteration could draft."""
    drafting = it.get("drafting") or {}
    g = len(it["drafts"])
    if gamma is None:
        gamma = drafting.get("gamma", g)
    return g, max(gamma, g)


def below(value: float, limit: float) -> tuple[str, str]:
    """value and limit (value < limit) printed with two decimals, or as many more as it takes for the
    two to differ: 0.2961 against 0.3 reads 0.296 and 0.300, never "0.30, below 0.30"."""
    for digits in range(2, 7):
        a, b = f"{value:.{digits}f}", f"{limit:.{digits}f}"
        if a != b:
            break
    return a, b


def _said(lang: str) -> dict[str, str]:
    return words(lang)


def stop_reason(it: dict[str, Any], gamma: int | None = None, first_is_prefill: bool = False) -> str | None:
    """Why iteration `it` drafted fewer than γ, as a key: the recorded stop ("no_features", "confidence",
    "no_match", "match_end", "eos"), "room" (max new tokens left room for fewer; "room" with none left
    means the draft was never asked), or "unrecorded" (an older trace). None: it drafted all γ.
    first_is_prefill: the run's draft reads the target's features (a head or the hybrid), so its first
    iteration, which has none yet, is known to draft nothing even where an older trace does not say."""
    drafting = it.get("drafting") or {}
    g, gam = made_of(it, gamma)
    stop = drafting.get("stop")
    if g >= gam:
        return None
    if stop == "no_features" or (stop is None and g == 0 and it["index"] == 0 and first_is_prefill):
        return "no_features"
    if stop is not None:
        return stop
    if "gamma" in drafting and drafting["gamma"] < gam and g == drafting["gamma"]:
        return "room"
    if "drafting" not in it and g and it.get("correction") is None:
        return "eos"  # only a run's last iteration, its text ended by an accepted draft, has no correction
    return "unrecorded" if "drafting" not in it else None


def why_fewer(
    it: dict[str, Any], gamma: int | None = None, first_is_prefill: bool = False, lang: str = "en"
) -> str | None:
    """Why iteration `it` drafted fewer than γ, one clause in `lang` (None: it drafted all γ, or nobody
    knows). The words are specviz.teaching.charts.words' ("why_*")."""
    reason = stop_reason(it, gamma, first_is_prefill)
    if reason is None:
        return None
    said, drafting = _said(lang), it.get("drafting") or {}
    if reason == "confidence":
        confidence, threshold = below(drafting["confidence"], drafting["threshold"])
        return said["why_confidence"].format(confidence=confidence, threshold=threshold)
    if reason == "room":
        room = drafting["gamma"]
        return said["why_room_none" if room == 0 else "why_room_one" if room == 1 else "why_room"].format(n=room)
    if drafting.get("source") == "suffix" and reason in ("no_match", "match_end"):
        return said[f"why_suffix_{reason}"]  # the suffix trees' lookup, not the n-gram's
    return said[f"why_{reason}"]


def drafted_line(it: dict[str, Any], gamma: int | None = None, first_is_prefill: bool = False, lang: str = "en") -> str:
    """'drafted 1 of γ = 3 by the draft head, then an early stop, …' — one line for a hover card, in `lang`."""
    said = _said(lang)
    g, gam = made_of(it, gamma)
    if gamma is None and "drafting" not in it:  # an older trace, its γ not given: say only what it shows
        return said["drafted_one" if g == 1 else "drafted_n"].format(n=g) if g else said["no_draft"]
    why = why_fewer(it, gamma, first_is_prefill, lang)
    if g == 0 and why is not None:
        return said["no_draft_of"].format(gamma=gam, why=why)
    source = (it.get("drafting") or {}).get("source")
    if source in ("head", "ngram") and g:
        text = said["drafted_by"].format(g=g, gamma=gam, source=said[f"source_{source}"])
    else:
        text = said["drafted_of"].format(g=g, gamma=gam)
    if why is None:
        return text
    then = stop_reason(it, gamma, first_is_prefill) == "confidence"  # a clause that goes on: ", then …"
    return text + said["then_sep" if then else "why_sep"] + why


def kept_tokens(tokens: list[dict[str, Any]]) -> str:
    return "“" + "".join(display_token(t["token"]) for t in tokens).strip() + "”"


def tree_line(it: dict[str, Any], lang: str = "en") -> str | None:
    """'a draft tree: 2 branches checked in one target pass, branch 1 “…” kept' — one line for a hover
    card, in `lang` (None: a chain)."""
    tree = it.get("tree")
    if not tree or not it["drafts"]:
        return None
    k = len(tree["other_branches"]) + 1
    return _said(lang)["tree_line"].format(k=k, b=tree["kept_branch"] + 1, tokens=kept_tokens(it["drafts"]))


def _compared(value: float, other: float, digits: int, more: str, level: str, less: str) -> str:
    """The word for value against other as both print with `digits` decimals, so words and numbers agree."""
    a, b = f"{value:.{digits}f}", f"{other:.{digits}f}"
    return level if a == b else more if value > other else less


def tree_effect(trace) -> str | None:
    """What a run's draft trees can do to the Acceptance page's comparisons, and what they did here: position
    1's acceptance against its mean β, the measured tokens per iteration against the prediction from α.
    Each comparison is said as the numbers have it (None: no iteration drafted a tree)."""
    trees = sum("tree" in it for it in trace.iterations)
    if not trees:
        return None
    text = (
        f"{trees} of {plural(len(trace.iterations), 'iteration')} drafted a tree. {glossary.DRAFT_TREE.label}: "
        f"{glossary.DRAFT_TREE.definition}. So a tree can lift position 1 above its mean β, and the tokens per "
        "iteration above the prediction from α, which counts one test per position; it does so on average, "
        "and chance moves both in a short run."
    )
    facts = []
    rows = position_table(trace)
    at_1 = rows[0][glossary.ACCEPTANCE_AT_POSITION.label] if rows else None
    if at_1 is not None and rows[0]["mean β"] is not None:
        beta = rows[0]["mean β"]
        word = _compared(at_1, beta, 3, "above", "level with", "below")
        facts.append(f"position 1 passed {at_1:.3f} of the times it was reached, {word} its mean β {beta:.3f}")
    its, alpha = counted_iterations(trace), trace.summary.get("alpha")
    if its and alpha is not None:
        predicted = predicted_mean_length(alpha, [len(it["drafts"]) for it in its])
        measured = sum(it["accepted_count"] + 1 for it in its) / len(its)
        word = _compared(measured, predicted, 2, "more than", "as many as", "fewer than")
        facts.append(
            f"the iterations that drafted made {measured:.2f} tokens each, {word} the {predicted:.2f} predicted"
        )
    return text + (" Here " + "; ".join(facts) + "." if facts else "")


def reads_features(config: dict[str, Any]) -> bool:
    """Whether the run's draft is one whose first iteration cannot draft (a head, the hybrid)."""
    return head_of(config.get("draft")) is not None


STOP_WORDS = {
    "no_features": "the first iteration, with no features for the draft head yet",
    "confidence": "an early stop of the draft head",
    "no_match": "no n-gram match",
    "match_end": "an n-gram match that ran out",
    "eos": "a draft that ended the text",
}


REASON_WORDS = {
    **STOP_WORDS,
    "room": "no room left before max new tokens",
    "unrecorded": "a reason this older trace does not keep",
}
# Traces made before the iterations' `drafting` field (the shipped examples of 2026-12-01) keep no reason.
UNRECORDED = (
    "This trace was recorded before specviz wrote down why an iteration drafted fewer than γ, so where its "
    "drafts do not show the reason, it is not known."
)


def _reasons(trace, its: list[dict[str, Any]]) -> str:
    """'2 by …, 1 by …': why each of `its` drafted fewer than the run's γ, most common first."""
    gamma = trace.config.get("gamma") or None
    reasons: dict[str, int] = {}
    for it in its:
        stop = stop_reason(it, gamma, reads_features(trace.config)) or "unrecorded"
        reasons[stop] = reasons.get(stop, 0) + 1
    return ", ".join(f"{n} by {REASON_WORDS[r]}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))


def run_summary(trace) -> str | None:
    """One sentence for a whole run: how many iterations drafted fewer than γ, and why (None when every
    iteration drafted all γ). Says, for instance, why γ 1, 3 and 6 can give the same trace."""
    gamma = trace.config.get("gamma") or 0
    its = trace.iterations
    short = [it for it in its if len(it["drafts"]) < gamma]
    if not gamma or not short:
        return None
    made = sum(len(it["drafts"]) for it in its) / len(its)
    reasons = _reasons(trace, short)
    return (
        f"{len(short)} of {plural(len(its), 'iteration')} drafted fewer than γ = {gamma} ({reasons}); "
        f"the run drafted {made:.2f} of γ per iteration on average. So γ is the most it drafted, not what it "
        "drafted, and a larger γ changes nothing where the drafting stopped before it."
        + (" " + UNRECORDED if REASON_WORDS["unrecorded"] in reasons else "")
    )


def first_drafted(trace) -> int:
    """The 1-based number of the run's first iteration that drafted (1 when none did): where the step
    inspector opens, past the prefill."""
    return next((i for i, it in enumerate(trace.iterations, 1) if it["drafts"]), 1)


def iteration_counts(trace) -> str | None:
    """Why the pages count a run's iterations differently, in one sentence: all of them (the inspector's
    iterations, the timeline's and the headline's target passes), those that drafted (acceptance at
    position 1 rests on them) and those the histogram of tokens per iteration and its mean count
    (counted_iterations: they drafted and ended with a correction). None for a trace with no drafts."""
    its = trace.iterations
    if trace.mode != "speculative" or not its:
        return None
    gamma, prefill = trace.config.get("gamma") or None, reads_features(trace.config)
    idle = [it for it in its if not it["drafts"]]
    first = [it for it in idle if it["index"] == 0 and stop_reason(it, gamma, prefill) == "no_features"]
    parts = [f"{plural(len(its), 'iteration')}, one target pass each"]
    if first:
        parts.append(
            "the first is the prefill, which drafts nothing (the draft head reads the target's features, and "
            "there are none before the target's first pass)"
        )
    if others := [it for it in idle if it not in first]:
        parts.append(f"{len(others)}{' more' if first else ''} drafted nothing ({_reasons(trace, others)})")
    drafted = len(its) - len(idle)
    rows = position_table(trace)
    reached = rows[0]["reached"] if rows else drafted
    parts.append(f"{drafted} drafted, and acceptance at position 1 rests on those {reached}")
    counted = len(counted_iterations(trace))
    if counted < drafted:
        ended = (
            "the last ended the text on an accepted draft, so it has no correction and is not a whole iteration"
            if drafted - counted == 1
            else f"{drafted - counted} ended without a correction, so they are not whole iterations"
        )
        parts.append(f"the histogram of tokens per iteration counts {counted}: {ended}")
    return "; ".join(parts) + "."
