"""A browser that comes back to a server that does not hold its session, counted for /metrics.

Streamlit's frontend reconnects a lost websocket by itself and names the session it had: the third
entry of its `Sec-WebSocket-Protocol` header (streamlit's starlette_websocket._parse_subprotocols).
The server that holds that session resumes it, and the page script does not run again. Any other
server (a replica lost behind nginx, or an app restarted) makes a new session, and the page runs
again from its link: a finished run reopens from the shared trace store, an unfinished one starts
again by itself. `note_reconnection` counts such a session once, as
`specviz:session_reconnections_total`.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specviz.traces import metrics

NOTED = "_specviz_reconnection_noted"  # session_state: this session was looked at once


def came_back_from(headers: Mapping[str, str], session_id: str) -> str | None:
    """The session a client says it had, when it is not this one (None for a first visit, or for a
    session this server resumed)."""
    raw = next((v for k, v in headers.items() if k.lower() == "sec-websocket-protocol"), "") or ""
    entries = [entry.strip() for entry in raw.split(",")]
    had = entries[2] if len(entries) >= 3 else ""
    return had if had and had != session_id else None


def note_reconnection() -> None:
    """Count this session once if its browser came back from a session this server did not hold."""
    if st.session_state.get(NOTED):
        return
    st.session_state[NOTED] = True
    ctx = get_script_run_ctx()
    if ctx is not None and came_back_from(st.context.headers, ctx.session_id):
        metrics.METRICS.session_reconnections.inc()
