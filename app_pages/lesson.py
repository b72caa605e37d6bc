"""Lesson: a guided classroom walkthrough of speculative decoding, one step per screen, each with a
short explanation and a live figure from a shipped example trace (opens instantly, no model).

Text lives in assets/lesson/lesson.<language>.json (English, Chinese). ?step=N opens step N (validated);
a toggle switches to a presenter view with large type (and no sidebar, for a projector).
"""

import html
import json
from pathlib import Path

import streamlit as st

from specviz import theory
from specviz.charts import bonus_figure, draft_figure, residual_figure, timeline_figure
from specviz.charts import lesson as lesson_charts
from specviz.charts import theory as theory_charts
from specviz.charts.tokens import decision_text, iteration_tokens, label_token
from specviz.errors import SpecvizError, TraceError
from specviz.trace import Trace
from specviz_app import render

ROOT = Path(__file__).resolve().parent.parent
LESSON_DIR = ROOT / "assets" / "lesson"
LANGUAGES = {"en": "English", "zh": "中文 Chinese"}
# The trace the lesson walks through: our own recording if present, else a gallery example.
TRACE_CANDIDATES = [ROOT / "assets" / "lesson_trace.json", ROOT / "assets" / "examples" / "02-sampled.json"]

PRESENTER_CSS = """<style>
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li
{font-size: 1.6rem !important; line-height: 1.55 !important}
[data-testid="stMain"] h1 {font-size: 3.2rem !important}
[data-testid="stMain"] h2 {font-size: 2.4rem !important}
[data-testid="stMain"] .sv-stream {font-size: 26px !important}
[data-testid="stMain"] [data-testid="stWidgetLabel"] p {font-size: 1rem !important}
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"] {display: none !important}
</style>"""


@st.cache_data(show_spinner=False)
def _lesson(language: str, mtime: float) -> dict:
    return json.loads((LESSON_DIR / f"lesson.{language}.json").read_text(encoding="utf-8"))


def load_lesson(language: str) -> dict:
    path = LESSON_DIR / f"lesson.{language}.json"
    try:
        data = _lesson(language, path.stat().st_mtime)
    except (OSError, ValueError) as exc:
        raise SpecvizError(f"The lesson text {path.name} cannot be read ({exc}).") from None
    if not isinstance(data.get("steps"), list) or not data["steps"]:
        raise SpecvizError(f"The lesson text {path.name} has no steps.")
    return data


@st.cache_data(show_spinner=False)
def _trace_dict(path: str, mtime: float) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_trace() -> tuple[Trace, Trace | None, str]:
    """The lesson's trace, its baseline (when recorded) and the file name."""
    for path in TRACE_CANDIDATES:
        if path.is_file():
            trace = Trace.from_dict(_trace_dict(str(path), path.stat().st_mtime))
            base_path = path.with_name(path.stem + ".baseline.json")
            baseline = None
            if base_path.is_file():
                baseline = Trace.from_dict(_trace_dict(str(base_path), base_path.stat().st_mtime))
            return trace, baseline, path.name
    raise TraceError("No lesson trace is shipped with this copy (assets/lesson_trace.json).")


def parse_step(raw, count: int) -> tuple[int, str | None]:
    """A ?step= value -> (step, message). Out of range is clamped; not a whole number keeps step 1."""
    if raw is None:
        return 1, None
    if isinstance(raw, list):
        raw = raw[-1] if raw else ""
    text = str(raw).strip()
    if not text.lstrip("-").isdigit():
        return 1, f"step: {text[:20]!r} is not a step number; starting at step 1."
    value = int(text)
    if not 1 <= value <= count:
        clamped = min(max(value, 1), count)
        return clamped, f"step: the lesson has steps 1 to {count}; showing step {clamped}."
    return value, None


def _url_value(key: str):
    """A value from the link that opened the app (the sidebar rewrites the URL, so read the first one)."""
    first = st.session_state.get("_url_query") or {}
    if key in first:
        return first[key]
    return st.query_params.get_all(key) or None


