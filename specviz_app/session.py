"""A browser session's memory: the trace on show (with its baseline and where it came from), the
settings the sidebar should take next, and the one error guard of every run a page starts.

Pages only read the stored trace, so moving a slider re-renders from it without touching a model.
A failed run leaves the previous trace in place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from specviz.errors import SpecvizError
from specviz.traces.trace import Trace
from specviz_app import keys, language
from specviz_app.params import Settings
from specviz_app.serving import background


@dataclass
class Loaded:
    """The trace on show, where it came from, and the settings that reproduce it."""

    trace: Trace
    baseline: Trace | None
    source: str  # e.g. "run here", "example: ...", "file: ..."
    run_key: tuple | None  # Settings.run_key() of the settings that made it (None: unknown)
    timing: background.TimingPairs | None = None  # its further timed pairs, while they run
    shared: bool = False  # a recording in shared_runs: its timing is the store's to stop (on eviction)
    trace_id: str | None = None  # its id in the replicas' trace store; the URL carries it as ?trace=


def current() -> Loaded | None:
    return st.session_state.get(keys.LOADED)


def show(loaded: Loaded) -> None:
    """Put a trace on show in this session (the one before it stops its timing pairs, if any)."""
    previous = current()
    if previous is not None and previous.timing is not None and not previous.shared:
        previous.timing.stop()  # its pairs would time a trace no page shows any more
    st.session_state[keys.LOADED] = loaded
    st.session_state.pop(keys.INSPECT_ITER, None)  # a new trace starts the inspector at its first draft


# ----- the one error guard of every run a page starts ------------------------------------------


class ErrorGuard:
    """`with ErrorGuard(keys.SWEEP_ERROR, area) as guard: ...`, then `if guard.failed: return`.

    A SpecvizError (the user can fix it) is stored under `key` word for word; anything else is a
    bug, stored as one plain sentence, never a traceback. Either way `area` is cleared and nothing
    already shown is lost."""

    def __init__(self, key: str, area=None):
        self.key, self.area, self.failed = key, area, False

    def __enter__(self) -> ErrorGuard:
        st.session_state.pop(self.key, None)
        background.wait_for_preload()  # a run must not import torch while the preload thread does
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None:
            return False
        if not isinstance(exc, Exception):
            return False  # Streamlit's own control flow (a rerun, a stop) passes through
        self.failed = True
        if self.area is not None:
            self.area.empty()
        if isinstance(exc, SpecvizError):
            st.session_state[self.key] = str(exc)
        else:
            said = language.words("session")["unexpected"]  # the exception's own text stays as it is
            st.session_state[self.key] = said.format(kind=type(exc).__name__, error=exc)
        return True


def apply_settings(settings: Settings) -> None:
    """Ask the sidebar's next run to put these values into its widgets (they cannot change once drawn)."""
    st.session_state[keys.APPLY_SETTINGS] = settings


@contextlib.contextmanager
def progress_box(error_key: str, stop: Callable[[], None], stop_key: str, first_text: str):
    """`with progress_box(...) as (bar, guard): ...`, then `if guard.failed: return`: a stoppable
    measurement's box above the page (a Stop button calling `stop`, a progress bar starting at
    `first_text`), gone when the measurement ends; an error inside is ErrorGuard's (under `error_key`)."""
    area = st.empty()
    box = area.container(border=True)
    box.button(language.words("session")["stop"], icon=":material/stop:", on_click=stop, key=stop_key)
    bar = box.progress(0.0, text=first_text)
    with ErrorGuard(error_key, area) as guard:
        yield bar, guard
    area.empty()
