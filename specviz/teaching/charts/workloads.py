"""Where it pays (specviz.labs.workloads): one chart per measure by kind of task and drafter (α,
tokens per iteration and the measured speedup, the paper's prediction beside the last two),
acceptance by draft position per kind for one drafter, the table the page shows and the line
saying where its numbers were measured. Words from the catalogue (words.py) in `lang`."""

from __future__ import annotations

import re
from typing import Any

import plotly.graph_objects as go

from specviz.config import drafter_kind
from specviz.labs.workloads import KIND_KEYS, WorkloadsResult, _load, kind_label
from specviz.teaching import catalogue, glossary
from specviz.teaching.charts.style import PREDICTION_COLOR, house_figure, titled
from specviz.teaching.charts.tokens import md_escape
from specviz.teaching.charts.words import words

# One colour per drafter, the same on every chart of the page (the hybrid first: the app's default).
DRAFT_COLORS = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457")
# Kinds share one chart of lines: each its own dash and marker too, so lines that meet stay apart.
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")

# measure -> the prediction's column or None; its chart title and y-axis title are the words
# "workloads_title_<measure>" and "workloads_y_<measure>" (with its unit), the prediction's "workloads_<column>".
MEASURES = {
    "alpha": None,
    "tokens_per_iteration": "predicted_tokens_per_iteration",
    "speedup": "predicted_speedup",
}
# The glossary's term each y-axis title names ({term}).
_Y_TERMS = {"alpha": "alpha", "tokens_per_iteration": "mean_accepted_length"}


def drafter_label(draft: str, lang: str = "en", fallback: str | None = None) -> str:
    """A drafter's name in `lang` (the catalogue's section "drafters"); one that is no registered kind
    keeps `fallback` (a file's own label) or its name."""
    return catalogue.drafter_words(draft, lang)[0] if drafter_kind(draft) else fallback or draft


def kind_name(kind: str, lang: str = "en") -> str:
    """A kind of task's full name in `lang` ("open-ended story"); an unknown kind keeps its key."""
    return words(lang)[f"workloads_kind_{kind}"] if kind in KIND_KEYS else kind_label(kind)


def tick_label(kind: str, lang: str = "en") -> str:
    """A kind's one word under its group (its full name is in the hover and the table): six
    groups in half the page's width leave no room for "summarization / extraction", even on two lines."""
    return words(lang)[f"kind_{kind}"] if kind in KIND_KEYS else kind_label(kind)


