"""The classroom soak: N browser sessions open the app at once, on loopback, and each is timed.

It measures what a screen shows, with every Chromium on this machine's cores beside the server; the
server alone, as a class whose browsers run on the students' machines loads it, is
scripts/ws_load.py's (Streamlit's websocket protocol, no browser).

    .venv/bin/python scripts/soak.py                 # 30 sessions, 30 prompts (greedy, 16 new, baseline on)
    .venv/bin/python scripts/soak.py --shared        # 30 sessions opening one link
    .venv/bin/python scripts/soak.py --sessions 5 --timeout 120 --out artifacts/soak-small.json

It starts the app itself (`streamlit run app.py` on a free port of 127.0.0.1, offline, as the
browser tests do; `--url` uses one already running instead, on loopback only), loads the models once
with a warm-up session (a class arrives at an app that has been open a while), then opens every
session in its own Chromium context (Debian's /usr/bin/chromium through Playwright) and polls
them all until each shows its finished run or the time limit passes.

Per session it records the time from opening the link to the first token drawn on the page
(the stream of the running decode, or the finished run for a session shown a shared recording) and
to the finished run ("Showing: run here..."), and whether it failed: an error box, a traceback, or
no finished run within --timeout. The app's resident memory (its process and children) is sampled
all along. The report (JSON, and a summary on stdout) is what docs/reliability.md quotes; the
issue's targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz_app.serving.replicas import start_one_app, stop_process  # noqa: E402 - one app on a free port, and its stop

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
PROMPT_WORDS = [
    "apple", "river", "violin", "comet", "desert", "lantern", "glacier", "pepper", "harbor", "meadow",
    "falcon", "marble", "thunder", "cactus", "island", "copper", "orchid", "canyon", "walrus", "saddle",
    "volcano", "pillow", "tundra", "magnet", "lagoon", "quartz", "beetle", "prairie", "anchor", "jungle",
]  # fmt: skip
TARGETS = {"first_tokens_s": 10.0, "finished_s": 60.0, "failures": 0, "memory_mb": 2500.0, "shared_finished_s": 15.0}


def prompts(n: int) -> list[str]:
    return [f"Write one sentence about a {PROMPT_WORDS[i % len(PROMPT_WORDS)]} (student {i + 1})." for i in range(n)]


def link(prompt: str, seed: int) -> dict:
    return {
        "prompt": prompt,
        "max_new": "16",
        "temperature": "0",
        "baseline": "1",
        "pair": "offline",
        "seed": str(seed),
    }


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of the app and its children, in MB (None when it is not ours to measure)."""
    if pid is None:
        return None
    import psutil

    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 1e6
    except psutil.Error:
        return None


# Installed in every page before the app loads: the page itself notes (epoch ms) when it first shows
# a token and when it first shows its finished run, so the times do not depend on how fast the
# soak polls 30 busy pages (a poll of a starved page can take seconds).
MARKS = """
window.__sv = {first: null, done: null};
const svCheck = () => {
    const now = Date.now();
    if (window.__sv.first === null && document.querySelector('.sv-stream .sv-tok')) window.__sv.first = now;
    if (window.__sv.done === null) {
        const app = document.querySelector('[data-testid="stApp"]');
        if (app && app.getAttribute('data-test-script-state') === 'notRunning') {
            const caps = document.querySelectorAll('[data-testid="stCaptionContainer"]');
            for (const c of caps) if (c.textContent.startsWith('Showing: run here')) { window.__sv.done = now; break; }
        }
    }
};
new MutationObserver(svCheck).observe(document, {subtree: true, childList: true, attributes: true});
setInterval(svCheck, 250);
"""


def cpu_s(pids_of) -> float:
    """CPU seconds (user + system) used so far by the processes pids_of() lists."""
    import psutil

    total = 0.0
    for proc in pids_of():
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def app_procs(pid):
    import psutil

    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def browser_procs(app_pid):
    """Everything this script started except the app: Playwright's driver and Chromium."""
    import psutil

    app = {p.pid for p in app_procs(app_pid)} if app_pid else set()
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in app]


