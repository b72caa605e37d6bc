"""The server's load test: N clients of Streamlit's websocket protocol open the app at once, no browser.

    .venv/bin/python scripts/ws_load.py --clients 3                  # 3 prompts (greedy, 16 new, baseline on)
    .venv/bin/python scripts/ws_load.py --clients 3 --shared         # 3 sessions opening one link
    .venv/bin/python scripts/ws_load.py --clients 30 --timeout 300 --out artifacts/ws-load-30.json
    .venv/bin/python scripts/ws_load.py --clients 60 --replicas 2     # two replicas behind nginx, one killed mid-class

Each client is one student (specviz_app/serving/ws_client.py): it sends the page load's `rerun_script` with
its own shared link's query string (its prompt and seed; greedy, --max-new tokens, the target-alone
baseline on), which starts a decode on the first visit, and times from opening the link to its first
tokens and to its finished run, or notes its failure (a session past the queue's bound that is told
"The model is busy: …" and started nothing counts as refused, not failed). A class's browsers run on the students' own
machines, so this measures the server alone (scripts/soak.py drives Chromium, for what a screen shows).

With --replicas N it starts N replicas behind nginx instead (specviz_app/serving/replicas.py, one torch
thread each), sends the class through the proxy with clients that reconnect as Streamlit's frontend does,
and kills the replica that first has --in-flight students decoding (SIGKILL): the report says who was
served, who moved, each reconnection's time and any finished trace lost (specviz_app/serving/lecture_hall.py).

It starts the app itself (`streamlit run app.py` on a free port of 127.0.0.1, offline; --url uses one
already running, on loopback only), warms it with one run (a class arrives at an app open a while),
then opens every client at once. Bounded: at most MAX_CLIENTS clients, each given --timeout seconds.
Meanwhile it samples the app's resident memory and CPU time (psutil; /proc without it), and it
scrapes /metrics before and after: the app's own count of first tokens and finished runs must grow
by what the clients saw. The report (JSON, and a summary on stdout) is what docs/reliability.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.engine.machine import cpu_name  # noqa: E402
from specviz.serving.gate import BUSY  # noqa: E402
from specviz.traces import metrics  # noqa: E402
from specviz_app.serving import ws_client  # noqa: E402
from specviz_app.serving.replicas import start_one_app, stop_process  # noqa: E402 - one app on a free port, and its stop

MAX_CLIENTS = 100  # bounded: two classes and then some; a typo of 3000 must not fork a flood
SAMPLE_S = 0.5  # how often the app's memory and CPU are read
PROMPT_WORDS = [
    "apple", "river", "violin", "comet", "desert", "lantern", "glacier", "pepper", "harbor", "meadow",
    "falcon", "marble", "thunder", "cactus", "island", "copper", "orchid", "canyon", "walrus", "saddle",
    "volcano", "pillow", "tundra", "magnet", "lagoon", "quartz", "beetle", "prairie", "anchor", "jungle",
]  # fmt: skip
TTFT_COUNT = "specviz:time_to_first_token_seconds_count"
TTFT_SUM = "specviz:time_to_first_token_seconds_sum"
E2E_COUNT = "specviz:e2e_request_latency_seconds_count"


def link(i: int, max_new: int, baseline: bool) -> dict[str, str]:
    """Client i's shared link: its own prompt and seed, greedy (params.py's URL keys)."""
    word = PROMPT_WORDS[i % len(PROMPT_WORDS)]
    return {
        "prompt": f"Write one sentence about a {word} (student {i + 1}).",
        "max_new": str(max_new),
        "temperature": "0",
        "baseline": "1" if baseline else "0",
        "pair": "offline",
        "seed": str(i + 1),
    }


def listening_pid(url: str) -> int | None:
    """The process listening on the --url's port, to sample its memory and CPU (None when psutil is
    missing or the process is not this user's to see)."""
    try:
        import psutil
    except ImportError:
        return None
    port = urllib.parse.urlsplit(url).port
    try:
        listening = [c for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == port]
    except (OSError, psutil.Error):
        return None
    return next((c.pid for c in listening if c.pid is not None), None)


