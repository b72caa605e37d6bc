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

from specviz.charts.inspector import bonus_figure, draft_figure, residual_figure
from specviz.charts.tokens import display_token, iteration_tokens, label_token
from specviz.errors import TraceError
from specviz.trace import Trace

CORRECTION_TEXT = {
    "resampled": (
        "Correction: resample.",
        "Draft {k} was rejected, so the next token is drawn from the residual max(0, p − q), normalised: "
        "the mass p puts where q put too little. This is what keeps the output distributed exactly as p.",
    ),
    "bonus": (
        "Correction: bonus.",
        "Every draft passed, so the target's pass already holds its next distribution; one more token is "
        "drawn from it for free.",
    ),
    "target": (
        "No draft to check.",
        "The draft had nothing to propose here (the n-gram draft found no earlier match, or the draft head "
        "had no features yet), so the target's pass gives just its own next token, drawn from p.",
    ),
    None: ("No correction.", "The text ended with an end-of-sequence draft."),
}


@dataclass
class DraftPanel:
    row: dict[str, Any]  # the draft token's row (specviz.charts.tokens.iteration_tokens)
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


def tree_note(it: dict[str, Any]) -> str | None:
    """For an iteration that drafted a tree: the other branches, and why the one shown was kept."""
    tree = it.get("tree")
    if not tree or not it["drafts"]:
        return None
    others = "; ".join(
        "“" + "".join(display_token(t["token"]) for t in branch).strip() + "”" for branch in tree["other_branches"]
    )
    k = len(tree["other_branches"]) + 1
    text = (
        f"Draft tree: the draft proposed {k} branches that start with different first tokens, and the target "
        f"checked {'both' if k == 2 else 'them all'} in the same single pass. "
        f"The other branch{'es' if k > 2 else ''}: {others}. "
    )
    kept = tree["kept_branch"]
    guess = "its first guess" if kept == 0 else f"its guess number {kept + 1}"
    if it["drafts"][0]["r"] is None:  # greedy: a guess passes exactly when it is the target's choice
        if it["accepted_count"] > 0:
            return (
                text + f"The branch shown is the one starting with the target's own choice ({guess}), so it was kept."
            )
        return text + f"None started with the target's own choice, so {guess} is shown, rejected."
    failed = [
        f"Its guess number {t['branch'] + 1}, “{display_token(t['token'])}”, failed its test "
        f"(r = {t['r']:.2f} is not below min(1, p/q) = {t['accept_prob']:.2f})."
        for t in tree.get("rejected_first", [])
    ]
    if failed:
        text += (
            " ".join(failed) + " After a rejection the target's p becomes what is left of it, "
            "norm(max(0, p − q)), the residual a resample would draw from, and the next guess is tested against "
            "that, so the p shown for this branch's first token is that residual. "
        )
    if it["accepted_count"] > 0:
        return text + f"{guess[0].upper() + guess[1:]} passed its test, so its branch was kept."
    return text + f"{guess[0].upper() + guess[1:]} failed too, so the correction comes from what is left of p."


def iteration_summary(it: dict[str, Any], i: int, n: int) -> str:
    rows = iteration_tokens(it)
    drafts = [r for r in rows if r["is_draft"]]
    corr = next((r for r in rows if not r["is_draft"]), None)
    if not drafts:
        return f"Iteration {i} of {n}: the draft proposed nothing, so the target made one token alone."
    text = f"Iteration {i} of {n}: the draft proposed {len(drafts)} tokens, the target accepted {it['accepted_count']}"
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
    view = StepView(i, n, iteration_summary(it, i, n), it, tree_note=tree_note(it))
    for row in drafts:
        if row["status"] != "discarded":
            title = f"Draft {row['slot']}: {label_token(row['token'])} ({row['status']})"
            view.drafts.append(DraftPanel(row, title, draft_figure(row, row["status"], trace.extra, row["slot"])))
    discarded = [r for r in drafts if r["status"] == "discarded"]
    if discarded:
        tokens = ", ".join(f"“{label_token(r['token'])}”" for r in discarded)
        view.discarded_note = (
            f"{len(discarded)} later draft(s) ({tokens}) were discarded unchecked: they continue a prefix the "
            "target has just refused."
        )
    kind = None if corr is None else corr["status"] if corr["status"] in ("resampled", "bonus") else "target"
    title, text = CORRECTION_TEXT[kind]
    figure = None
    if kind == "resampled":
        figure = residual_figure(drafts[it["accepted_count"]], corr, trace.extra)
    elif kind is not None:
        figure = bonus_figure(corr, trace.extra, no_draft=kind == "target")
    view.correction = Correction(kind, title, text.format(k=it["accepted_count"] + 1), corr, figure)
    return view
