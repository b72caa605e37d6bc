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
    "cost", "no_match", "match_end", "eos"), "room" (max new tokens left room for fewer; "room" with none left
    means the draft was never asked), "tree" (a dynamic tree: its recorded drafts are the path the target
    walked, shorter than γ where a test failed or the tree ended), or "unrecorded" (an older trace).
    None: it drafted all γ.
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
    if (it.get("tree") or {}).get("nodes"):  # a dynamic tree: `drafts` is the path the target walked
        return "tree"
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
    if reason in ("confidence", "cost"):
        confidence, threshold = below(drafting["confidence"], drafting["threshold"])
        key = "why_cost_none" if reason == "cost" and made_of(it, gamma)[0] == 0 else f"why_{reason}"
        return said[key].format(confidence=confidence, threshold=threshold)
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
    then = stop_reason(it, gamma, first_is_prefill) in ("confidence", "cost")  # a clause that goes on: ", then …"
    return text + said["then_sep" if then else "why_sep"] + why


def kept_tokens(tokens: list[dict[str, Any]]) -> str:
    return "“" + "".join(display_token(t["token"]) for t in tokens).strip() + "”"


def tree_line(it: dict[str, Any], lang: str = "en") -> str | None:
    """'a draft tree: 2 branches checked in one target pass; the target walked branch 1, “…”, and accepted
    1 of its 3 drafts' — one line for a hover card, in `lang` (None: a chain). It names the branch the
    target walked and how much of it was accepted, so a card on one of its rejected drafts never reads
    as if that draft was kept."""
    tree = it.get("tree")
    if not tree or not it["drafts"]:
        return None
    counts = {"tokens": kept_tokens(it["drafts"]), "accepted": it["accepted_count"], "drafted": len(it["drafts"])}
    if "nodes" in tree:  # EAGLE-2's dynamic tree: its size and the path walked
        return _said(lang)["tree_line_dynamic"].format(nodes=len(tree["nodes"]), **counts)
    k = len(tree["other_branches"]) + 1
    return _said(lang)["tree_line"].format(k=k, b=tree["kept_branch"] + 1, **counts)


def _compared(value: float, other: float, digits: int, more: str, level: str, less: str) -> str:
    """The word for value against other as both print with `digits` decimals, so words and numbers agree."""
    a, b = f"{value:.{digits}f}", f"{other:.{digits}f}"
    return level if a == b else more if value > other else less


def tree_effect(trace, lang: str = "en") -> str | None:
    """What a run's draft trees can do to the Acceptance page's comparisons, and what they did here: position
    1's acceptance against its mean β, the measured tokens per iteration against the prediction from α.
    Each comparison is said as the numbers have it, in `lang` (None: no iteration drafted a tree)."""
    trees = sum("tree" in it for it in trace.iterations)
    if not trees:
        return None
    said, tree = _said(lang), glossary.term("draft_tree", lang)
    text = said["drafting_tree_effect"].format(
        trees=trees, iterations=iterations_word(len(trace.iterations), lang), label=tree.label,
        definition=tree.definition,
    )  # fmt: skip
    facts = []
    rows = position_table(trace)
    at_1 = rows[0][glossary.ACCEPTANCE_AT_POSITION.label] if rows else None
    if at_1 is not None and rows[0]["mean β"] is not None:
        beta = rows[0]["mean β"]
        word = _compared(at_1, beta, 3, *(said[f"drafting_{k}"] for k in ("above", "level", "below")))
        facts.append(said["drafting_tree_position"].format(at_1=at_1, word=word, beta=beta))
    its, alpha = counted_iterations(trace), trace.summary.get("alpha")
    if its and alpha is not None:
        predicted = predicted_mean_length(alpha, [len(it["drafts"]) for it in its])
        measured = sum(it["accepted_count"] + 1 for it in its) / len(its)
        word = _compared(measured, predicted, 2, *(said[f"drafting_{k}"] for k in ("more", "as_many", "fewer")))
        facts.append(said["drafting_tree_measured"].format(measured=measured, word=word, predicted=predicted))
    return text + (said["drafting_here"].format(facts=said["drafting_part_sep"].join(facts)) if facts else "")


def reads_features(config: dict[str, Any]) -> bool:
    """Whether the run's draft is one whose first iteration cannot draft (a head, the hybrid)."""
    return head_of(config.get("draft")) is not None


REASONS = ("no_features", "confidence", "cost", "no_match", "match_end", "eos", "room", "tree", "unrecorded")
STOPS = REASONS[:6]  # the stops the engine records (the last three are said by specviz)


