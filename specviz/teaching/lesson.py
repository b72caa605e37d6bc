"""The lesson's content outside the page: its text, its recorded traces, and what each step shows.

Each step names a figure kind; `FIGURES` maps the kind to a small builder that takes the lesson's
recordings and its language and returns a `Shown`: notes to print, optionally one iteration's token
stream, and a Plotly figure. The page (app_pages/lesson.py) only lays them out. No torch, no streamlit.

Words: the steps and the notes printed beside a figure are in assets/lesson/lesson.<language>.json
("notes": templates, English for a key a language leaves out); the figures' own words (titles,
axes, legends, annotations) are in specviz.teaching.charts.words.

Every text the page prints passes through `safe_bold`, so bold beside CJK punctuation renders in
both languages; `shown_for(..., projector=True)` restyles the figure for a projector.

Numbers: the example's own numbers (γ, tokens, times, α) come from its recordings, never from
the text (a step's words name them as {placeholders}, STEP_NUMBERS, filled by `with_numbers`); the
curves of step 9 and 10 are for the drafts the text names (GOOD_DRAFT, WEAK_DRAFT).

Recordings (assets/): `lesson_trace.json` is the main example, recorded with a pair that is faster
than the target alone on this machine, with its target-alone baseline beside it;
`lesson_contrast.json` (optional) is the same prompt with a weak draft, shown where the lesson
explains when drafting does not pay. The second half quotes the recordings its pages open on: the
KV-cache comparison (specviz.labs.kv_cache), the Workloads run (specviz.labs.workloads), the
Serving run (specviz.labs.serving) and the race of drafters (specviz.labs.race); a copy without
one shows a note in place of what it would have drawn.
"""

from __future__ import annotations

import json
import statistics
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz.config import DEFAULT_DRAFT, DEFAULT_GAMMA
from specviz.engine.models import TRAINED_DRAFT
from specviz.errors import SpecvizError, TraceError
from specviz.labs import kv_cache, race, regime, serving, theory, workloads
from specviz.shipped import ASSETS
from specviz.teaching.catalogue import LANGUAGES  # noqa: F401 (the lesson is written in the app's languages)
from specviz.teaching.charts import bonus_figure, draft_figure, residual_figure, timeline_figure
from specviz.teaching.charts import kv_cache as kv_charts
from specviz.teaching.charts import lesson as lesson_charts
from specviz.teaching.charts.timeline import iterations_for, time_to_tokens_ms, tokens_in_common
from specviz.teaching.charts.tokens import draft_facts, iteration_tokens, md_escape
from specviz.teaching.charts.words import words
from specviz.traces.speedup import speedup_spread
from specviz.traces.trace import Trace

LESSON_DIR = ASSETS / "lesson"
MAIN_TRACE = ASSETS / "lesson_trace.json"
CONTRAST_TRACE = ASSETS / "lesson_contrast.json"
GOOD_DRAFT = (0.8, 0.05)  # (α, c) of the "good draft on predictable text" that step 9 describes
WEAK_DRAFT = (0.25, 0.3)  # step 10's curve when no contrast recording is shipped
PROJECTOR_FIGURE_PX = 500  # presenter view: the figure's height, beside the takeaway on a 720 px screen
WORD_JOINER = "\u2060"  # invisible, neither space nor punctuation


@dataclass
class Recordings:
    trace: Trace  # the main example (speculative)
    baseline: Trace | None  # the target alone on the same prompt and settings
    contrast: Trace | None = None  # a weak draft on the same prompt
    contrast_baseline: Trace | None = None
    name: str = ""


@dataclass
class Shown:
    notes: list[tuple[str, str]] = field(default_factory=list)  # (level: caption/markdown/info, text)
    stream: tuple[dict, bool] | None = None  # (iteration, hide the decisions) for the token stream
    figure: go.Figure | None = None


def _punctuation(ch: str) -> bool:
    # CommonMark 0.31 counts Unicode punctuation and symbols (P*, S*); older parsers only P*.
    return unicodedata.category(ch)[0] in "PS"


def _plain(ch: str) -> bool:
    """Neither whitespace (a line's start and end count as whitespace) nor punctuation."""
    return bool(ch) and not ch.isspace() and not _punctuation(ch)


