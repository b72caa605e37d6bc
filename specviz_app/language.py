"""The app's one language: every page's words come from the catalogue (specviz.teaching.catalogue)
in the language chosen here.

It is read from the link on the first visit (`?lang=zh`), then set by a language control: the
sidebar's, on every page, and the Lesson's own beside its step buttons (the presenter view hides the
sidebar). Each control is a view of the one value under keys.LANG: it is set from that value before
it is drawn and writes it back when clicked, so switching in one place switches every page, and
the URL keeps it (sidebar._write_url) for a copied link.
"""

from __future__ import annotations

import streamlit as st

from specviz.teaching import catalogue
from specviz.teaching.catalogue import LANGUAGES
from specviz_app import keys


def current() -> str:
    """The language on show: "en" or "zh"."""
    return catalogue.language_or_default(st.session_state.get(keys.LANG))


def words(section: str) -> dict[str, str]:
    """The catalogue's `section` in the language on show (English where a text is missing)."""
    return catalogue.words(section, current())


def from_link(raw: str | list[str] | None) -> str | None:
    """On the session's first run: the link's ?lang= becomes the language; -> the message for a value
    that is not one of the app's languages (catalogue.parse_language)."""
    st.session_state[keys.LANG], message = catalogue.parse_language(raw)
    return message


def _chosen(widget_key: str) -> None:
    value = st.session_state.get(widget_key)
    if value in LANGUAGES:  # a segmented control clicked twice is deselected (None): keep the language
        st.session_state[keys.LANG] = value


def control(where, widget_key: str, label_visibility: str = "visible") -> None:
    """A language control in `where` (the sidebar, a column), bound to the one language."""
    st.session_state[widget_key] = current()
    where.segmented_control(
        words("app")["language"], list(LANGUAGES), format_func=LANGUAGES.get, key=widget_key,
        on_change=_chosen, args=(widget_key,), label_visibility=label_visibility,
    )  # fmt: skip


def keep(widget_key: str) -> None:
    """Hand a choice widget (a radio, a selectbox, a multiselect) its own value again, just before it is
    drawn, for a widget whose option labels are words in the language on show. Streamlit matches the
    browser's choice by its label: after a language switch the old language's label matched no option,
    so a radio showed nothing chosen and a selectbox its old-language label (issue 48, found in the
    screenshots: the Lab's rule read "Correct rule (Algorithm 1)" in Chinese). A value set through
    session state is sent to the browser with the labels of this run. The widget must not also be
    given a default (index=, default=): set it here first instead."""
    if widget_key in st.session_state:
        st.session_state[widget_key] = st.session_state[widget_key]