def reason_words(lang: str = "en") -> dict[str, str]:
    """Each reason an iteration drafted fewer than γ (stop_reason's keys) as a noun phrase, in `lang`."""
    said = _said(lang)
    return {r: said[f"drafting_reason_{r}"] for r in REASONS}


def stop_words(lang: str = "en") -> dict[str, str]:
    """The recorded stops of reason_words, in `lang`."""
    return {r: w for r, w in reason_words(lang).items() if r in STOPS}


STOP_WORDS = stop_words()  # in English, as REASON_WORDS and UNRECORDED
REASON_WORDS = reason_words()
# Traces made before the iterations' `drafting` field (the shipped examples of 2026-12-01) keep no reason.
UNRECORDED = words()["drafting_unrecorded"]


def iterations_word(n: int, lang: str = "en") -> str:
    """'1 iteration', '3 iterations', in `lang`."""
    return _said(lang)["drafting_iteration_one" if n == 1 else "drafting_iterations"].format(n=n)


def _reason_counts(trace, its: list[dict[str, Any]]) -> dict[str, int]:
    """Why each of `its` drafted fewer than the run's γ: reason -> how many, most common first."""
    gamma = trace.config.get("gamma") or None
    reasons: dict[str, int] = {}
    for it in its:
        stop = stop_reason(it, gamma, reads_features(trace.config)) or "unrecorded"
        reasons[stop] = reasons.get(stop, 0) + 1
    return dict(sorted(reasons.items(), key=lambda kv: -kv[1]))


def _reasons(trace, its: list[dict[str, Any]], lang: str = "en") -> str:
    """'2 by …, 1 by …': why each of `its` drafted fewer than the run's γ, most common first, in `lang`."""
    said, named = _said(lang), reason_words(lang)
    counts = _reason_counts(trace, its)
    return said["drafting_list_sep"].join(
        said["drafting_reason_count"].format(n=n, reason=named[r]) for r, n in counts.items()
    )


def run_summary(trace, lang: str = "en") -> str | None:
    """One sentence for a whole run, in `lang`: how many iterations drafted fewer than γ, and why (None
    when every iteration drafted all γ). Says, for instance, why γ 1, 3 and 6 can give the same trace."""
    gamma = trace.config.get("gamma") or 0
    its = trace.iterations
    short = [it for it in its if len(it["drafts"]) < gamma]
    if not gamma or not short:
        return None
    said = _said(lang)
    made = sum(len(it["drafts"]) for it in its) / len(its)
    text = said["drafting_run_summary"].format(
        short=len(short), iterations=iterations_word(len(its), lang), gamma=gamma,
        reasons=_reasons(trace, short, lang), made=made,
    )  # fmt: skip
    return text + (" " + said["drafting_unrecorded"] if "unrecorded" in _reason_counts(trace, short) else "")


def first_drafted(trace) -> int:
    """The 1-based number of the run's first iteration that drafted (1 when none did): where the step
    inspector opens, past the prefill."""
    return next((i for i, it in enumerate(trace.iterations, 1) if it["drafts"]), 1)


def iteration_counts(trace, lang: str = "en") -> str | None:
    """Why the pages count a run's iterations differently, in one sentence in `lang`: all of them (the
    inspector's iterations, the timeline's and the headline's target passes), those that drafted
    (acceptance at position 1 rests on them) and those the histogram of tokens per iteration and its mean
    count (counted_iterations: they drafted and ended with a correction). None for a trace with no drafts."""
    its = trace.iterations
    if trace.mode != "speculative" or not its:
        return None
    said = _said(lang)
    gamma, prefill = trace.config.get("gamma") or None, reads_features(trace.config)
    idle = [it for it in its if not it["drafts"]]
    first = [it for it in idle if it["index"] == 0 and stop_reason(it, gamma, prefill) == "no_features"]
    parts = [said["drafting_counts_all"].format(iterations=iterations_word(len(its), lang))]
    if first:
        parts.append(said["drafting_counts_prefill"])
    if others := [it for it in idle if it not in first]:
        idle_key = "drafting_counts_idle_more" if first else "drafting_counts_idle"
        parts.append(said[idle_key].format(n=len(others), reasons=_reasons(trace, others, lang)))
    drafted = len(its) - len(idle)
    rows = position_table(trace)
    reached = rows[0]["reached"] if rows else drafted
    parts.append(said["drafting_counts_drafted"].format(drafted=drafted, reached=reached))
    counted = len(counted_iterations(trace))
    if counted < drafted:
        ended = (
            said["drafting_counts_last_ended"]
            if drafted - counted == 1
            else said["drafting_counts_ended"].format(n=drafted - counted)
        )
        parts.append(said["drafting_counts_histogram"].format(counted=counted, ended=ended))
    return said["drafting_sentence"].format(text=said["drafting_part_sep"].join(parts))