def safe_bold(text: str) -> str:
    """`text` with every **bold** span made to render as bold. CommonMark opens `**` only when it is
    not followed by punctuation unless preceded by space or punctuation (and the mirror rule for
    closing), so Chinese like `**草稿（Drafters）**页面` showed its asterisks: `）` before `**`, `页`
    after it. An invisible word joiner between the delimiter and the punctuation inside makes the
    delimiter count again. Text with unpaired `**` is returned as it is."""
    parts = text.split("**")
    if len(parts) % 2 == 0:
        return text
    for i in range(1, len(parts), 2):  # the odd parts are the bold ones
        inner, before, after = parts[i], parts[i - 1][-1:], parts[i + 1][:1]
        if inner and _punctuation(inner[0]) and _plain(before):
            inner = WORD_JOINER + inner
        if inner and _punctuation(inner[-1]) and _plain(after):
            inner += WORD_JOINER
        parts[i] = inner
    return "**".join(parts)


def load_lesson(language: str) -> dict:
    """The lesson text of `language`, its steps' body and takeaway made safe for bold (safe_bold)."""
    path = LESSON_DIR / f"lesson.{language}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecvizError(f"The lesson text {path.name} cannot be read ({exc}).") from None
    if not isinstance(data.get("steps"), list) or not data["steps"]:
        raise SpecvizError(f"The lesson text {path.name} has no steps.")
    for step in data["steps"]:
        for key in ("body", "takeaway"):
            if isinstance(step.get(key), str):
                step[key] = safe_bold(step[key])
    return data


def _read(path: Path) -> Trace | None:
    return Trace.from_json(path.read_bytes()) if path.is_file() else None


def load_recordings() -> Recordings:
    trace = _read(MAIN_TRACE)
    if trace is None:
        raise TraceError("No lesson trace is shipped with this copy (assets/lesson_trace.json).")
    baseline = _read(MAIN_TRACE.with_name(MAIN_TRACE.stem + ".baseline.json"))
    contrast = _read(CONTRAST_TRACE)
    contrast_baseline = _read(CONTRAST_TRACE.with_name(CONTRAST_TRACE.stem + ".baseline.json"))
    return Recordings(trace, baseline, contrast, contrast_baseline, MAIN_TRACE.name)


def parse_step(raw, count: int, lang: str = "en") -> tuple[int, str | None]:
    """A ?step= value -> (step, message in `lang`). Out of range is clamped; not a whole number keeps step 1."""
    from specviz.teaching import catalogue

    if raw is None:
        return 1, None
    if isinstance(raw, list):
        raw = raw[-1] if raw else ""
    text = str(raw).strip()
    said = catalogue.words("params", lang)
    if not text.lstrip("-").isdigit():
        return 1, said["step_not_a_number"].format(raw=text[:20].replace("`", "'"))
    value = int(text)
    if not 1 <= value <= count:
        clamped = min(max(value, 1), count)
        return clamped, said["step_outside"].format(count=count, step=clamped)
    return value, None


def notes_text(language: str) -> dict[str, str]:
    """The note templates of `language`, English where it has none."""
    return {**load_lesson("en").get("notes", {}), **load_lesson(language).get("notes", {})}


# The example's own numbers a step's words may name, as {name}: the text says what the recording shows,
# whichever recording ships (a re-recording changes the numbers, never a sentence).
STEP_NUMBERS = ("gamma", "rows", "temperature", "tokens", "pass_steps", "draft_share", "race")


def step_numbers(rec: Recordings, language: str) -> dict[str, str]:
    """{name: its value in words} for the placeholders of STEP_NUMBERS, from the main recording:
    gamma and rows (γ + 1); temperature; tokens, the tokens both runs wrote; pass_steps, the
    recording's mean checking pass in mean steps of its target writing alone, and draft_share, its
    drafting's time as a share of its checking passes' (both over the iterations the timeline beside
    the words draws, the first of each run left out: it reads the prompt, not a checking pass or one
    token's step); race, how the race ended (notes "race_less", "race_more"). A number the
    recordings cannot give reads "–" (the race: notes "race_unknown")."""
    notes, trace, baseline = notes_text(language), rec.trace, rec.baseline
    gamma = example_gamma(trace)
    race = race_numbers(trace, baseline)
    tokens = race["tokens"] if race else trace.summary.get("new_tokens", 0)
    checks = iterations_for(trace, tokens)[1:]
    passes = sum(it["verify_ms"] for it in checks)
    steps = [it["verify_ms"] for it in iterations_for(baseline, tokens)[1:]] if baseline is not None else []
    values = {
        "gamma": str(gamma),
        "rows": str(gamma + 1),
        "temperature": f"{trace.config.get('temperature', 0.0):g}",
        "tokens": str(tokens),
        "pass_steps": "–",
        "draft_share": f"{sum(it['draft_ms'] for it in checks) / passes:.0%}" if passes > 0 else "–",
        "race": notes["race_unknown"],
    }
    if passes > 0 and steps and sum(steps) > 0:
        values["pass_steps"] = f"{(passes / len(checks)) / statistics.mean(steps):.1f}"
    if race is not None:
        values["race"] = notes["race_less" if race["speedup"] >= 1 else "race_more"].format(tokens=tokens)
    return values


