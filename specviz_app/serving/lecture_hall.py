"""A class split between replicas behind nginx, and one replica killed mid-class, without browsers.

Each student is a websocket client (ws_client.open_link) that reconnects as Streamlit's frontend does:
through nginx, which sends it to a replica that is alive, naming the session it had and reloading its
page's link as it last stood. `kill_mid_class` releases the class at once through the proxy, waits
until a replica has students whose runs are in flight (first tokens shown, not finished), kills that
replica with SIGKILL, and waits for every student. The report says who was served, who moved and how
long each took to reach the other replica, and whether every finished run's trace is in the shared
store (scripts/ws_load.py --replicas; tests/test_metrics_app.py runs a small class).
"""

from __future__ import annotations

import re
import threading
import time

from specviz_app.serving import ws_client
from specviz_app.serving.replicas import Deployment

TRACE_ID = re.compile(r"(?:^|&)trace=([0-9a-f]{20})")


def kill_mid_class(dep: Deployment, queries: list[dict], timeout_s: float, in_flight: int = 1) -> dict:
    """Every query opened at once through dep's proxy; the replica that first has `in_flight` students
    decoding is killed (SIGKILL) while they are. Returns the report (see the module's docstring)."""
    visits = [ws_client.Visit() for _ in queries]
    go = threading.Barrier(len(queries) + 1)

    def student(i: int) -> None:
        go.wait()
        ws_client.open_link(dep.url, queries[i], timeout_s, reconnect=True, visit=visits[i])

    threads = [threading.Thread(target=student, args=(i,), daemon=True) for i in range(len(queries))]
    for t in threads:
        t.start()
    go.wait()
    start = time.monotonic()
    killed, killed_at = _kill_when_in_flight(dep, visits, in_flight, start + timeout_s)
    for t in threads:
        t.join(timeout_s + 30)  # open_link ends by its own deadline; this only bounds a hang
    return _report(dep, visits, killed, None if killed_at is None else killed_at - start)


def _kill_when_in_flight(dep: Deployment, visits: list, in_flight: int, deadline: float) -> tuple[str, float | None]:
    """Kill the first replica with `in_flight` students decoding: (its address, when), or ("", None)."""
    while time.monotonic() < deadline:
        decoding: dict[str, int] = {}
        for v in visits:
            if v.replica and v.first_tokens_s is not None and v.finished_s is None and not v.error:
                decoding[v.replica] = decoding.get(v.replica, 0) + 1
        busy = [replica for replica, n in decoding.items() if n >= in_flight]
        if busy:
            port = int(busy[0].rsplit(":", 1)[1])
            dep.stop_replica(dep.replica_ports.index(port), crash=True)
            return busy[0], time.monotonic()
        time.sleep(0.05)
    return "", None


def _report(dep: Deployment, visits: list, killed: str, killed_after_s: float | None) -> dict:
    moved = [v for v in visits if v.reconnect_s]
    finished_ids = [m.group(1) for v in visits if v.ok and (m := TRACE_ID.search(v.query))]
    stored = {path.stem for path in dep.store.glob("*.json")}
    return {
        "students": len(visits),
        "served": sum(v.ok for v in visits),
        "killed": killed,
        "killed_after_s": None if killed_after_s is None else round(killed_after_s, 2),
        "moved": len(moved),
        "moved_served": sum(v.ok for v in moved),
        "reconnect_s": sorted(s for v in moved for s in v.reconnect_s),
        "finished_s": sorted(v.finished_s for v in visits if v.finished_s is not None),
        "finished_traces": len(finished_ids),
        "finished_traces_lost": sorted(set(finished_ids) - stored),
        "errors": sorted({v.error for v in visits if v.error}),
    }