def _move(delta: int, count: int) -> None:
    st.session_state["lesson_step"] = min(max(1, st.session_state.get("lesson_step", 1) + delta), count)


def _stream(it: dict, extra: dict, hide_decisions: bool = False) -> None:
    if hide_decisions:  # before the target has judged: every draft is only a proposal (grey)
        drafts = "".join(
            f'<span style="background:#eeeeee;color:#424242;border-bottom:2px dashed #9e9e9e;padding:1px 3px;'
            f'border-radius:3px;margin-right:2px">{html.escape(label_token(d["token"]))}</span>'
            for d in it["drafts"]
        )
        st.html(f'<div class="sv-stream" style="font-family:ui-monospace,monospace;font-size:16px">{drafts}</div>')
        return
    st.html(render.legend_html())
    st.html(render.token_stream_html([it], extra))


def _facts(row: dict) -> str:
    r = "none (greedy)" if row["r"] is None else f"{row['r']:.3f}"
    ratio = "∞" if row["q"] == 0 else f"{row['p'] / row['q']:.3f}"
    return (
        f"**{render.md_escape(label_token(row['token']))}**: q = {row['q']:.3f}, p = {row['p']:.3f}, p/q = {ratio}, "
        f"min(1, p/q) = {row['accept_prob']:.3f}, r = {r} → {decision_text(row)}"
    )


def _figure(kind: str, trace: Trace, baseline: Trace | None, big: bool) -> None:
    picks = lesson_charts.pick_iterations(trace.iterations)
    extra = trace.extra
    fig = None
    if kind == "serial":
        fig = timeline_figure(baseline if baseline is not None else trace)
    elif kind == "timeline":
        fig = timeline_figure(trace, baseline)
    elif kind in ("draft", "verify", "decide", "resample", "unchanged"):
        if picks["resample"] is None:
            st.info("The lesson trace has no rejected draft to show.")
            return
        it = trace.iterations[picks["resample"]]
        rows = iteration_tokens(it)
        drafts = [r for r in rows if r["is_draft"]]
        k = it["accepted_count"]
        rejected, corr = drafts[k], next((r for r in rows if not r["is_draft"]), None)
        st.caption(f"Iteration {it['index'] + 1} of the example: γ = {len(drafts)} drafts.")
        _stream(it, extra, hide_decisions=kind in ("draft", "verify"))
        if kind in ("draft", "verify") and drafts[0]["q"] >= 0.999:
            st.caption(
                f"This example's draft ({trace.config.get('draft')}) proposes its guess with certainty: q = 1 for "
                "its token and 0 elsewhere. A model draft spreads q over many tokens."
            )
        if kind == "draft":
            fig = draft_figure(drafts[0], "pending", extra, 1)
            for t in fig.data:  # the target has not spoken yet: show q only
                if t.name != "q (draft)":
                    t.visible = "legendonly"
            fig.layout.annotations = []
        elif kind == "verify":
            fig = draft_figure(drafts[0], drafts[0]["status"], extra, 1)
            fig.layout.annotations = []
        elif kind == "decide":
            st.markdown("  \n".join(_facts(r) for r in drafts[: k + 1]))
            fig = draft_figure(rejected, "rejected", extra, k + 1)
        elif kind == "resample" and corr is not None:
            fig = residual_figure(rejected, corr, extra)
        elif kind == "unchanged":
            fig = lesson_charts.composition_figure(rejected, extra)
    elif kind == "bonus":
        if picks["bonus"] is None:
            st.info("The lesson trace has no iteration where every draft passed.")
            return
        it = trace.iterations[picks["bonus"]]
        n = len(it["drafts"])
        drafts_text = f"every one of its {n} drafts" if n > 1 else "its only draft"
        st.caption(f"Iteration {it['index'] + 1} of the example: {drafts_text} accepted.")
        _stream(it, extra)
        corr = next(r for r in iteration_tokens(it) if not r["is_draft"])
        fig = bonus_figure(corr, extra)
    elif kind == "pays":
        fig = theory_charts.walltime_curve_figure(0.8, 0.05, 4)
    elif kind == "not":
        alpha = theory.estimate_alpha(trace) or 0.25
        fig = theory_charts.walltime_curve_figure(min(alpha, 1.0), 0.3, 4)
        st.caption(
            f"α = {alpha:.2f} is what the example trace measured (free text at temperature "
            f"{trace.config['temperature']}); c = 0.3 stands for a draft a third as costly as the target."
        )
    if fig is not None:
        if big:
            fig.update_layout(font={"size": 18}, height=520)
        st.plotly_chart(fig, key=f"lesson-{kind}")


