"""Lesson: a guided classroom walkthrough of speculative decoding, one step per screen, each with a
short explanation and a live figure from a shipped example trace (opens instantly, no model).

Text lives in assets/lesson/lesson.<language>.json (English, Chinese). ?step=N opens step N
(validated; the link and the step on show: specviz_app/controls/lesson.py); a toggle (or ?presenter=1)
switches to the presenter view for a 1280x720 projector: no sidebar, every control in one row, the
figure with the takeaway beside it, the step's full text in an expander, and type of at least 20 px
(tests/browser/test_lesson_projector.py measures it).
"""

import html

import streamlit as st

from specviz.errors import SpecvizError
from specviz.teaching import catalogue
from specviz.teaching import lesson as lesson_content
from specviz.teaching.charts.tokens import label_token
from specviz_app import keys, render
from specviz_app import language as app_language
from specviz_app.controls import lesson as lesson_controls
from specviz_app.controls.presenter import PRESENTER_CSS


@st.cache_data(show_spinner=False)
def _lesson(language: str, mtime: float) -> dict:
    return lesson_content.load_lesson(language)


@st.cache_data(show_spinner=False)
def _recordings(mtime: float) -> lesson_content.Recordings:
    return lesson_content.load_recordings()


def _stream(it: dict, extra: dict, language: str, hide_decisions: bool = False, gamma: int | None = None) -> None:
    if hide_decisions:  # before the target has judged: every draft is only a proposal (grey)
        drafts = "".join(
            f'<span style="background:#eeeeee;color:#424242;border-bottom:2px dashed #9e9e9e;padding:1px 3px;'
            f'border-radius:3px;margin-right:2px">{html.escape(label_token(d["token"]))}</span>'
            for d in it["drafts"]
        )
        st.html(f'<div class="sv-stream" style="font-family:ui-monospace,monospace;font-size:16px">{drafts}</div>')
        return
    st.html(render.legend_html(lesson_content.statuses_of(it), lang=language))  # only what this iteration shows
    st.html(render.token_stream_html([it], extra, gamma=gamma, lang=language))


def _notes(shown: lesson_content.Shown) -> None:
    for level, text in shown.notes:
        getattr(st, level)(text)  # st.caption / st.markdown / st.info


def _nav(slots, i: int, count: int, ui: dict) -> None:
    slots[0].button(
        ui.get("back", "Back"), icon=":material/chevron_left:", on_click=lesson_controls.move, args=(-1, count),
        disabled=i == 1, width="stretch", key=keys.LESSON_BACK,
    )  # fmt: skip
    slots[1].button(
        ui.get("next", "Next"), icon=":material/chevron_right:", on_click=lesson_controls.move, args=(1, count),
        disabled=i == count, type="primary", width="stretch", key=keys.LESSON_NEXT,
    )  # fmt: skip


def _contents(box, steps: list[dict], i: int, big: bool, rec: lesson_content.Recordings, ui: dict) -> None:
    """The table of contents, the link to this step and the example used, inside `box`."""
    count = len(steps)
    # The step is plain session state that only callbacks change; the picker is a new widget for each
    # step, so it starts at the step on show. Bound to the step itself (key=LESSON_STEP), it broke
    # Next and Back in presenter view: a popover's content is not mounted while it is closed, so the
    # browser kept sending the value the picker last showed, and Streamlit took it for a new choice
    # made before Next's callback ran (step 2 for ever after Next from step 1, issue 35).
    picker = lesson_controls.picker_key(i, app_language.current())
    with box:
        st.selectbox(
            ui.get("contents", "Steps"), list(range(1, count + 1)), index=i - 1, key=picker,
            format_func=lambda n: f"{n}. {steps[n - 1]['title']}", label_visibility="collapsed",
            on_change=lesson_controls.picked, args=(picker, count),
        )  # fmt: skip
        st.caption(f"{ui.get('link', 'Link to this step')}: `{lesson_controls.link(i, big)}`")
        st.caption(render.md_escape(f"{ui.get('trace', 'Example used')}: {rec.name} · {rec.trace.prompt[:80]}"))