def scrape(url: str) -> dict[str, float]:
    """/metrics as {series: value} (the Prometheus text format's sample lines)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        return metrics.parse_samples(r.read().decode())


def usage(pid: int) -> tuple[float, float] | None:
    """(resident MB, CPU seconds) of the app and its children; None once it is gone."""
    try:
        import psutil
    except ImportError:
        return _proc_usage(pid)
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        rss = sum(p.memory_info().rss for p in procs) / 1e6
        return rss, sum(p.cpu_times().user + p.cpu_times().system for p in procs)
    except psutil.Error:
        return None


def _proc_usage(pid: int) -> tuple[float, float] | None:
    """usage() from /proc, the app's own process only (Streamlit starts no children)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return rss_kb / 1e3, (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


class Sampler(threading.Thread):
    """The app's memory and CPU time, every SAMPLE_S seconds until stop()."""

    def __init__(self, pid: int | None) -> None:
        super().__init__(daemon=True)
        self.pid, self.samples, self._stop_event = pid, [], threading.Event()

    def run(self) -> None:
        while self.pid is not None and not self._stop_event.is_set():
            if (got := usage(self.pid)) is not None:
                self.samples.append((time.monotonic(), *got))
            self._stop_event.wait(SAMPLE_S)

    def stop(self) -> dict:
        self._stop_event.set()
        self.join(10)
        if len(self.samples) < 2:
            return {"memory_mb": None, "cpu_s": None, "over_s": None}
        (t0, m0, c0), (t1, _, c1) = self.samples[0], self.samples[-1]
        peak = max(m for _, m, _ in self.samples)
        return {
            "memory_mb": {"start": round(m0), "peak": round(peak)},
            "cpu_s": round(c1 - c0, 1),
            "over_s": round(t1 - t0, 1),
        }


