"""A client of Streamlit's own websocket protocol that opens the app as a browser would, without one.

A browser's first message on `/_stcore/stream` is a `rerun_script` BackMsg carrying the page's query
string (Streamlit's frontend does the same on every page load); the server then runs the script for
that session and sends ForwardMsgs: deltas (the page's elements) and `script_finished`. A shared
link with settings starts its decode on the first visit (opening.open_first_visit), so one message
is a whole student: `open_link` sends it, reads what the server sends, and times

- first tokens: the first html element of the running decode's token stream (`sv-stream` with a
  `sv-tok`, render.token_stream_html), or the finished run for a session shown a shared recording;
- the finished run: the page's "Showing: run here…" line (or "Showing: stored run…",
  render.trace_notice) and the end of that script run;
- a failure: an error box, an exception, a closed connection, or no finished run in time.

With `reconnect=True` it behaves as Streamlit's frontend does when its server goes away: it opens the
stream again (through the same address: nginx sends it to a replica that is alive), names the session
it had, and sends its page load again; the seconds from the loss to the new server's first message are
kept (`reconnect_s`). A lecture-hall test kills a replica under its clients (tests/test_metrics_app.py).

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
# render.trace_notice: a run decoded here or a shared recording; a stored run reopened by its id (replicas)
FINISHED_LINES = ("Showing: run here", "Showing: stored run")
DEFERRED_MARK = "waiting room"  # the status of a deferred run (the catalogue's running.deferred, in English)


@dataclass
class Visit:
    """What one client saw: seconds from opening the link to its first tokens and its finished run
    (None when they never came), the error if it failed, and the messages read."""

    first_tokens_s: float | None = None
    finished_s: float | None = None
    error: str = ""
    messages: int = 0
    errors_seen: list[str] = field(default_factory=list)
    session_id: str = ""  # the session the server gave it (the last one, after a reconnection)
    reconnect_s: list[float] = field(default_factory=list)  # each loss to the next server's first message
    deferred: bool = False  # told its run waits to join the queue (the status of running.on_deferred)
    query: str = ""  # the page's query string as the server last set it (a finished run adds its trace's id)
    replica: str = ""  # which replica answered, behind nginx (its X-Specviz-Replica header)
    notes: list[str] = field(default_factory=list)  # every message box the page showed (warnings, info, errors)
    page_only: bool = False  # done at the page's first finished script run, run or not (a bad link's page)

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


def open_link(
    http_url: str,
    query: dict[str, str] | str,
    timeout_s: float,
    reconnect: bool = False,
    retry_s: float = 0.5,
    had_session: str = "",
    visit: Visit | None = None,
) -> Visit:
    """Open the app with `query` as one session would and read until its run is on show, it fails,
    or timeout_s passes (then a failure: "no finished run within ... s"). reconnect: a lost connection
    is opened again, every retry_s until the deadline, naming the session it had. had_session: the
    first connection names that session, as a page does that comes back from a lost server. visit:
    filled as it goes, for a caller watching clients in flight (a load test choosing when to kill a replica)."""
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    loopback_only(http_url)
    visit, start = visit or Visit(), time.monotonic()
    visit.session_id = visit.session_id or had_session
    visit.query = query if isinstance(query, str) else urllib.parse.urlencode(query)
    deadline, lost_at = start + timeout_s, None
    while True:
        try:
            _read_one_connection(http_url, visit, start, deadline, lost_at)
            return visit
        except (ConnectionClosed, InvalidHandshake, OSError) as exc:  # a 502 from nginx mid-failover included
            what = "the server closed the connection" if isinstance(exc, ConnectionClosed) else "could not connect"
            if not reconnect or time.monotonic() + retry_s >= deadline:
                visit.error = visit.error or f"{what} ({exc})"
                return visit
            lost_at = lost_at if lost_at is not None else time.monotonic()
            time.sleep(retry_s)  # as the frontend waits before it tries again


def _read_one_connection(http_url: str, visit: Visit, start: float, deadline: float, lost_at: float | None) -> None:
    """One websocket connection: the page load sent (the page's query as it last stood, as a browser
    reloads its URL), ForwardMsgs read into the visit until its run is on show, it fails or the
    deadline passes. A lost connection raises (open_link decides)."""
    from websockets.sync.client import connect

    protocols = ["streamlit"] + (["none", visit.session_id] if visit.session_id else [])
    left = max(0.1, deadline - time.monotonic())
    with connect(ws_url(http_url), subprotocols=protocols, max_size=None, open_timeout=left) as ws:
        visit.replica = ws.response.headers.get("X-Specviz-Replica", "")
        ws.send(rerun_message(visit.query))
        shown = False
        while visit.finished_s is None and not visit.error:
            left = deadline - time.monotonic()
            if left <= 0:
                visit.error = f"no finished run within {deadline - start:g} s"
                break
            try:
                raw = ws.recv(timeout=left)
            except TimeoutError:
                continue  # the deadline check above ends it
            if lost_at is not None:
                visit.reconnect_s.append(round(time.monotonic() - lost_at, 3))
                lost_at = None
            visit.messages += 1
            shown = _note(ForwardMsg.FromString(raw), visit, shown, time.monotonic() - start)


def _note(msg: ForwardMsg, visit: Visit, shown: bool, now_s: float) -> bool:
    """Read one ForwardMsg into the visit; returns whether the finished run's line has been seen."""
    kind = msg.WhichOneof("type")
    if kind == "new_session":
        visit.session_id = msg.new_session.initialize.session_id
    if kind == "page_info_changed":
        visit.query = msg.page_info_changed.query_string
    if kind == "delta" and msg.delta.WhichOneof("type") == "add_block":
        visit.deferred = visit.deferred or DEFERRED_MARK in msg.delta.add_block.expandable.label
    if kind == "script_finished" and visit.page_only and visit.finished_s is None:
        visit.finished_s = round(now_s, 3)
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
    elif what == "markdown" and element.markdown.body.startswith(FINISHED_LINES):
        return True
    if what == "alert":
        visit.notes.append(element.alert.body)
    if what == "alert" and element.alert.format == Alert.ERROR:
        visit.errors_seen.append(element.alert.body)
        visit.error = element.alert.body.splitlines()[0] if element.alert.body else "an error box"
    elif what == "exception":
        visit.error = f"an exception box: {element.exception.type}: {element.exception.message}"
    return shown