def state_of(page) -> dict:
    """What one poll sees: tokens drawn, finished, the error if any (one evaluate: 30 pages poll fast)."""
    return page.evaluate(
        """() => {
            const text = document.body.innerText;
            const app = document.querySelector('[data-testid="stApp"]');
            const caps = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')].map(e => e.innerText);
            const errs = [...document.querySelectorAll('[data-testid="stAlertContentError"]')].map(e => e.innerText);
            return {
                tokens: document.querySelectorAll('.sv-stream .sv-tok').length,
                showing: caps.find(c => c.startsWith('Showing:')) || '',
                running: app ? app.getAttribute('data-test-script-state') : 'none',
                error: errs.join(' | ')
                       || (document.querySelector('[data-testid="stException"]') ? 'exception box' : '')
                       || (text.includes('Traceback') ? 'traceback' : ''),
                waiting: (text.match(/Waiting for the model: [^\\n]*/) || [''])[0],
                status: /Loading the models|Decoding|Waiting for|Another session is decoding/.test(text),
                marks: window.__sv || {},
            };
        }"""
    )


def soak(url: str, app_pid: int | None, n: int, shared: bool, timeout_s: float) -> dict:
    from playwright.sync_api import sync_playwright

    memory = [rss_mb(app_pid)]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        warm_up(browser, url)
        memory.append(rss_mb(app_pid))
        memory_before = memory[-1]

        texts = [prompts(1)[0]] * n if shared else prompts(n)
        app_cpu0 = cpu_s(lambda: app_procs(app_pid)) if app_pid else None
        browser_cpu0 = cpu_s(lambda: browser_procs(app_pid))
        wall0 = time.monotonic()
        opened = open_sessions(browser, url, texts, shared)
        sessions = [
            {"session": i + 1, "opened_at_s": round(opened[i][1] - opened[0][1], 2), "status_s": None}
            | {"first_tokens_s": None, "finished_s": None, "error": ""}
            for i in range(n)
        ]
        places = poll_sessions(opened, sessions, timeout_s, memory, app_pid)
        # Where the machine's CPU went while the class ran: the app, or the 30 browsers beside it.
        cpu = {
            "wall_s": round(time.monotonic() - wall0, 1),
            "app_s": round(cpu_s(lambda: app_procs(app_pid)) - app_cpu0, 1) if app_pid else None,
            "browsers_s": round(cpu_s(lambda: browser_procs(app_pid)) - browser_cpu0, 1),
        }
        for s in sessions:
            if s["finished_s"] is None and not s["error"]:
                s["error"] = f"no finished run within {timeout_s:.0f} s"
        browser.close()

    mem = [m for m in memory if m is not None]
    return {
        "variant": "shared link" if shared else "different prompts",
        "sessions": n,
        "settings": "greedy, 16 new tokens, baseline on, offline pair",
        "first_tokens_s": spread(sessions, "first_tokens_s"),
        "finished_s": spread(sessions, "finished_s"),
        "failures": sum(1 for s in sessions if s["error"]),
        "memory_mb": {"before": round(memory_before or 0), "peak": round(max(mem)) if mem else None},
        "cpu_seconds": cpu,
        "waiting_lines_seen": places[:10],
        "sessions_detail": sessions,
        "targets": TARGETS,
    }


def warm_up(browser, url: str) -> None:
    """The first page starts the models' preload; one tiny run waits for it to finish."""
    warm = browser.new_context().new_page()
    warm.goto(f"{url}/?" + urllib.parse.urlencode(dict(link("Say hi.", 0), max_new="2", baseline="0")))
    warm.wait_for_function("() => document.body.innerText.includes('Showing: run here')", timeout=300_000)
    warm.context.close()


def open_sessions(browser, url: str, texts: list[str], shared: bool) -> list[tuple]:
    """One Chromium context per session, each opening its link (MARKS installed first) ->
    (page, monotonic time it was opened, epoch time it was opened) per session."""
    opened = []
    for i, prompt in enumerate(texts):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(MARKS)
        page = context.new_page()
        at, at_epoch = time.monotonic(), time.time()
        page.goto(f"{url}/?" + urllib.parse.urlencode(link(prompt, 1 if shared else i + 1)), wait_until="commit")
        opened.append((page, at, at_epoch))
    return opened