def _reading(step: dict, shown: lesson_content.Shown, rec: lesson_content.Recordings, language: str) -> None:
    """The reading view: the explanation beside the figure, with its stream and notes above it."""
    text, figure = st.columns([2, 3])
    with text:
        st.markdown(step["body"])
        if step.get("takeaway"):
            st.info(step["takeaway"], icon=":material/lightbulb:")
    with figure:
        _notes(shown)
        if shown.stream is not None:
            _stream(shown.stream[0], rec.trace.extra, language, shown.stream[1], rec.trace.config.get("gamma"))
        if shown.figure is not None:
            st.plotly_chart(shown.figure, key=f"{keys.LESSON_FIGURE_PREFIX}{step.get('figure', '')}")


def _projector(
    step: dict, shown: lesson_content.Shown, rec: lesson_content.Recordings, language: str, ui: dict
) -> None:
    """Presenter view on a 1280x720 projector: the figure with the takeaway beside it, then the
    step's full text folded away (the teacher tells it; a student can open it)."""
    figure, text = st.columns([1.65, 1], gap="medium")
    with figure:
        if shown.figure is not None:
            with st.container(key=keys.LESSON_FIGURE):  # as tall as the screen allows (PRESENTER_CSS)
                st.plotly_chart(
                    shown.figure, key=f"{keys.LESSON_FIGURE_PREFIX}{step.get('figure', '')}", height="stretch"
                )
    with text, st.container(key=keys.LESSON_SIDE):
        if step.get("takeaway"):
            st.info(step["takeaway"], icon=":material/lightbulb:")
        if shown.stream is not None:
            _stream(shown.stream[0], rec.trace.extra, language, shown.stream[1], rec.trace.config.get("gamma"))
        with st.container(key=keys.LESSON_NOTES):
            _notes(shown)
    with st.expander(ui["details"]):
        st.markdown(step["body"])


def lesson_page() -> None:
    try:
        language = app_language.current()  # the app's one language (the sidebar's control, or this page's)
        lesson = _lesson(language, (lesson_content.LESSON_DIR / f"lesson.{language}.json").stat().st_mtime)
        rec = _recordings(lesson_content.MAIN_TRACE.stat().st_mtime if lesson_content.MAIN_TRACE.is_file() else 0.0)
    except (SpecvizError, OSError) as exc:
        st.error(f"{exc} Reinstall specviz or restore the assets folder.")
        return
    steps = lesson["steps"]
    count = len(steps)
    ui = lesson.get("ui", {})
    i, big = lesson_controls.step_and_view_from_link(count)  # big: the presenter view (the toggle below shows it)
    step = lesson_content.with_numbers(steps[i - 1], rec, language)  # its words name the recording's numbers

    if big:  # one row for every control, the contents in a pop-over, so the height goes to the figure
        # the language column holds "English | 中文 Chinese" whole at 1280 px (188 px; 1.7 parts cut it)
        top = st.columns([1.15, 1.15, 1.2, 1.9, 2], vertical_alignment="center")
        _nav(top[:2], i, count, ui)
        contents = top[2].popover(ui.get("contents", "Steps"), icon=":material/list:")
        language_slot, toggle_slot = top[3], top[4]
    else:
        top = st.columns([1.7, 1.3, 1.3], vertical_alignment="center")  # the language control whole at 1280 px
        top[0].caption(render.md_escape(lesson["title"]))
        language_slot, toggle_slot = top[1], top[2]
        contents = None  # an expander at the bottom, made after the step
    # The lesson's own language control, a view of the app's one language: in presenter view the
    # sidebar (and its control) is hidden, and a bilingual class switches beside the step buttons.
    app_language.control(language_slot, keys.LESSON_LANG, label_visibility="collapsed")
    toggle_slot.toggle(ui.get("presenter", "Presenter view (large type)"), key=keys.LESSON_PRESENTER)
    if message := st.session_state.pop(keys.LESSON_MESSAGE, None):
        st.warning(catalogue.words("sidebar", app_language.current())["from_link"].format(message=message))
    if big:
        st.html(PRESENTER_CSS)

    lesson_controls.write_link(i, big)
    if not big:  # on a projector the title's number says where we are; the space goes to the figure
        st.progress(i / count, text=f"{ui.get('step', 'Step')} {i} {ui.get('of', 'of')} {count}")
    st.title(f"{i}. {step['title']}")

    shown = lesson_content.shown_for(step.get("figure", ""), rec, language, projector=big)
    if big:
        _projector(step, shown, rec, language, ui)
    else:
        _nav(st.columns([1, 1, 4]), i, count, ui)
        _reading(step, shown, rec, language)
    _contents(contents or st.expander(ui.get("contents", "Steps")), steps, i, big, rec, ui)


lesson_page()