def lesson_page() -> None:
    # Language and step: from the link on the first visit of this page, then from the widgets.
    if "lesson_lang" not in st.session_state:
        raw = _url_value("lang")
        lang = (raw[-1] if isinstance(raw, list) and raw else raw) or "en"
        st.session_state["lesson_lang"] = lang if lang in LANGUAGES else "en"
    if st.session_state.get("lesson_lang") not in LANGUAGES:  # a segmented control can be cleared
        st.session_state["lesson_lang"] = "en"
    try:
        lesson = load_lesson(st.session_state["lesson_lang"])
        trace, baseline, trace_name = load_trace()
    except SpecvizError as exc:
        st.error(f"{exc} Reinstall specviz or restore the assets folder.")
        return
    steps = lesson["steps"]
    count = len(steps)
    ui = lesson.get("ui", {})
    if "lesson_step" not in st.session_state:
        step, message = parse_step(_url_value("step"), count)
        st.session_state["lesson_step"] = step
        if message:
            st.session_state["_lesson_message"] = message
    st.session_state["lesson_step"] = min(max(1, int(st.session_state["lesson_step"])), count)

    top = st.columns([2, 1, 1.3], vertical_alignment="center")
    top[0].caption(render.md_escape(lesson["title"]))
    top[1].segmented_control(
        ui.get("language", "Language"), list(LANGUAGES), format_func=LANGUAGES.get, key="lesson_lang",
        label_visibility="collapsed",
    )  # fmt: skip
    big = top[2].toggle(ui.get("presenter", "Presenter view (large type)"), key="lesson_presenter")
    if message := st.session_state.pop("_lesson_message", None):
        st.warning(f"From the link: {message}")
    if big:
        st.html(PRESENTER_CSS)

    i = st.session_state["lesson_step"]
    step = steps[i - 1]
    st.query_params["step"] = str(i)  # the URL opens this step (the sidebar rewrites the rest)
    st.query_params["lang"] = st.session_state["lesson_lang"]
    st.progress(i / count, text=f"{ui.get('step', 'Step')} {i} {ui.get('of', 'of')} {count}")
    st.title(f"{i}. {step['title']}")

    nav = st.columns([1, 1, 4])
    nav[0].button(
        ui.get("back", "Back"), icon=":material/chevron_left:", on_click=_move, args=(-1, count),
        disabled=i == 1, width="stretch", key="lesson_back",
    )  # fmt: skip
    nav[1].button(
        ui.get("next", "Next"), icon=":material/chevron_right:", on_click=_move, args=(1, count),
        disabled=i == count, type="primary", width="stretch", key="lesson_next",
    )  # fmt: skip

    text, figure = st.columns([2, 3]) if not big else (st.container(), st.container())
    with text:
        st.markdown(step["body"])
        if step.get("takeaway"):
            st.info(step["takeaway"], icon=":material/lightbulb:")
    with figure:
        _figure(step.get("figure", ""), trace, baseline, big)

    with st.expander(ui.get("contents", "Steps")):
        st.selectbox(
            ui.get("contents", "Steps"), list(range(1, count + 1)), key="lesson_step",
            format_func=lambda n: f"{n}. {steps[n - 1]['title']}", label_visibility="collapsed",
        )  # fmt: skip
        st.caption(f"{ui.get('link', 'Link to this step')}: `?step={i}&lang={st.session_state['lesson_lang']}`")
        st.caption(render.md_escape(f"{ui.get('trace', 'Example used')}: {trace_name} · {trace.prompt[:80]}"))


lesson_page()
