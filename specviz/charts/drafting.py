"""Where an iteration left the paper's Algorithm 1, in words: how many of γ it drafted and why it
stopped, that it drafted a tree and which branch was kept, and why a first iteration has no draft.

Shared by the token stream's hover cards, the step inspector and the timeline, so the three say the
same thing. Reads the iteration's `drafting` (specviz.trace; older traces lack it, and then only what
the drafts themselves show is said). The terms these sentences use are defined in specviz.glossary.
"""

from __future__ import annotations

from typing import Any

from specviz import glossary
from specviz.charts.acceptance import counted_iterations, position_table, predicted_mean_length
from specviz.charts.tokens import display_token
from specviz.models import head_of


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


def _source(drafting: dict[str, Any]) -> str:
    return {"head": "the draft head", "ngram": "the n-gram draft", "model": "the draft model"}.get(
        drafting.get("source"), "the draft"
    )


def why_fewer(it: dict[str, Any], gamma: int | None = None, first_is_prefill: bool = False) -> str | None:
    """Why iteration `it` drafted fewer than γ, one clause (None: it drafted all γ, or nobody knows).
    first_is_prefill: the run's draft reads the target's features (a head or the hybrid), so its first
    iteration, which has none yet, is known to draft nothing even where an older trace does not say."""
    drafting = it.get("drafting") or {}
    g, gam = made_of(it, gamma)
    stop = drafting.get("stop")
    if g >= gam:
        return None
    if stop == "no_features" or (stop is None and g == 0 and it["index"] == 0 and first_is_prefill):
        return (
            "this is the first iteration: the draft head reads the target's own features, and there are "
            "none before the target's first pass, so that pass (the prefill) makes the first token alone"
        )
    if stop == "confidence":
        confidence, threshold = below(drafting["confidence"], drafting["threshold"])
        return (
            f"then an early stop, as its confidence in its latest draft was {confidence}, "
            f"below its threshold {threshold} (not in the paper's Algorithm 1)"
        )
    if stop == "no_match":
        return "the n-gram draft found no earlier match of the last tokens"
    if stop == "match_end":
        return "the n-gram draft's earlier match ran out"
    if stop == "eos":
        return "the draft ended the text with an end-of-sequence token, and nothing follows it"
    if "gamma" in drafting and drafting["gamma"] < gam and g == drafting["gamma"]:
        return f"only room for {plural(drafting['gamma'], 'draft')} before max new tokens"
    return "this trace does not record why" if "drafting" not in it else None


def drafted_line(it: dict[str, Any], gamma: int | None = None, first_is_prefill: bool = False) -> str:
    """'drafted 1 of γ = 3 (early stop: …)' — one line for a hover card."""
    g, gam = made_of(it, gamma)
    if gamma is None and "drafting" not in it:  # an older trace, its γ not given: say only what it shows
        return f"drafted {plural(g, 'token')}" if g else "no draft"
    why = why_fewer(it, gamma, first_is_prefill)
    if g == 0 and why is not None:
        return f"no draft (γ = {gam}): {why}"
    text = f"drafted {g} of γ = {gam}"
    source = (it.get("drafting") or {}).get("source")
    if source in ("head", "ngram") and g:
        text += f" by {_source(it['drafting'])}"
    if why is None:
        return text
    return text + (", " if why.startswith("then") else ": ") + why


def kept_tokens(tokens: list[dict[str, Any]]) -> str:
    return "“" + "".join(display_token(t["token"]) for t in tokens).strip() + "”"


def tree_line(it: dict[str, Any]) -> str | None:
    """'a draft tree of 2 branches, branch 1 kept' — one line for a hover card (None: a chain)."""
    tree = it.get("tree")
    if not tree or not it["drafts"]:
        return None
    k = len(tree["other_branches"]) + 1
    return (
        f"a draft tree: {k} branches checked in one target pass, branch {tree['kept_branch'] + 1} "
        f"{kept_tokens(it['drafts'])} kept (not in the paper's Algorithm 1)"
    )


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


def run_summary(trace) -> str | None:
    """One sentence for a whole run: how many iterations drafted fewer than γ, and why (None when every
    iteration drafted all γ). Says, for instance, why γ 1, 3 and 6 can give the same trace."""
    gamma = trace.config.get("gamma") or 0
    its = trace.iterations
    short = [it for it in its if len(it["drafts"]) < gamma]
    if not gamma or not short:
        return None
    reasons: dict[str, int] = {}
    for it in short:
        stop = (it.get("drafting") or {}).get("stop")
        if stop is None and "gamma" in (it.get("drafting") or {}):
            stop = "room"
        reasons[stop or "unrecorded"] = reasons.get(stop or "unrecorded", 0) + 1
    words = {
        **STOP_WORDS,
        "room": "no room left before max new tokens",
        "unrecorded": "a reason the trace does not record",
    }
    parts = [f"{n} by {words[r]}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    made = sum(len(it["drafts"]) for it in its) / len(its)
    return (
        f"{len(short)} of {plural(len(its), 'iteration')} drafted fewer than γ = {gamma} ({', '.join(parts)}); "
        f"the run drafted {made:.2f} of γ per iteration on average. So γ is the most it drafted, not what it "
        "drafted, and a larger γ changes nothing where the drafting stopped before it."
    )
