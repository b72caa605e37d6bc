"""Browser fixtures: the real app under `streamlit run`, and Debian's Chromium driven by Playwright.

One app process serves the whole browser session of tests (models load once, as in production);
under pytest-xdist, one per worker that runs browser tests. Its log goes to artifacts/app.log
(app-gw0.log, ... under xdist); every test checks that the part of the log written while it ran
holds no traceback, and that no page it saw showed one. Screenshots go to
artifacts/screenshots/: a failed test's pages always, every step's with SPECVIZ_SCREENSHOTS=1.
Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import wait_until_serving
from specviz_app.serving.replicas import free_port  # the app's own port

from .helpers import (
    APP_LOG,
    CHROMIUM,
    CHROMIUM_ARGS,
    RUN_TIMEOUT_MS,
    SCREENSHOTS,
    assert_no_traceback,
    shot,
    wait_idle,
    watch_server,
)

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def serve_app(log_path: Path, extra_env: dict | None = None, client_faults: str = ""):
    """Start the app as `streamlit run app.py` from the repository root does (the same script and
    server settings as `specviz app`, tests/test_install.py), on a free port, offline; yield its URL
    and stop it on the way out. Its log goes to `log_path`, and must hold no traceback but those
    Streamlit logs after a `client_faults` line (a client's fault it logs for the operator, such as a
    malformed websocket frame: "Error deserializing back message")."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Unbuffered: what the server prints is in the log as it prints it, so a test that reads the log
    # after its last script run ended reads all that run wrote (app_log_has_no_traceback).
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra_env or {})
    log = log_path.open("w")
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    cmd += ["--server.address", "127.0.0.1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(proc, url, log_path)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    text = log_path.read_text(errors="replace")
    faults = text.count(client_faults) if client_faults else 0
    assert text.count("Traceback") == faults, f"the app logged a traceback; see {log_path}"


@pytest.fixture(scope="session")
def app_url():
    """The app every browser test of the session shares (models load once, as in production)."""
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (./dev.sh test does)")
    pytest.importorskip("playwright")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with serve_app(APP_LOG) as url:
        yield url


@pytest.fixture(autouse=True)
def app_log_has_no_traceback(request):
    """The part of the app log written during each browser test holds no traceback. The test's
    pages waited for their script runs to end (helpers.wait_idle), and the server logs a run's
    uncaught error before it reports the run ended, unbuffered (serve_app): that part is all in.
    A background thread's traceback that comes later fails serve_app's check of the whole log."""
    if "app_url" not in request.fixturenames:
        yield
        return
    start = APP_LOG.stat().st_size if APP_LOG.exists() else 0
    yield
    with APP_LOG.open(errors="replace") as f:
        f.seek(start)
        written = f.read()
    assert "Traceback" not in written, f"the app logged a traceback during this test:\n{written[-4000:]}"


@pytest.fixture(scope="session")
def browser(app_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def browser_context(browser):
    """The one browser context of the session's pages. Every page (tab) is its own Streamlit session,
    as a student's tabs are; what the pages share is the browser's cache. A page in a fresh context
    cost Chromium several times the CPU of one in a context that had loaded the app's scripts, and
    Chromium is the suite's largest user of CPU (docs/reliability.md has the figures)."""
    ctx = watch_server(browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True))
    yield ctx
    ctx.close()


@pytest.fixture
def new_page(browser_context, request):
    """new_page(query, path=..., app=...) -> a new tab (its own Streamlit session) showing the app
    (the session's shared one unless `app` names another's URL)."""
    pages = []

    def make(
        query: dict | None = None,
        wait: bool = True,
        timeout_ms: int = RUN_TIMEOUT_MS,
        path: str = "",
        viewport: tuple[int, int] = (1400, 1000),
        app: str | None = None,
    ):
        page = browser_context.new_page()
        pages.append(page)
        page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
        page.set_default_timeout(60_000)
        url = (app or request.getfixturevalue("app_url")) + "/" + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        page.goto(url)
        if wait:
            wait_idle(page, timeout_ms)
        return page

    yield make
    failed = getattr(request.node, "failed_call", False)
    open_pages = [page for page in pages if not page.is_closed()]
    try:
        for i, page in enumerate(open_pages):
            if failed:  # what the page showed when the test failed, for the CI log's reader
                shot(page, f"failed-{request.node.name}-{i}", always=True)
            assert_no_traceback(page)
    finally:  # the next test's tabs share the context: none of this test's is left open
        for page in open_pages:
            page.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Marks a test whose call failed (item.failed_call), so new_page saves its pages' screenshots."""
    report = yield
    if report.when == "call" and report.failed:
        item.failed_call = True
    return report


@pytest.fixture(scope="session")
def foreign_vocab_model(tmp_path_factory):
    """A local model folder whose vocabulary differs from the default target's."""
    from .helpers import save_foreign_vocab_model

    return save_foreign_vocab_model(tmp_path_factory.mktemp("foreign-vocab"))
