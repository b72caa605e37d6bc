"""The KV cache, visible: one iteration's cache rows (written, kept, rolled back) for the target and
the draft, and the measured comparison of no KV cache, the KV cache and the KV cache with
speculative decoding (specviz.labs.kv_cache). No torch: traces and the recording are plain data.

Rows are token positions: each layer of a model keeps one key and one value per row. An iteration's
rows come from the trace's `cache` (specviz.traces.trace: the lengths the engine left). A trace
recorded before that field gets its target rows worked out from its tokens (`derived_target`, held
to the recorded lengths by tests/test_kv_cache.py) and no draft rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from specviz.teaching.charts.style import STATUS_COLORS, house_figure, titled
from specviz.teaching.charts.words import words

BEFORE_COLOR = "#e0e0e0"  # rows cached before this iteration: reused, not recomputed
ROLLED_COLOR = STATUS_COLORS["rejected"]  # written, then rolled back
TREE_COLOR = STATUS_COLORS["discarded"]  # the draft tree's other branches: rolled back too
PENDING_COLOR = "#90caf9"  # written; the next proposal keeps or rolls them back
MODE_COLORS = {"no_cache": "#9e9e9e", "kv_cache": "#424242", "speculative": STATUS_COLORS["accepted"]}


@dataclass(frozen=True)
class CacheSide:
    """One cache in one iteration, in rows."""

    before: int  # cached when the iteration began and kept (reused, not recomputed)
    kept: int  # written this iteration and kept
    rolled: int  # written this iteration, then rolled back (tree rows included)
    tree: int = 0  # of `rolled`, the draft tree's other branches
    pending: int = 0  # written, with no later proposal to keep or roll them back (the run ended)

    @property
    def written(self) -> int:
        return self.kept + self.rolled + self.pending


@dataclass(frozen=True)
class IterationCache:
    """Iteration i's rows. draft None: `draft_why` says why ("ngram": no cache; "idle": not
    touched; "unrecorded": a trace from before the cache record)."""

    target: CacheSide
    draft: CacheSide | None
    draft_why: str | None
    recorded: bool


def derived_target(trace, i: int) -> dict:
    """The target's cache lengths of iteration i worked out from the tokens, as the engine sets
    them: the pass feeds what the cache has not seen (the previous correction; the whole prompt at
    first) and every draft of every branch, and (5) keeps the text and the accepted drafts."""
    it = trace.iterations[i]
    drafts, corr, n = it["drafts"], it.get("correction"), it["accepted_count"]
    position0 = drafts[0]["position"] if drafts else corr["position"] - n
    text = len(trace.prompt_token_ids) + position0  # tokens on the text when it began
    before = 0 if i == 0 else text - 1  # the newest token is fed by the next pass
    after_rollback = text + n if corr is not None else text + n - 1
    return {"before": before, "after_pass": text + drafts_fed(it), "after_rollback": after_rollback}


def drafts_fed(it: dict) -> int:
    """The drafts iteration `it` fed the target: its chain, every branch of a branch tree, or every
    node of a dynamic tree."""
    tree, drafts = it.get("tree"), it["drafts"]
    if tree and "nodes" in tree:
        return len(tree["nodes"])
    branches = 1 + len(tree["other_branches"]) if tree else 1
    return branches * (len(tree["other_branches"][0]) if tree and tree["other_branches"] else len(drafts))


def iteration_cache(trace, i: int) -> IterationCache:
    """Iteration i's cache rows: the recorded lengths, else the target's worked out."""
    it = trace.iterations[i]
    cache = it.get("cache")
    t = cache["target"] if cache else derived_target(trace, i)
    tree_rows = drafts_fed(it) - len(it["drafts"])  # the tree's rows off the drafts shown (0: a chain)
    rolled = t["after_pass"] - t["after_rollback"]
    target = CacheSide(t["before"], t["after_rollback"] - t["before"], rolled, min(tree_rows, rolled))
    if cache is None:
        return IterationCache(target, None, "unrecorded", False)
    if cache.get("draft") is None:
        return IterationCache(target, None, "ngram", True)
    d = cache["draft"]
    if d["after_draft"] == d["before"] == d["after_rollback"]:
        return IterationCache(target, None, "idle", True)
    written = d["after_draft"] - d["after_rollback"]
    later = _next_rollback(trace, i)
    if later is None:
        return IterationCache(target, CacheSide(d["after_rollback"], 0, 0, 0, written), None, True)
    rolled = min(written, max(0, d["after_draft"] - later))
    return IterationCache(target, CacheSide(d["after_rollback"], written - rolled, rolled), None, True)


def _next_rollback(trace, i: int) -> int | None:
    """Where the draft's next proposal that touched its cache rolled it back to (None: none did)."""
    for it in trace.iterations[i + 1 :]:
        d = (it.get("cache") or {}).get("draft")
        if d is not None and not d["after_draft"] == d["before"] == d["after_rollback"]:
            return d["after_rollback"]
    return None