def run_clients(url: str, queries: list[dict], timeout_s: float) -> list[ws_client.Visit]:
    """Every client at once (each in its own thread, released together), each bounded by timeout_s."""
    visits: list[ws_client.Visit | None] = [None] * len(queries)
    go = threading.Barrier(len(queries))

    def client(i: int) -> None:
        go.wait()
        visits[i] = ws_client.open_link(url, queries[i], timeout_s)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(len(queries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 30)  # open_link ends by its own deadline; this only bounds a hang
    return [v or ws_client.Visit(error="the client did not return") for v in visits]


def spread(values: list[float | None]) -> dict:
    """How many came, and their median, 90th percentile and last (seconds)."""
    got = sorted(v for v in values if v is not None)
    if not got:
        return {"n": 0}
    p90 = got[min(len(got) - 1, round(0.9 * (len(got) - 1)))]
    return {"n": len(got), "median": round(statistics.median(got), 2), "p90": round(p90, 2), "last": round(got[-1], 2)}


def admission(before: dict, after: dict) -> dict:
    """What the server's admission did during the load (/metrics counters' growth)."""
    names = ("requests_deferred", "admission_retries", "requests_refused", "session_reconnections")
    return {n: int(after.get(f"specviz:{n}_total", 0) - before.get(f"specviz:{n}_total", 0)) for n in names}


def cross_check(before: dict, after: dict, visits: list[ws_client.Visit]) -> dict:
    """What /metrics counted during the load against what the clients saw: every client whose run
    finished was counted once in time to first token and once in end-to-end latency."""
    finished = sum(v.ok for v in visits)
    ttft = after.get(TTFT_COUNT, 0) - before.get(TTFT_COUNT, 0)
    e2e = after.get(E2E_COUNT, 0) - before.get(E2E_COUNT, 0)
    mean = (after.get(TTFT_SUM, 0) - before.get(TTFT_SUM, 0)) / ttft if ttft else None
    return {
        "finished_clients": finished,
        "ttft_counted": int(ttft),
        "e2e_counted": int(e2e),
        "ttft_mean_s": None if mean is None else round(mean, 2),  # the server's own clock, from its Run's start
        "agree": int(ttft) >= finished and int(e2e) == finished,  # a failed run may have shown tokens first
    }


def load(url: str, pid: int | None, args) -> dict:
    """Warm up, then every client at once; the report."""
    warm = ws_client.open_link(url, link(len(PROMPT_WORDS) + 7, args.max_new, not args.no_baseline), args.timeout)
    if not warm.ok:
        raise SystemExit(f"the warm-up run failed: {warm.error}")
    n = args.clients
    queries = [link(0 if args.shared else i, args.max_new, not args.no_baseline) for i in range(n)]
    before, sampler = scrape(url), Sampler(pid)
    sampler.start()
    visits = run_clients(url, queries, args.timeout)
    used = sampler.stop()
    # running.run observes a finished run before its page draws "Showing: run here": no wait needed.
    after = scrape(url)
    check = cross_check(before, after, visits)
    return {
        "clients": n,
        "shared_link": args.shared,
        "settings": f"greedy, {args.max_new} new tokens, baseline {'off' if args.no_baseline else 'on'}, offline pair",
        "first_tokens_s": spread([v.first_tokens_s for v in visits]),
        "finished_s": spread([v.finished_s for v in visits]),
        # A session past the queue's bound is told so and nothing is started: a refusal, not a failure.
        "refused": sum(v.error.startswith(BUSY) for v in visits),
        # Told their wait was past the bound and served later without pressing anything.
        "deferred": sum(v.deferred for v in visits),
        "deferred_served": sum(v.deferred and v.ok for v in visits),
        "admission": admission(before, after),
        "failures": sum(not v.ok and not v.error.startswith(BUSY) for v in visits),
        "errors": sorted({v.error for v in visits if v.error}),
        "app": used,
        "metrics": check,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "visits": [
            {"first_tokens_s": v.first_tokens_s, "finished_s": v.finished_s, "deferred": v.deferred, "error": v.error}
            for v in visits
        ],
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=3, help=f"clients at once, 1 to {MAX_CLIENTS}")
    ap.add_argument("--shared", action="store_true", help="every client opens the same link")
    ap.add_argument("--max-new", type=int, default=16, help="new tokens per run")
    ap.add_argument("--no-baseline", action="store_true", help="runs without the target-alone baseline")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds each client may take")
    ap.add_argument("--url", help="an app already running on loopback (default: start one)")
    ap.add_argument("--out", type=Path, help="write the report here as JSON")
    ap.add_argument("--replicas", type=int, default=0, help="replicas behind nginx, one killed mid-class (0: one app)")
    ap.add_argument(
        "--in-flight", type=int, default=5, help="with --replicas: kill once a replica has this many decoding"
    )
    args = ap.parse_args(argv)
    if not 1 <= args.clients <= MAX_CLIENTS:
        ap.error(f"--clients must be 1 to {MAX_CLIENTS}; got {args.clients}")
    if args.url:
        try:
            ws_client.loopback_only(args.url)
        except ValueError as exc:
            ap.error(str(exc))
    return args


def failover(args) -> dict:
    """--replicas: the class through nginx, the replica with --in-flight runs decoding killed under it."""
    from specviz_app.serving import lecture_hall
    from specviz_app.serving.replicas import Deployment, free_port

    (ROOT / "artifacts").mkdir(exist_ok=True)
    with Deployment(
        args.replicas, free_port(), work=ROOT / "artifacts" / "ws-load-replicas", env={"OMP_NUM_THREADS": "1"}
    ) as dep:
        for i in range(args.replicas):
            warm = ws_client.open_link(
                dep.replica_url(i), link(len(PROMPT_WORDS) + 7 + i, args.max_new, True), args.timeout
            )
            if not warm.ok:
                raise SystemExit(f"replica {i + 1}'s warm-up run failed: {warm.error}")
        queries = [link(i, args.max_new, not args.no_baseline) for i in range(args.clients)]
        report = lecture_hall.kill_mid_class(dep, queries, args.timeout, in_flight=args.in_flight)
    report["reconnect_spread_s"] = spread(report["reconnect_s"])
    report["finished_spread_s"] = spread(report["finished_s"])
    report.update(cpu=cpu_name(), cores=os.cpu_count(), replicas=args.replicas)
    report["failures"] = report["students"] - report["served"]
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.replicas:
        report = failover(args)
        if args.out:
            args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        return 0 if report["failures"] == 0 and not report["finished_traces_lost"] else 1
    proc = None
    if args.url is None:
        (ROOT / "artifacts").mkdir(exist_ok=True)
        proc, url = start_one_app(ROOT / "artifacts" / "ws-load-app.log")
    else:
        url = args.url
    try:
        report = load(url, proc.pid if proc else listening_pid(url), args)
    finally:
        if proc is not None:
            stop_process(proc, grace_s=20)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if report["failures"] == 0 and report["metrics"]["agree"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