def malformed_message(http_url: str, timeout_s: float = 30) -> str:
    """Send a frame that is no BackMsg, as a broken or hostile client would; returns what the server
    answered (Streamlit closes such a connection with 1002, protocol error, and serves everyone else)."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    loopback_only(http_url)
    with connect(ws_url(http_url), subprotocols=["streamlit"], open_timeout=timeout_s) as ws:
        ws.send(b"\xff\x00 this is not a BackMsg")
        try:
            while True:
                ws.recv(timeout=timeout_s)
        except ConnectionClosed as exc:
            return f"closed: {exc.rcvd.code if exc.rcvd else 'no code'} {exc.rcvd.reason if exc.rcvd else ''}".strip()
        except TimeoutError:
            return "still open"


def oversized_upload(http_url: str, megabytes: int, timeout_s: float = 60) -> str:
    """Upload a file of `megabytes` MB as a page's file widget would (a live session, its XSRF token);
    returns the server's answer: its status and first line, or how it cut the upload off."""
    import requests

    loopback_only(http_url)
    from websockets.sync.client import connect

    with connect(ws_url(http_url), subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s) as ws:
        ws.send(rerun_message(""))
        session = ""
        while not session:
            msg = ForwardMsg.FromString(ws.recv(timeout=timeout_s))
            if msg.WhichOneof("type") == "new_session":
                session = msg.new_session.initialize.session_id
        http_session = requests.Session()
        http_session.get(f"{http_url}/_stcore/health", timeout=timeout_s)  # sets the XSRF cookie, as for a page
        token = http_session.cookies.get("_streamlit_xsrf", "")
        body = b"\0" * (megabytes * 1024 * 1024)
        try:
            r = http_session.put(
                f"{http_url}/_stcore/upload_file/{session}/oversized",
                files={"file": ("big.json", body, "application/json")},
                headers={"X-Xsrftoken": token},
                timeout=timeout_s,
            )
        except requests.ConnectionError as exc:
            return f"cut off: {type(exc).__name__}"
        return f"{r.status_code} {r.text.splitlines()[0] if r.text else ''}".strip()