def measure_figure(result: WorkloadsResult, measure: str, lang: str = "en") -> go.Figure:
    """Grouped bars: one group per kind, one bar per drafter; diamonds mark the formula's prediction."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}.")
    w, predicted = words(lang), MEASURES[measure]
    kinds = result.kinds()
    x = [tick_label(k, lang) for k in kinds]
    fig = house_figure()
    for i, draft in enumerate(result.drafts()):
        cells = [result.cell(k, draft) or {} for k in kinds]
        color, name = DRAFT_COLORS[i % len(DRAFT_COLORS)], drafter_label(draft, lang)
        fig.add_bar(
            x=x, y=[c.get(measure) for c in cells], name=name, marker_color=color,
            offsetgroup=draft, legendgroup=draft,
            customdata=[[kind_name(k, lang), c.get("prompts"), c.get("new_tokens"), c.get("pairs"), name]
                        for k, c in zip(kinds, cells, strict=True)],
            hovertemplate=w["workloads_hover_bar"],
        )  # fmt: skip
        if predicted:
            fig.add_scatter(
                x=x, y=[c.get(predicted) for c in cells], mode="markers", offsetgroup=draft, legendgroup=draft,
                marker={"symbol": "diamond", "size": 10, "color": PREDICTION_COLOR, "line": {"color": color,
                        "width": 2}},
                name=w[f"workloads_{predicted}"], showlegend=i == 0, customdata=[name] * len(kinds),
                hovertemplate=w["workloads_hover_predicted"],
            )  # fmt: skip
    if measure == "speedup":  # named in the axis title: a label on the line ran into the last group's bars
        fig.add_hline(y=1.0, line_dash="dash", line_color="#757575")
    fig.update_layout(barmode="group", scattermode="group", height=420, title=titled(w[f"workloads_title_{measure}"]))
    term = glossary.term(_Y_TERMS[measure], lang).label if measure in _Y_TERMS else ""
    y_title = w[f"workloads_y_{measure}"].format(term=term)
    fig.update_yaxes(title=y_title, rangemode="tozero", range=[0, 1.05] if measure == "alpha" else None)
    fig.update_xaxes(title=w["workloads_x"], tickangle=0)
    return fig


def position_figure(result: WorkloadsResult, draft: str, lang: str = "en") -> go.Figure:
    """Acceptance at each draft position, one line per kind, for one drafter."""
    w = words(lang)
    fig = house_figure()
    for i, kind in enumerate(result.kinds()):
        cell = result.cell(kind, draft)
        if cell is None:
            continue
        by_position, name = cell["acceptance_by_position"], kind_name(kind, lang)
        fig.add_scatter(
            x=list(range(1, len(by_position) + 1)), y=by_position, mode="lines+markers", name=name,
            line={"dash": _DASHES[i % len(_DASHES)], "width": 2.5, "color": DRAFT_COLORS[i % len(DRAFT_COLORS)]},
            marker={"symbol": _SYMBOLS[i % len(_SYMBOLS)], "size": 9}, customdata=[name] * len(by_position),
            hovertemplate=w["workloads_hover_position"],
        )  # fmt: skip
    title = w["workloads_position_title"].format(drafter=drafter_label(draft, lang))
    fig.update_layout(height=400, title=titled(title))
    term = glossary.term("acceptance_at_position", lang).label.lower()
    fig.update_yaxes(title=w["workloads_position_y"].format(term=term), range=[0, 1.05])
    fig.update_xaxes(title=w["workloads_position_x"], dtick=1)
    return fig


def workloads_table(result: WorkloadsResult, lang: str = "en") -> list[dict[str, Any]]:
    """The page's table: one row per (kind, drafter), each measure beside the formula's prediction
    from the same row (short headers: the nine columns fit the page's width at 1280 px). The keys are
    the English headers; the page shows each under its header in the language on show."""
    return [
        {
            "kind": kind_name(c["kind"], lang),
            "drafter": drafter_label(c["draft"], lang, c["label"]),
            "α": c["alpha"],
            "tokens/pass": c["tokens_per_iteration"],
            "predicted": c["predicted_tokens_per_iteration"],
            "c": c["c"],
            "v": c["verify_cost"],
            "speedup ×": c["speedup"],
            "predicted ×": c["predicted_speedup"],
        }
        for kind in result.kinds()
        for c in result.cells
        if c["kind"] == kind
    ]


# ----- where the numbers were measured ----------------------------------------------------------


def fill(template: str, **values: Any) -> str:
    """`template` filled as markdown: a text value inside backticks in the template (code: data such
    as a model's or a CPU's name, kept as recorded) goes in as it is, any other is escaped."""

    def one(name: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return value.replace("`", "'") if f"`{{{name}}}`" in template else md_escape(value)

    return template.format(**{name: one(name, value) for name, value in values.items()})


RECORDED_WITH = re.compile(
    r"(?P<script>\S+), (?P<threads>\d+) torch thread\(s\), (?P<dtype>\S+) \((?P<kernels>[^()]*)\), "
    r"(?P<seconds>\d+) s in all, (?P<date>[\d-]+)"
)


def recorded_with(text: str, lang: str = "en") -> str:
    """A recording's note of how it was made (scripts/record_*.py writes it), as markdown in `lang`;
    a note in another form is shown as written."""
    if (found := RECORDED_WITH.fullmatch(text)) is None:
        return md_escape(text)
    return fill(words(lang)["workloads_recorded_with"], **found.groupdict())


def provenance(result: WorkloadsResult, lang: str = "en") -> str:
    """Where and how the numbers were measured, in one line of markdown: speed is this machine's
    (in English, labs.workloads.provenance's words)."""
    w, cfg = words(lang), result.config
    before, after = _load(cfg.get("load_before")), _load(cfg.get("load_after"))
    loads = [
        w[f"workloads_load_{when}"].format(x=x) for x, when in ((before, "start"), (after, "end")) if x is not None
    ]
    load = w["workloads_prov_load"].format(loads=w["workloads_prov_and"].join(loads)) if loads else ""
    if isinstance(cfg.get("cores"), int):
        load = w["workloads_prov_cores"].format(cores=cfg["cores"], load=load)
    cpu = cfg.get("cpu")
    parts = [
        fill(w["workloads_prov_target"], target=str(cfg.get("target", "?"))),
        fill(w["workloads_prov_settings"], gamma=cfg.get("gamma", "?"), temperature=cfg.get("temperature", "?"),
             seed=cfg.get("seed", "?")),
        fill(w["workloads_prov_tokens"], max_new=cfg.get("max_new_tokens", "?"),
             prompts=cfg.get("prompts_per_kind", "?")),
        fill(w["workloads_prov_cpu" if cpu else "workloads_prov_no_cpu"], cpu=str(cpu), load=load),
    ]  # fmt: skip
    if cfg.get("recorded_with"):
        parts.append(recorded_with(str(cfg["recorded_with"]), lang))
    return " · ".join(parts)
