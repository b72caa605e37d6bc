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
from specviz.teaching.charts.drafting import drafted_line, kept_tokens, reads_features, stop_reason, why_fewer
from specviz.teaching.charts.inspector import bonus_figure, draft_figure, residual_figure
from specviz.teaching.charts.tokens import display_token, iteration_tokens, label_token
from specviz.teaching.charts.words import words
from specviz.traces.trace import Trace

# The correction's title and text keys in the catalogue's section "charts", by kind (None: ended on a draft).
CORRECTION_KEYS = {"resampled": "step_resample", "bonus": "step_bonus", "target": "step_target", None: "step_none"}


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


def tree_note(it: dict[str, Any], lang: str = "en") -> str | None:
    """For an iteration that drafted a tree: the branches, which one was kept and why, in `lang`."""
    tree = it.get("tree")
    if not tree or not it["drafts"]:
        return None
    w = words(lang)
    if "nodes" in tree:  # EAGLE-2's dynamic tree: its size, depth, the tests that failed, the path kept
        sampled = it["drafts"][0]["r"] is not None  # T>0: drawn from q (specviz.drafters.sampled_tree)
        return w["step_tree_dynamic_sampled" if sampled else "step_tree_dynamic"].format(
            nodes=len(tree["nodes"]), depth=max(n["depth"] for n in tree["nodes"]),
            failed=sum(len(level) for level in tree["tests"]), tokens=kept_tokens(it["drafts"]),
        )  # fmt: skip
    k = len(tree["other_branches"]) + 1
    kept = tree["kept_branch"]
    choice = w["step_tree_first_choice"] if kept == 0 else w["step_tree_choice_n"].format(n=kept + 1)
    kept_words = w["step_tree_kept"].format(b=kept + 1, choice=choice)
    others = w["drafting_list_sep"].join(
        w["step_tree_other"].format(b=b + 1 if b < kept else b + 2, tokens=kept_tokens(branch))
        for b, branch in enumerate(tree["other_branches"])
    )
    text = w["step_tree_text"].format(
        k=k, which=w["step_tree_both" if k == 2 else "step_tree_all"], kept=kept_words,
        tokens=kept_tokens(it["drafts"]), others=others,
    )  # fmt: skip
    if it["drafts"][0]["r"] is None:  # greedy: a first token passes exactly when it is the target's choice
        why = w["step_tree_greedy_kept" if it["accepted_count"] > 0 else "step_tree_greedy_none"]
        return text + w["step_tree_greedy"] + why.format(kept=kept_words)
    failed = [
        w["step_tree_failed"].format(
            b=t["branch"] + 1, token=display_token(t["token"]), r=t["r"], accept=t["accept_prob"]
        )
        for t in tree.get("rejected_first", [])
    ]
    if failed:
        text += " ".join(failed) + w["step_tree_residual"]
    return text + w["step_tree_passed" if it["accepted_count"] > 0 else "step_tree_failed_too"].format(kept=kept_words)


def iteration_summary(it: dict[str, Any], i: int, n: int, lang: str = "en") -> str:
    w = words(lang)
    rows = iteration_tokens(it)
    drafts = [r for r in rows if r["is_draft"]]
    corr = next((r for r in rows if not r["is_draft"]), None)
    if not drafts:
        return w["step_summary_alone"].format(i=i, n=n)
    then = "" if corr is None else w["step_then_resampled" if corr["status"] == "resampled" else "step_then_bonus"]
    tokens = w["step_tokens_one"] if len(drafts) == 1 else w["step_tokens"].format(n=len(drafts))
    return w["step_summary"].format(i=i, n=n, drafts=tokens, accepted=it["accepted_count"], then=then)


def _discarded_note(drafts: list[dict[str, Any]], w: dict[str, str], block: bool = False) -> str | None:
    """The drafts after the first rejection, in a sentence (None: there are none). The token rule never
    checks them; block verification drew a stop test for each, and each failed (block=True)."""
    discarded = [r for r in drafts if r["status"] == "discarded"]
    if not discarded:
        return None
    tokens = w["step_token_sep"].join(f"“{label_token(r['token'])}”" for r in discarded)
    key = ("step_block_discarded" if block else "step_discarded") + ("_one" if len(discarded) == 1 else "")
    return w[key].format(n=len(discarded), tokens=tokens)


def _correction(trace: Trace, it: dict[str, Any], drafts: list, corr: dict | None, lang: str) -> Correction:
    """The iteration's correction: its kind, title, the sentence that says why, and its figure."""
    w = words(lang)
    gamma, prefill = trace.config.get("gamma") or None, reads_features(trace.config)
    kind = None if corr is None else corr["status"] if corr["status"] in ("resampled", "bonus") else "target"
    block = (corr or {}).get("block")  # block verification's correction: drawn from its own residual
    key = "step_block_resample" if kind == "resampled" and block else CORRECTION_KEYS[kind]
    figure = None
    if kind == "resampled":
        figure = residual_figure(drafts[it["accepted_count"]], corr, trace.extra, lang)
    elif kind is not None:
        figure = bonus_figure(corr, trace.extra, no_draft=kind == "target", lang=lang)
    why = why_fewer(it, gamma, prefill, lang) or w["step_asked_none"]
    # With no room left before max new tokens the draft was never asked; otherwise it was, and gave nothing.
    asked = stop_reason(it, gamma, prefill) != "room"
    opening = w["step_opening_asked" if asked else "step_opening_not"]
    made = w["step_made_one"] if len(drafts) == 1 else w["step_made_all"].format(n=len(drafts))
    text = w[f"{key}_text"].format(
        k=it["accepted_count"] + 1, kept=it["accepted_count"], made=made, why=why, opening=opening,
        weight=(block or {}).get("weight"),
    )  # fmt: skip
    return Correction(kind, w[f"{key}_title"], text, corr, figure)


def step_view(trace: Trace, i: int, lang: str = "en") -> StepView:
    """Everything the inspector shows for iteration i (1-based), its words in `lang`."""
    n = len(trace.iterations)
    if n == 0:
        raise TraceError("This trace has no recorded iterations (it was made with tracing off).")
    if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n:
        raise TraceError(f"Pick an iteration from 1 to {n} (got {i!r}).")
    w = words(lang)
    it = trace.iterations[i - 1]
    rows = iteration_tokens(it)
    drafts = [r for r in rows if r["is_draft"]]
    corr = next((r for r in rows if not r["is_draft"]), None)
    line = drafted_line(it, trace.config.get("gamma") or None, reads_features(trace.config), lang)
    view = StepView(i, n, iteration_summary(it, i, n, lang), it, tree_note=tree_note(it, lang))
    view.drafting_note = w["step_note"].format(line=line[0].upper() + line[1:])
    for row in drafts:
        if row["status"] != "discarded":
            status = w.get(f"status_{row['status']}", row["status"])
            title = w["step_draft_panel"].format(slot=row["slot"], token=label_token(row["token"]), status=status)
            figure = draft_figure(row, row["status"], trace.extra, row["slot"], lang)
            view.drafts.append(DraftPanel(row, title, figure))
    block = trace.config.get("rule") == "block"  # its later drafts had stop tests; the token rule's none
    view.discarded_note = _discarded_note(drafts, w, block)
    view.correction = _correction(trace, it, drafts, corr, lang)
    return view