def step_text(text: str, numbers: dict[str, str]) -> str:
    """A step's body or takeaway with the example's numbers (step_numbers) put in its {placeholders}."""
    for name, value in numbers.items():
        text = text.replace("{" + name + "}", value)
    return text


def with_numbers(step: dict, rec: Recordings, language: str) -> dict:
    """A copy of `step` (the lesson's cached text is never changed) whose body and takeaway name the
    example's own numbers (step_numbers, worked out once for both)."""
    numbers = step_numbers(rec, language)
    return {k: step_text(v, numbers) if k in ("body", "takeaway") and isinstance(v, str) else v
            for k, v in step.items()}  # fmt: skip


def race_numbers(trace: Trace, baseline: Trace | None) -> dict[str, Any] | None:
    """A recording against its baseline: the time each took to the tokens both wrote (what the
    timeline draws), and the speedup every page shows (specviz.traces.speedup: the median of its timed
    pairs, with their range)."""
    spread = speedup_spread(trace, baseline)
    if spread is None:
        return None
    n = tokens_in_common(trace, baseline)
    spec_ms, base_ms = time_to_tokens_ms(trace, n), time_to_tokens_ms(baseline, n)
    return {
        "tokens": n, "speculative_ms": spec_ms, "target_ms": base_ms,
        "speedup": spread.median, "low": spread.low, "high": spread.high, "pairs": spread.pairs,
    }  # fmt: skip


# ----- one small builder per figure kind -----------------------------------------------------------


def _teaching_iteration(rec: Recordings, kind: str, notes: dict[str, str]) -> tuple[dict | None, Shown]:
    picks = lesson_charts.pick_iterations(rec.trace.iterations)
    index = picks["bonus" if kind == "bonus" else "resample"]
    if index is None:
        missing = notes["missing_bonus" if kind == "bonus" else "missing_rejection"]
        return None, Shown([("info", notes["missing"].format(missing=missing))])
    return rec.trace.iterations[index], Shown()


def statuses_of(it: dict) -> tuple[str, ...]:
    """The token statuses one iteration shows, in reading order: its legend needs no others."""
    return tuple(dict.fromkeys(row["status"] for row in iteration_tokens(it)))


def _decisions(it: dict) -> tuple[list[dict], dict | None]:
    rows = iteration_tokens(it)
    return [r for r in rows if r["is_draft"]], next((r for r in rows if not r["is_draft"]), None)


def _race_note(trace: Trace, baseline: Trace | None, who: str, notes: dict[str, str]) -> tuple[str, str]:
    """The race in words: the recording's times to the same tokens, then the speedup with its spread."""
    race = race_numbers(trace, baseline)
    if race is None:
        return ("caption", notes["no_race"])
    faster = notes["faster" if race["speedup"] >= 1 else "slower"]
    text = notes["race"].format(
        who=who, n=race["tokens"], spec_ms=race["speculative_ms"], base_ms=race["target_ms"],
        speedup=race["speedup"], low=race["low"], high=race["high"], pairs=race["pairs"], faster=faster,
    )  # fmt: skip
    return ("markdown", text)


def _serial(rec: Recordings, lang: str) -> Shown:
    return Shown(figure=timeline_figure(rec.baseline if rec.baseline is not None else rec.trace, lang=lang))


def _timeline(rec: Recordings, lang: str) -> Shown:
    notes = notes_text(lang)
    who = notes["with_draft"].format(draft=md_escape(str(rec.trace.config.get("draft"))))
    return Shown([_race_note(rec.trace, rec.baseline, who, notes)], None,
                 timeline_figure(rec.trace, rec.baseline, lang))  # fmt: skip


