"""The draft's quality as a table a student can read: τ, acceptance and α by draft position and the
top-k coverage at position 1, for the shipped drafters on held-out free text (the shipped record,
specviz.traces.draft_quality) and for the run on show beside them.

The numbers come from specviz.traces.draft_quality (one home for each rule); this module only lays
them out in rows, one per figure, with a column per source, and says in sentences what a number
rests on (the record's CPU, date and prompts; why a greedy run has no coverage; which temperature of
the record stands beside the run's). Words: the catalogue's section "charts" (keys "quality_...").
"""

from __future__ import annotations

from specviz.config import DEFAULT_DRAFT, drafter_named
from specviz.teaching import catalogue
from specviz.teaching.charts.words import words
from specviz.traces.draft_quality import COVERAGE_K, SHIP_COMMAND, record_row, run_quality


def _cell(value, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def _at(values: list | None, k: int):
    return values[k - 1] if values and len(values) >= k else None


def quality_rows(columns: list[tuple[str, dict]], gamma: int, lang: str = "en") -> list[dict[str, str]]:
    """One row per figure (τ, drafts per iteration, acceptance and α at positions 1..gamma, top-k
    coverage at position 1), one column per (label, stats) source, stats in draft_quality's shape."""
    w = words(lang)

    def row(label: str, pick) -> dict[str, str]:
        return {w["quality_figure"]: label, **{name: _cell(pick(stats)) for name, stats in columns}}

    rows = [
        row(w["quality_tau"], lambda s: s.get("tau")),
        row(w["quality_drafts"], lambda s: s.get("drafts_per_iteration")),
    ]
    for k in range(1, gamma + 1):
        rows.append(row(w["quality_accept_at"].format(k=k), lambda s, k=k: _at(s.get("accept_at"), k)))
    for k in range(1, gamma + 1):
        rows.append(row(w["quality_alpha_at"].format(k=k), lambda s, k=k: _at(s.get("alpha_at"), k)))
    for k in COVERAGE_K:
        rows.append(row(w["quality_top_k"].format(k=k), lambda s, k=k: (s.get("coverage") or {}).get(f"top{k}")))
    return rows


def source_label(draft: str, temperature: float, lang: str = "en", held_out: bool = False) -> str:
    """A column's name: the drafter's label in the catalogue and the temperature ("hybrid, T = 1"), and
    where its numbers come from when they stand beside a run's ("..., held-out text")."""
    template = words(lang)["quality_source_held_out" if held_out else "quality_source"]
    return template.format(name=catalogue.drafter_words(draft, lang)[0], t=f"{temperature:g}")


def shipped_columns(record: dict, lang: str = "en") -> list[tuple[str, dict]]:
    """The record's drafters at each of its temperatures, the default first: the Drafters page's table."""
    names = [DEFAULT_DRAFT, drafter_named("head")]
    return [
        (source_label(name, row["temperature"], lang), row)
        for name in names
        for row in sorted((r for r in record["rows"] if r["drafter"] == name), key=lambda r: r["temperature"])
    ]


def record_words(record: dict, lang: str = "en") -> str:
    """Where and how the record was measured, in one sentence."""
    return words(lang)["quality_record"].format(
        cpu=record.get("cpu", "?"), date=record.get("date", "?"), prompts=len(record.get("prompts", [])),
        tokens=record.get("max_new_tokens", "?"), gamma=record.get("gamma", "?"),
        head=record["head"].get("sha256", "?")[:12], command=record.get("command", SHIP_COMMAND),
    )  # fmt: skip


def run_beside_record(trace, record: dict, lang: str = "en") -> tuple[list[dict[str, str]], list[str]]:
    """The run on show beside the shipped head's and the default's rows at the record's nearest
    temperature: the table's rows and the sentences that go with it (what τ is here, why a column
    has no coverage, which temperature of the record stands beside the run's)."""
    w, run = words(lang), run_quality(trace)
    columns = [(w["quality_this_run"].format(t=f"{run['temperature']:g}"), run)]
    shown, names = None, [drafter_named("head"), DEFAULT_DRAFT]
    for name in sorted(names, key=lambda n: n != trace.config.get("draft")):  # the run's own drafter first
        if (row := record_row(record, name, run["temperature"])) is not None:
            columns.append((source_label(name, row["temperature"], lang, held_out=True), row))
            shown = row["temperature"]
    gamma = max(int(trace.config.get("gamma") or 0), int(record.get("gamma") or 0))
    notes = [w["quality_tau_note"].format(tokens=trace.summary.get("new_tokens"), iterations=run["iterations"])]
    if run["coverage_caveat"] is not None:
        notes.append(w[f"quality_no_coverage_{run['coverage_caveat']}"])
    if shown is not None and shown != run["temperature"]:
        notes.append(w["quality_nearest"].format(t=f"{run['temperature']:g}", shown=f"{shown:g}"))
    return quality_rows(columns, gamma, lang), notes


def record_problem(why: str, lang: str = "en") -> str:
    """Why no record is shown: "missing", "stale" (it measured another head) or the reading's message."""
    w = words(lang)
    if why in ("missing", "stale"):
        return w[f"quality_{why}"].format(command=SHIP_COMMAND)
    return w["quality_failed"].format(error=why)