def poll_sessions(opened: list[tuple], sessions: list[dict], timeout_s: float, memory: list, app_pid) -> list[str]:
    """Poll every unfinished page, sampling the app's memory after each round, until all have
    finished or failed or timeout_s passes -> the "Waiting for the model" lines seen."""
    places: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = 0
        for (page, at, at_epoch), s in zip(opened, sessions, strict=True):
            if s["finished_s"] is not None or s["error"]:
                continue
            pending += 1
            try:
                seen = state_of(page)
            except Exception as exc:  # noqa: BLE001 - a page that broke is a failure, the soak goes on
                s["error"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            note(s, seen, time.monotonic() - at, at_epoch)
            if seen["waiting"] and len(places) < 200:
                places.append(seen["waiting"][:120])
        memory.append(rss_mb(app_pid))
        if not pending:
            break
        time.sleep(0.2)
    return places


def note(s: dict, seen: dict, now: float, opened_epoch: float) -> None:
    """One poll of one session's page (`seen`, `now` seconds after it was opened) noted in its record s."""
    marks = seen.get("marks") or {}
    if seen["status"] and s["status_s"] is None:  # the app answered: its run began (as polled)
        s["status_s"] = round(now, 2)
    if marks.get("first") and s["first_tokens_s"] is None:  # as the page itself noted it
        s["first_tokens_s"] = round(marks["first"] / 1000 - opened_epoch, 2)
    if seen["error"]:
        s["error"] = seen["error"][:300]
    elif marks.get("done"):
        s["finished_s"] = round(marks["done"] / 1000 - opened_epoch, 2)
        s["polled_finished_s"] = round(now, 2)
        s["shown"] = seen["showing"][:160]
        if s["first_tokens_s"] is None:  # a shared recording: its tokens come with the finished run
            s["first_tokens_s"] = s["finished_s"]


def spread(sessions: list[dict], key: str) -> dict:
    """Median, 90th percentile and maximum of one time over the sessions that have it."""
    values = [s[key] for s in sessions if s[key] is not None]
    if not values:
        return {"n": 0}
    values.sort()
    return {
        "n": len(values),
        "median": round(statistics.median(values), 2),
        "p90": values[min(len(values) - 1, int(0.9 * len(values)))],
        "max": values[-1],
    }


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
        return f"{name}, {os.cpu_count()} CPUs"
    except OSError:
        return f"{os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--shared", action="store_true", help="every session opens the same link")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds the sessions may take in all (bounded)")
    ap.add_argument("--url", help="an app already running on 127.0.0.1 (default: start one)")
    ap.add_argument("--out", help="the JSON report (default: artifacts/soak-<variant>.json)")
    args = ap.parse_args(argv)
    if not 1 <= args.sessions <= 100 or not 1 <= args.timeout <= 600:
        ap.error("--sessions must be 1..100 and --timeout 1..600 s")
    if args.url and urllib.parse.urlparse(args.url).hostname not in ("127.0.0.1", "localhost"):
        ap.error("the soak runs on loopback only: --url must be http://127.0.0.1:<port>")
    if not Path(CHROMIUM).is_file():
        ap.error(f"{CHROMIUM} is missing: apt-get install chromium")
    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    proc = None
    try:
        if args.url:
            url, pid = args.url.rstrip("/"), None
        else:
            proc, url = start_one_app(artifacts / "soak-app.log")
            pid = proc.pid
        started = time.monotonic()
        report = soak(url, pid, args.sessions, args.shared, args.timeout)
        report["wall_s"] = round(time.monotonic() - started, 1)
        report["cpu"] = cpu_name()
    finally:
        if proc is not None:
            stop_process(proc, grace_s=90)
    out = Path(args.out) if args.out else artifacts / f"soak-{'shared' if args.shared else 'prompts'}.json"
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    first, done = report["first_tokens_s"], report["finished_s"]
    print(f"{report['variant']}: {report['sessions']} sessions on {report['cpu']}")
    print(f"  first tokens: median {first.get('median')} s, p90 {first.get('p90')} s, max {first.get('max')} s")
    print(f"  finished run: median {done.get('median')} s, p90 {done.get('p90')} s, max {done.get('max')} s")
    print(f"  failures: {report['failures']}; app memory {report['memory_mb']} MB; CPU seconds {report['cpu_seconds']}")
    print(f"  targets: {TARGETS}; report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
