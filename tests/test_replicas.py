"""Two app replicas behind nginx on loopback (specviz_app/serving/replicas.py): one stops mid-class, its
students' pages reconnect to the other by themselves and show the very runs they had finished,
read back from the shared trace store. Skips, saying why, without nginx or Chromium.

Run it alone with `.venv/bin/python -m pytest tests/test_replicas.py` (a few minutes on 2 cores)."""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path

import pytest
from browser.helpers import CHROMIUM, CHROMIUM_ARGS, RUN_TIMEOUT_MS, assert_no_traceback, classroom, showing, wait_idle

from specviz_app.serving.replicas import Deployment, free_port, nginx_binary

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ["Name a river.", "Name a mountain.", "Name a city.", "Name a lake.", "Name a desert.", "Name a sea."]


def _stream(page) -> str:
    return page.locator(".sv-stream").first.inner_text()


def _trace_id(page) -> str:
    match = re.search(r"[?&]trace=([0-9a-f]{20})", page.url)
    assert match, f"the page's URL carries no stored trace's id: {page.url}"
    return match.group(1)


def test_the_generated_nginx_config_is_sticky_proxies_websockets_and_passes_nginx_t(tmp_path):
    import subprocess

    if nginx_binary() is None:
        pytest.skip("nginx is not installed: `apt-get install nginx` (./dev.sh test installs it)")
    dep = Deployment(3, 18500, work=tmp_path, replica_ports=[18501, 18502, 18503])
    conf = dep.write_config().read_text(encoding="utf-8")
    assert "hash $sticky consistent;" in conf and "map $cookie_specviz_replica $sticky" in conf
    assert "proxy_set_header Upgrade $http_upgrade;" in conf and "proxy_next_upstream error" in conf
    assert all(f"server 127.0.0.1:{p} " in conf for p in (18501, 18502, 18503))
    assert "listen 127.0.0.1:18500;" in conf  # loopback unless asked otherwise
    test = [dep.nginx, "-t", "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path)]
    check = subprocess.run(test, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    with pytest.raises(ValueError):
        Deployment(0)


@pytest.mark.browser
@pytest.mark.classroom
@classroom
def test_a_replica_stopped_mid_class_loses_no_finished_trace(tmp_path):
    if nginx_binary() is None:
        pytest.skip("nginx is not installed: `apt-get install nginx` (./dev.sh test installs it)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (./dev.sh test does)")
    pytest.importorskip("playwright")
    from playwright.sync_api import sync_playwright

    with Deployment(2, free_port(), work=tmp_path / "deployment") as dep, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        students = []  # (page, replica address, prompt)
        for prompt in PROMPTS:  # each browser gets its own cookie, so nginx spreads them
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.set_default_timeout(60_000)
            query = {"prompt": prompt, "max_new": "8", "temperature": "0", "baseline": "0", "pair": "offline"}
            response = page.goto(f"{dep.url}/?{urllib.parse.urlencode(query)}")
            students.append((page, response.headers.get("x-specviz-replica"), prompt))
            if len(students) >= 3 and len({r for _, r, _ in students}) == 2:
                break
        replicas = sorted({r for _, r, _ in students})
        assert len(replicas) == 2, f"nginx sent every browser to one replica: {replicas}"

        finished = {}
        for page, _, prompt in students:
            wait_idle(page, RUN_TIMEOUT_MS)
            assert_no_traceback(page)
            assert showing(page).startswith("Showing: run here"), showing(page)
            finished[prompt] = (_trace_id(page), _stream(page))
        assert all((tmp_path / "deployment" / "traces" / f"{tid}.json").is_file() for tid, _ in finished.values())

        # Mid-class, the first student's replica goes away at once.
        gone = students[0][1]
        dep.stop_replica(dep.replica_ports.index(int(gone.rsplit(":", 1)[1])), crash=True)
        moved = [(page, prompt) for page, replica, prompt in students if replica == gone]
        start = time.monotonic()
        for page, prompt in moved:  # Streamlit's page reconnects by itself; nginx sends it to the other one
            page.wait_for_function(
                "() => document.body.innerText.includes('Showing: stored run')", timeout=RUN_TIMEOUT_MS
            )
            wait_idle(page)
            assert_no_traceback(page)
            tid, stream = finished[prompt]
            assert showing(page).startswith(f"Showing: stored run {tid}, recorded at "), showing(page)
            assert _stream(page) == stream  # the very run it had finished, token for token
            assert _trace_id(page) == tid
        print(f"{len(moved)} students moved to the other replica in {time.monotonic() - start:.1f} s")

        # The students of the replica that stayed kept their sessions: nothing reran.
        for page, replica, prompt in students:
            if replica != gone:
                assert showing(page).startswith("Showing: run here")
                assert _stream(page) == finished[prompt][1]
        browser.close()
