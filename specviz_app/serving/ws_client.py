"""A client of Streamlit's own websocket protocol that opens the app as a browser would, without one.

A browser's first message on `/_stcore/stream` is a `rerun_script` BackMsg carrying the page's query
string (Streamlit's frontend does the same on every page load); the server then runs the script for
that session and sends ForwardMsgs: deltas (the page's elements) and `script_finished`. A shared
link with settings starts its decode on the first visit (opening.open_first_visit), so one message
is a whole student: `open_link` sends it, reads what the server sends, and times

- first tokens: the first html element of the running decode's token stream (`sv-stream` with a
  `sv-tok`, render.token_stream_html), or the finished run for a session shown a shared recording;
- the finished run: the page's "Showing: run here…" line (render.trace_notice) and the end of that
  script run;
- a failure: an error box, an exception, a closed connection, or no finished run in time.

scripts/ws_load.py runs N of these at once against a server on loopback and reports them; the
/metrics test (tests/test_metrics_app.py) drives one. Nothing here imports the streamlit runtime:
only its protobuf messages, and the websockets client Streamlit itself depends on.
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass, field

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

STREAM_PATH = "/_stcore/stream"
FIRST_TOKEN_MARKS = ("sv-stream", "sv-tok")  # render.token_stream_html's stream and its tokens
FINISHED_LINE = "Showing: run here"  # render.trace_notice, for a run decoded here or a shared recording


@dataclass
class Visit:
    """What one client saw: seconds from opening the link to its first tokens and its finished run
    (None when they never came), the error if it failed, and the messages read."""

    first_tokens_s: float | None = None
    finished_s: float | None = None
    error: str = ""
    messages: int = 0
    errors_seen: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.finished_s is not None and not self.error


def ws_url(http_url: str) -> str:
    """ws://host:port/_stcore/stream for http://host:port (loopback only: see loopback_only)."""
    parts = urllib.parse.urlsplit(http_url)
    return f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}{parts.path.rstrip('/')}{STREAM_PATH}"


def loopback_only(http_url: str) -> None:
    """Refuse a server that is not this machine's: a load test must never reach another one."""
    host = urllib.parse.urlsplit(http_url).hostname or ""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the load test talks to a server on loopback only (127.0.0.1); got {http_url!r}")


def rerun_message(query: dict[str, str] | str) -> bytes:
    """The BackMsg a page load sends: rerun the main script with this query string, no widget state."""
    msg = BackMsg()
    msg.rerun_script.query_string = query if isinstance(query, str) else urllib.parse.urlencode(query)
    msg.rerun_script.page_script_hash = ""  # the default page (the Playground)
    return msg.SerializeToString()


def open_link(http_url: str, query: dict[str, str] | str, timeout_s: float) -> Visit:
    """Open the app with `query` as one session would and read until its run is on show, it fails,
    or timeout_s passes (then a failure: "no finished run within ... s")."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    loopback_only(http_url)
    visit, start = Visit(), time.monotonic()
    deadline = start + timeout_s
    try:
        with connect(ws_url(http_url), subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s) as ws:
            ws.send(rerun_message(query))
            shown = False
            while visit.finished_s is None and not visit.error:
                left = deadline - time.monotonic()
                if left <= 0:
                    visit.error = f"no finished run within {timeout_s:g} s"
                    break
                try:
                    raw = ws.recv(timeout=left)
                except TimeoutError:
                    continue  # the deadline check above ends it
                visit.messages += 1
                shown = _note(ForwardMsg.FromString(raw), visit, shown, time.monotonic() - start)
    except ConnectionClosed as exc:
        visit.error = visit.error or f"the server closed the connection ({exc})"
    except OSError as exc:
        visit.error = visit.error or f"could not connect to {http_url}: {exc}"
    return visit


def _note(msg: ForwardMsg, visit: Visit, shown: bool, now_s: float) -> bool:
    """Read one ForwardMsg into the visit; returns whether the finished run's line has been seen."""
    kind = msg.WhichOneof("type")
    if kind == "script_finished" and shown:
        visit.finished_s = round(now_s, 3)
        if visit.first_tokens_s is None:  # a shared recording: its tokens came with the finished run
            visit.first_tokens_s = visit.finished_s
    if kind != "delta" or msg.delta.WhichOneof("type") != "new_element":
        return shown
    element = msg.delta.new_element
    what = element.WhichOneof("type")
    if what == "html" and visit.first_tokens_s is None and all(m in element.html.body for m in FIRST_TOKEN_MARKS):
        visit.first_tokens_s = round(now_s, 3)
    elif what == "markdown" and element.markdown.body.startswith(FINISHED_LINE):
        return True
    elif what == "alert" and element.alert.format == Alert.ERROR:
        visit.errors_seen.append(element.alert.body)
        visit.error = element.alert.body.splitlines()[0] if element.alert.body else "an error box"
    elif what == "exception":
        visit.error = f"an exception box: {element.exception.type}: {element.exception.message}"
    return shown