def _iteration_part(kind: str) -> Callable[[Recordings, str], Shown]:
    def build(rec: Recordings, lang: str) -> Shown:
        notes, w = notes_text(lang), words(lang)
        it, shown = _teaching_iteration(rec, kind, notes)
        if it is None:
            return shown
        drafts, corr = _decisions(it)
        k = it["accepted_count"]
        rejected = drafts[k] if k < len(drafts) else None
        shown.notes.append(("caption", notes["iteration"].format(number=it["index"] + 1, gamma=len(drafts))))
        shown.stream = (it, kind in ("draft", "verify"))
        extra = rec.trace.extra
        if kind in ("draft", "verify") and drafts[0]["q"] >= 0.999:
            shown.notes.append(("caption", notes["certain"]))
        if kind == "draft":
            shown.figure = draft_figure(drafts[0], "pending", extra, 1, lang)
            for t in shown.figure.data:  # the target has not spoken yet: show q only
                if t.name != w["q_draft"]:
                    t.visible = "legendonly"
            shown.figure.layout.annotations = []
        elif kind == "verify":
            shown.figure = draft_figure(drafts[0], drafts[0]["status"], extra, 1, lang)
            shown.figure.layout.annotations = []
        elif kind == "decide":
            shown.notes.append(("markdown", "  \n".join(draft_facts(r, True, lang) for r in drafts[: k + 1])))
            shown.figure = draft_figure(rejected, "rejected", extra, k + 1, lang)
        elif kind == "resample" and corr is not None:
            shown.figure = residual_figure(rejected, corr, extra, lang)
        elif kind == "unchanged":
            shown.figure = lesson_charts.composition_figure(rejected, extra, lang)
        elif kind == "bonus" and corr is not None:
            shown.figure = bonus_figure(corr, extra, lang=lang)
        return shown

    return build


def example_gamma(trace: Trace) -> int:
    """The γ the example was recorded with (the default γ for a trace that does not say)."""
    return int(trace.config.get("gamma") or DEFAULT_GAMMA)


def _pays(rec: Recordings, lang: str) -> Shown:
    notes = notes_text(lang)
    alpha = theory.estimate_alpha(rec.trace)
    measured = notes["measured_alpha"].format(alpha=alpha) if alpha is not None else ""
    note = notes["pays"].format(measured=measured)
    shown = [("caption", note)] + _regime_note(notes)
    return Shown(shown, None, lesson_charts.pays_figure(*GOOD_DRAFT, example_gamma(rec.trace), lang))


def _regime_note(notes: dict[str, str]) -> list[tuple[str, str]]:
    """The regime recording's two weight formats side by side (the Serving page's section), or nothing
    without one: a memory-bound step lets speculation pay, a compute-bound one leaves it less to win."""
    record = regime.recording()
    formats = record.get("formats", {}) if record else {}
    if set(formats) != {"shipped", "float32"}:
        return []
    f32, shipped = formats["float32"], formats["shipped"]
    rows = shipped["verify_rows"]
    text = notes["regime"].format(
        machine=record["machine"], rows=rows, v_float32=regime.v_at(f32, rows), v_shipped=regime.v_at(shipped, rows),
        m_float32=f32["measured_speedup"], m_shipped=shipped["measured_speedup"],
        faster=f32["one_row_ms"] / shipped["one_row_ms"],
    )  # fmt: skip
    return [("caption", text)]


def _not(rec: Recordings, lang: str) -> Shown:
    if rec.contrast is None:
        return Shown(figure=lesson_charts.pays_figure(*WEAK_DRAFT, example_gamma(rec.trace), lang))
    notes = notes_text(lang)
    who = notes["weak_draft"].format(draft=md_escape(str(rec.contrast.config.get("draft"))))
    shown_notes = [_race_note(rec.contrast, rec.contrast_baseline, who, notes)]
    return Shown(shown_notes, None, timeline_figure(rec.contrast, rec.contrast_baseline, lang))


# ----- the second half: where it sits, what makes it hard, the family it opened --------------------


def _missing(name: str, notes: dict[str, str]) -> Shown:
    return Shown([("info", notes["no_recording"].format(name=name))])


def _layers(rec: Recordings, lang: str) -> Shown:
    """No KV cache, the KV cache, and speculative decoding on top: they compose (measured)."""
    notes = notes_text(lang)
    try:
        comparison = kv_cache.load_comparison()
    except SpecvizError:
        return _missing(kv_cache.ASSET.name, notes)
    text = notes["layers"].format(
        cpu=comparison.machine.get("cpu", "?"), tokens=len(comparison.run("kv_cache").tokens),
        cache=comparison.speedup("kv_cache"), spec=comparison.speedup("speculative", "kv_cache"),
        total=comparison.speedup("speculative"), same=notes["layers_same"] if comparison.identical else "",
    )  # fmt: skip
    figure = lesson_charts.compact_comparison(kv_charts.comparison_figure(comparison, lang), comparison, lang)
    return Shown([("caption", text)], None, figure)


