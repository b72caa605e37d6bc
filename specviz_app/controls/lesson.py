"""The Lesson page's state: the step on show and the presenter view, read from the link that
opened the app on the page's first visit, then from the page's own controls, and written back to
the URL (with the app's language, specviz_app/language.py) so a copied link opens the same step."""

import streamlit as st

from specviz.teaching import lesson as lesson_content
from specviz_app import keys, language, params


def _url_value(key: str) -> str | None:
    """A value from the link that opened the app (the sidebar rewrites the URL, so read the first one)."""
    first = st.session_state.get(keys.URL_QUERY) or {}
    return params.link_value(first if key in first else {key: st.query_params.get_all(key)}, key)


def _tell(message: str | None) -> None:
    """Add a sentence about the link to what the page says of it once (keys.LESSON_MESSAGE)."""
    if message:
        earlier = st.session_state.get(keys.LESSON_MESSAGE)
        st.session_state[keys.LESSON_MESSAGE] = f"{earlier} {message}" if earlier else message


def step_and_view_from_link(count: int) -> tuple[int, bool]:
    """The step (clamped to 1..count, with a message for a bad link) and whether the presenter view
    is on (a link can open it: ?presenter=1, yes, true or on), from the link on the first visit, then the widgets."""
    if keys.LESSON_STEP not in st.session_state:
        step, message = lesson_content.parse_step(_url_value("step"), count, language.current())
        st.session_state[keys.LESSON_STEP] = step
        _tell(message)
    st.session_state[keys.LESSON_STEP] = _clamped(st.session_state[keys.LESSON_STEP], count)
    if keys.LESSON_PRESENTER not in st.session_state:  # ?presenter=1, yes, true or on (params.link_switch)
        on, message = params.link_switch(_url_value("presenter"), "presenter", default=False, lang=language.current())
        st.session_state[keys.LESSON_PRESENTER] = on
        _tell(message)
    return st.session_state[keys.LESSON_STEP], bool(st.session_state[keys.LESSON_PRESENTER])


def _clamped(step: object, count: int) -> int:
    """The step on show as a number within 1..count; anything that is not a whole number (a widget's
    stale value) counts as step 1, so no value left in the session can break the page."""
    if isinstance(step, bool) or not isinstance(step, int):
        step = 1
    return min(max(1, step), count)


def move(delta: int, count: int) -> None:
    """Back (-1) or Next (+1): exactly one step from the one on show, within 1..count."""
    st.session_state[keys.LESSON_STEP] = _clamped(
        _clamped(st.session_state.get(keys.LESSON_STEP), count) + delta, count
    )


def picker_key(step: int, language: str) -> str:
    """The table of contents' picker is a new widget for each step and each language. Streamlit hands
    back a selectbox's value as its label when the label is not among the options any more: after a
    language switch the old picker gave "2. The idea: ..." instead of 2, which broke Next, Back and
    the presenter toggle (issue 48)."""
    return f"{keys.LESSON_CONTENTS_PREFIX}{language}-{step}"


def picked(key: str, count: int) -> None:
    """A step chosen in the table of contents (the picker under `key`) becomes the step on show; a
    value that is not a step number is ignored."""
    chosen = st.session_state.get(key)
    if isinstance(chosen, int) and not isinstance(chosen, bool) and 1 <= chosen <= count:
        st.session_state[keys.LESSON_STEP] = chosen


def link(step: int, presenter: bool) -> str:
    """The query string that opens this step, in this language and view."""
    return f"?step={step}&lang={language.current()}&presenter={int(presenter)}"


def write_link(step: int, presenter: bool) -> None:
    """The URL opens this step (the sidebar writes the run settings beside it)."""
    st.query_params["step"] = str(step)
    st.query_params["lang"] = language.current()
    st.query_params["presenter"] = "1" if presenter else "0"