def cache_caption(trace, i: int, language: str = "en") -> list[str]:
    """Iteration i's cache in plain words: the target's line, then the draft's."""
    w, c = words(language), iteration_cache(trace, i)
    t = c.target
    lines = [w["kv_target_line"].format(w=_rows(t.written, w), k=t.kept, r=t.rolled)]
    if t.tree:
        lines[0] += w["kv_tree_line"].format(t=t.tree)
    if trace.iterations[i].get("correction") is not None:
        lines[0] += w["kv_next_pass"]
    if c.draft is not None:
        d = c.draft
        line = w["kv_draft_last"] if d.pending else w["kv_draft_line"]
        lines.append(line.format(w=_rows(d.written, w), k=d.kept, r=d.rolled))
    elif c.draft_why == "ngram":
        lines.append(w["kv_ngram"][0].upper() + w["kv_ngram"][1:] + ".")
    elif c.draft_why == "idle":
        source = (trace.iterations[i].get("drafting") or {}).get("source")
        why = w["kv_idle_ngram"] if source in ("ngram", "suffix") else w["kv_idle_none"]
        lines.append(w["kv_draft_idle"].format(why=why))
    else:
        lines.append(w["kv_derived"])
    return lines


def _rows(n: int, w: dict[str, str]) -> str:
    return w["kv_row_one"] if n == 1 else w["kv_row_many"].format(n=n)


def cache_figure(trace, i: int, language: str = "en") -> go.Figure:
    """One strip per cache (target, and the draft when it has one this iteration): rows cached
    before, written and kept (green), rolled back (red; the tree's other branches grey)."""
    w, c = words(language), iteration_cache(trace, i)
    sides = [(w["kv_target_row"], c.target)] + ([(w["kv_draft_row"], c.draft)] if c.draft else [])
    segments = (
        ("before", w["kv_before"], BEFORE_COLOR, lambda s: s.before),
        ("kept", w["kv_kept"], STATUS_COLORS["accepted"], lambda s: s.kept),
        ("rolled", w["kv_rolled"], ROLLED_COLOR, lambda s: s.rolled - s.tree),
        ("tree", w["kv_tree"], TREE_COLOR, lambda s: s.tree),
        ("pending", w["kv_pending"], PENDING_COLOR, lambda s: s.pending),
    )
    fig = house_figure()
    names = [name for name, _ in sides]
    for key, label, color, count in segments:
        values = [count(side) for _, side in sides]
        if not any(values):
            continue
        fig.add_bar(
            y=names, x=values, orientation="h", name=label, marker_color=color,
            marker_pattern_shape="/" if key == "tree" else "", text=[v or "" for v in values], textangle=0,
            textposition="inside", insidetextanchor="end" if key == "before" else "middle",
            hovertemplate=f"{label}: %{{x}}<extra></extra>",
        )  # fmt: skip
    fig.update_layout(
        title=titled(w["kv_rows_title"].format(i=i + 1)), barmode="stack", height=150 + 45 * len(sides),
        xaxis={"title": w["kv_rows_x"], "range": _zoom([side for _, side in sides])},
        yaxis={"autorange": "reversed"}, showlegend=True,  # even one colour needs its name (the first pass)
        legend={"orientation": "h", "y": -0.45, "x": 0, "traceorder": "normal"},
        margin={"b": 90},
    )  # fmt: skip
    return fig


def _zoom(sides: list[CacheSide]) -> list[float]:
    """The x range: the rows written in full, with enough of those cached before to read as a bar
    (a long text's thousand cached rows would shrink an iteration's few to a hairline)."""
    written = max(side.written for side in sides)
    start = max(0, min(side.before for side in sides) - max(12, 3 * written))
    return [start, max(side.before + side.written for side in sides) + 0.5]


def comparison_figure(comparison: Any, language: str = "en") -> go.Figure:
    """Tokens per second of no KV cache, the KV cache and the KV cache + speculative decoding
    (a specviz.labs.kv_cache.KVComparison), each bar labelled with its ms per token and how many
    times faster than no cache; the title says whether their tokens were identical."""
    w = words(language)
    runs = comparison.runs
    no_cache = comparison.run("no_cache").ms_per_token
    labels = [w[f"kv_{r.mode}"] for r in runs]
    fig = house_figure()
    fig.add_bar(
        y=labels, x=[r.tokens_per_s for r in runs], orientation="h",
        marker_color=[MODE_COLORS.get(r.mode, "#424242") for r in runs],
        text=[w["kv_bar"].format(tps=r.tokens_per_s, ms=r.ms_per_token, x=no_cache / r.ms_per_token) for r in runs],
        textposition="auto", hovertemplate="%{y}<br>%{text}<extra></extra>", showlegend=False,
    )  # fmt: skip
    n = len(runs[0].tokens) if runs else 0
    same = w["kv_same"].format(n=n) if comparison.identical else w["kv_differ"]
    where = w["kv_where"].format(cpu=comparison.machine.get("cpu", "?"), rounds=comparison.rounds)
    title = f"{w['kv_title'].format(n=n)}<br><sup>{same} · {where}</sup>"
    fig.update_layout(
        title=titled(title), height=320, xaxis_title=w["kv_x"], yaxis={"autorange": "reversed"},
        margin={"l": 20, "t": 100},
    )  # fmt: skip
    fig.update_yaxes(automargin=True)
    return fig
