"""The Lesson page's state: the step on show, the language and the presenter view, read from the
link that opened the app on the page's first visit, then from the page's own controls, and written
back to the URL so a copied link opens the same step."""

import streamlit as st

from specviz.teaching import lesson as lesson_content
from specviz.teaching.lesson import LANGUAGES
from specviz_app import keys, params


def _url_value(key: str) -> str | None:
    """A value from the link that opened the app (the sidebar rewrites the URL, so read the first one)."""
    first = st.session_state.get(keys.URL_QUERY) or {}
    return params.link_value(first if key in first else {key: st.query_params.get_all(key)}, key)


def language_from_link() -> None:
    """The language: from the link on the first visit of this page, then from the widget."""
    if keys.LESSON_LANG not in st.session_state:
        st.session_state[keys.LESSON_LANG] = _url_value("lang") or "en"
    if st.session_state.get(keys.LESSON_LANG) not in LANGUAGES:  # a bad link, or a cleared control
        st.session_state[keys.LESSON_LANG] = "en"


def step_and_view_from_link(count: int) -> tuple[int, bool]:
    """The step (clamped to 1..count, with a message for a bad link) and whether the presenter view
    is on (a link can open it: ?presenter=1), from the link on the first visit, then the widgets."""
    if keys.LESSON_STEP not in st.session_state:
        step, message = lesson_content.parse_step(_url_value("step"), count)
        st.session_state[keys.LESSON_STEP] = step
        if message:
            st.session_state[keys.LESSON_MESSAGE] = message
    st.session_state[keys.LESSON_STEP] = min(max(1, int(st.session_state[keys.LESSON_STEP])), count)
    if keys.LESSON_PRESENTER not in st.session_state:
        st.session_state[keys.LESSON_PRESENTER] = _url_value("presenter") == "1"
    return st.session_state[keys.LESSON_STEP], bool(st.session_state[keys.LESSON_PRESENTER])


def move(delta: int, count: int) -> None:
    """Back (-1) or Next (+1), within 1..count."""
    st.session_state[keys.LESSON_STEP] = min(max(1, st.session_state.get(keys.LESSON_STEP, 1) + delta), count)


def picked(key: str) -> None:
    """A step chosen in the table of contents (the picker under `key`) becomes the step on show."""
    st.session_state[keys.LESSON_STEP] = st.session_state[key]


def link(step: int, presenter: bool) -> str:
    """The query string that opens this step, in this language and view."""
    return f"?step={step}&lang={st.session_state[keys.LESSON_LANG]}&presenter={int(presenter)}"


def write_link(step: int, presenter: bool) -> None:
    """The URL opens this step (the sidebar writes the run settings beside it)."""
    st.query_params["step"] = str(step)
    st.query_params["lang"] = st.session_state[keys.LESSON_LANG]
    st.query_params["presenter"] = "1" if presenter else "0"
