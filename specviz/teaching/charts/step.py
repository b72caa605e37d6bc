"""One iteration, explained: what the step inspector (app) and `trace.show("step")` (notebook) show.

`step_view(trace, i)` gathers, for iteration i (1-based): a one-line summary, each checked draft with
its q-versus-p figure, the drafts discarded unchecked, the correction (resample from the residual,
bonus token, or the target's own token when the draft proposed nothing) with its figure and the
sentence that says why, and for a greedy draft tree which branches were checked and why this one was
kept. Texts are plain (no markup); each front end styles them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from specviz.errors import TraceError
from specviz.teaching.charts.drafting import drafted_line, kept_tokens, plural, reads_features, stop_reason, why_fewer
from specviz.teaching.charts.inspector import bonus_figure, draft_figure, residual_figure
from specviz.teaching.charts.tokens import display_token, iteration_tokens, label_token
from specviz.traces.trace import Trace

CORRECTION_TEXT = {
    "resampled": (
        "Correction: resample.",
        "Draft {k} was rejected, so the next token is drawn from the residual max(0, p − q), normalised: "
        "the mass p puts where q put too little. This is what keeps the output distributed exactly as p.",
    ),
    "bonus": (
        "Correction: bonus.",
        "{made} this iteration made passed, so the target's pass already holds its next distribution; one "
        "more token is drawn from it for free.",
    ),
    "target": (
        "No draft to check.",
        "{opening} ({why}), so the target's pass gives just its own next token, drawn from p.",
    ),
    None: ("No correction.", "The text ended with an end-of-sequence draft."),
}


@dataclass
class DraftPanel:
    row: dict[str, Any]  # the draft token's row (specviz.teaching.charts.tokens.iteration_tokens)
    title: str
    figure: go.Figure


@dataclass
class Correction:
    kind: str | None  # "resampled", "bonus", "target" (no draft), or None (ended on a draft)
    title: str
    text: str
    row: dict[str, Any] | None = None
    figure: go.Figure | None = None


@dataclass
class StepView:
    index: int  # 1-based
    count: int
    summary: str
    iteration: dict[str, Any]
    drafts: list[DraftPanel] = field(default_factory=list)
    discarded_note: str | None = None
    correction: Correction | None = None
    tree_note: str | None = None  # a draft tree only: the branches checked and why this one was kept
    drafting_note: str = ""  # how many of γ were drafted and why it stopped (specviz.teaching.charts.drafting)


def tree_note(it: dict[str, Any]) -> str | None:
    """For an iteration that drafted a tree: the branches, which one was kept and why."""
    tree = it.get("tree")
    if not tree or not it["drafts"]:
        return None
    k = len(tree["other_branches"]) + 1
    kept = tree["kept_branch"]
    choice = "the draft head's first choice" if kept == 0 else f"its choice number {kept + 1}"
    kept_words = f"branch {kept + 1} ({choice})"
    others = ", ".join(
        f"branch {b + 1 if b < kept else b + 2} {kept_tokens(branch)}"
        for b, branch in enumerate(tree["other_branches"])
    )
    text = (
        f"Draft tree (not in the paper's Algorithm 1): the draft head proposed {k} branches that start with "
        f"different first tokens, and the target checked {'both' if k == 2 else 'them all'} in the same single "
        f"pass. Kept: {kept_words}, {kept_tokens(it['drafts'])}, shown above. Not kept: {others}. "
    )
    if it["drafts"][0]["r"] is None:  # greedy: a first token passes exactly when it is the target's choice
        if it["accepted_count"] > 0:
            why = f"{kept_words} does, so it was kept."
        else:
            why = f"none did, so {kept_words} is shown with its first draft rejected."
        return text + "At temperature 0 a branch passes only when it starts with the target's own choice; " + why
    failed = [
        f"Branch {t['branch'] + 1}'s first token “{display_token(t['token'])}” was tested first and failed "
        f"(r = {t['r']:.2f} is not below min(1, p/q) = {t['accept_prob']:.2f})."
        for t in tree.get("rejected_first", [])
    ]
    if failed:
        text += (
            " ".join(failed) + " After a rejection the target's p becomes what is left of it, "
            "norm(max(0, p − q)), the residual a resample would draw from, and the next branch's first token is "
            "tested against that, so the p shown for the kept branch's first token is that residual. "
        )
    if it["accepted_count"] > 0:
        return text + f"The first token of {kept_words} passed its test, so that branch was kept."
    return text + f"The first token of {kept_words} failed too, so the correction comes from what is left of p."


def iteration_summary(it: dict[str, Any], i: int, n: int) -> str:
    rows = iteration_tokens(it)
    drafts = [r for r in rows if r["is_draft"]]
    corr = next((r for r in rows if not r["is_draft"]), None)
    if not drafts:
        return f"Iteration {i} of {n}: no draft, so the target made one token alone."
    text = (
        f"Iteration {i} of {n}: the draft proposed {plural(len(drafts), 'token')}, the target accepted "
        f"{it['accepted_count']}"
    )
    if corr is not None:
        text += f", then {'resampled' if corr['status'] == 'resampled' else 'added a bonus token'}"
    return text + "."


def step_view(trace: Trace, i: int) -> StepView:
    """Everything the inspector shows for iteration i (1-based)."""
    n = len(trace.iterations)
    if n == 0:
        raise TraceError("This trace has no recorded iterations (it was made with tracing off).")
    if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n:
        raise TraceError(f"Pick an iteration from 1 to {n} (got {i!r}).")
    it = trace.iterations[i - 1]
    rows = iteration_tokens(it)
    drafts = [r for r in rows if r["is_draft"]]
    corr = next((r for r in rows if not r["is_draft"]), None)
    gamma, prefill = trace.config.get("gamma") or None, reads_features(trace.config)
    line = drafted_line(it, gamma, prefill)
    view = StepView(i, n, iteration_summary(it, i, n), it, tree_note=tree_note(it))
    view.drafting_note = line[0].upper() + line[1:] + "."
    for row in drafts:
        if row["status"] != "discarded":
            title = f"Draft {row['slot']}: {label_token(row['token'])} ({row['status']})"
            view.drafts.append(DraftPanel(row, title, draft_figure(row, row["status"], trace.extra, row["slot"])))
    discarded = [r for r in drafts if r["status"] == "discarded"]
    if discarded:
        tokens = ", ".join(f"“{label_token(r['token'])}”" for r in discarded)
        view.discarded_note = (
            f"{plural(len(discarded), 'later draft')} ({tokens}) {'was' if len(discarded) == 1 else 'were'} "
            "discarded unchecked: they continue a prefix the target has just refused."
        )
    kind = None if corr is None else corr["status"] if corr["status"] in ("resampled", "bonus") else "target"
    title, text = CORRECTION_TEXT[kind]
    figure = None
    if kind == "resampled":
        figure = residual_figure(drafts[it["accepted_count"]], corr, trace.extra)
    elif kind is not None:
        figure = bonus_figure(corr, trace.extra, no_draft=kind == "target")
    why = why_fewer(it, gamma, prefill) or "it was asked for none"
    # With no room left before max new tokens the draft was never asked; otherwise it was, and gave nothing.
    asked = stop_reason(it, gamma, prefill) != "room"
    opening = "The draft had nothing to propose here" if asked else "No draft was asked for here"
    made = "The one draft" if len(drafts) == 1 else f"All {len(drafts)} drafts"
    text = text.format(k=it["accepted_count"] + 1, made=made, why=why, opening=opening)
    view.correction = Correction(kind, title, text, corr, figure)
    return view