def _task(rec: Recordings, lang: str) -> Shown:
    """Difficulties 1 and 3: the default draft and a weak one, measured per kind of task."""
    notes, w = notes_text(lang), words(lang)
    result = workloads.shipped()
    speed = {k: (result.cell(k, DEFAULT_DRAFT) or {}).get("speedup") for k in result.kinds()} if result else {}
    speed = {k: v for k, v in speed.items() if v is not None}
    if not speed:
        return _missing(workloads.RECORDING.name, notes)
    best, worst = max(speed, key=speed.__getitem__), min(speed, key=speed.__getitem__)
    weak = [(result.cell(k, TRAINED_DRAFT) or {}).get("speedup") for k in result.kinds()]
    weak = [v for v in weak if v is not None]
    cfg = result.config
    text = notes["task"].format(
        cpu=cfg.get("cpu", "?"), temperature=cfg.get("temperature", 0), best=speed[best], worst=speed[worst],
        best_kind=w.get(f"kind_{best}", best), worst_kind=w.get(f"kind_{worst}", worst),
        below=sum(v < 1 for v in weak), kinds=len(weak),
    )  # fmt: skip
    figure = lesson_charts.task_figure(result, (DEFAULT_DRAFT, TRAINED_DRAFT), lang)
    return Shown([("caption", text), ("markdown", notes["task_links"])], None, figure)


def _system(rec: Recordings, lang: str) -> Shown:
    """Difficulties 2 and 4: each iteration of the example keeps and throws away its own count."""
    notes, its = notes_text(lang), rec.trace.iterations
    kept, dropped = zip(*(lesson_charts.kept_and_dropped(it) for it in its), strict=True)
    text = notes["system"].format(
        iterations=len(its), low=min(kept), high=max(kept), dropped=sum(dropped),
        drafted=sum(len(it["drafts"]) for it in its),
    )  # fmt: skip
    shown = [("caption", text)] + _serving_notes(notes) + [("markdown", notes["system_links"])]
    return Shown(shown, None, lesson_charts.system_figure(its, lang))


def _serving_notes(notes: dict[str, str]) -> list[tuple[str, str]]:
    """Difficulty 4 measured: speculation's gain at the smallest and the largest batch of the
    Serving page's recording, and the first batch where it stopped paying (none without a recording)."""
    result = serving.shipped()
    gains = {b: g for b in result.batches() if (g := result.gain(b)) is not None} if result else {}
    if len(gains) < 2:
        return []
    first, last, crossover = min(gains), max(gains), result.crossover()
    cross = notes["serving_cross"].format(b=crossover) if crossover is not None else notes["serving_pays"]
    text = notes["serving"].format(
        cpu=result.config.get("cpu", "?"), b_first=first, first=gains[first], b_last=last, last=gains[last],
        cross=cross,
    )  # fmt: skip
    return [("caption", text)]


def _family(rec: Recordings, lang: str) -> Shown:
    """The drafters specviz runs, each a member of the family, by tokens per target pass (the race)."""
    notes = notes_text(lang)
    result = race.shipped()
    rows = [r for r in result["rows"] if r["draft"] in lesson_charts.DRAFTER_WORDS] if result else []
    if not rows:
        return _missing(race.RECORDING.name, notes)
    low, high = (f(rows, key=lambda r: r["tokens_per_iteration"]) for f in (min, max))
    text = notes["family"].format(
        high=high["tokens_per_iteration"], high_name=lesson_charts.drafter_name(high["draft"], lang),
        low=low["tokens_per_iteration"], low_name=lesson_charts.drafter_name(low["draft"], lang),
        speedup=high["speedup"],
    )  # fmt: skip
    return Shown([("caption", text), ("markdown", notes["family_links"])], None,
                 lesson_charts.family_figure(result, lang))  # fmt: skip


FIGURES: dict[str, Callable[[Recordings, str], Shown]] = {
    "serial": _serial,
    "timeline": _timeline,
    **{kind: _iteration_part(kind) for kind in ("draft", "verify", "decide", "resample", "bonus", "unchanged")},
    "pays": _pays,
    "not": _not,
    "layers": _layers,
    "task": _task,
    "system": _system,
    "family": _family,
}


def shown_for(kind: str, rec: Recordings, lang: str = "en", projector: bool = False) -> Shown:
    """What step kind `kind` shows, its words in `lang` (a key of LANGUAGES); with `projector`, its
    figure restyled for presenter view (charts.lesson.projector_figure)."""
    builder = FIGURES.get(kind)
    shown = builder(rec, lang) if builder is not None else Shown()
    shown.notes = [(level, safe_bold(text)) for level, text in shown.notes]
    if projector and shown.figure is not None:
        lesson_charts.projector_figure(shown.figure, PROJECTOR_FIGURE_PX)
    return shown
