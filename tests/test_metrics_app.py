"""/metrics scraped from the running app, started as an admin starts it: `streamlit run app.py`
(tests/browser/conftest.py's serve_app) after Runs driven through Streamlit's own websocket protocol
(specviz_app/serving/ws_client.py), `specviz app` (specviz_app/serving/launch.py) answering it too, and each replica
behind nginx (specviz_app/serving/replicas.py) on its own port."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
from browser.conftest import serve_app
from prometheus_client.parser import text_string_to_metric_families
from test_metrics import FAMILIES

from conftest import wait_until_serving
from specviz.traces.metrics import CONTENT_TYPE, parse_samples
from specviz_app.serving import launch, ws_client
from specviz_app.serving.replicas import Deployment, free_port, nginx_binary

ROOT = Path(__file__).resolve().parent.parent
P = "specviz:"
LINK = {"prompt": "Name three colours.", "max_new": "8", "temperature": "0", "baseline": "1", "pair": "offline"}


def scrape(url: str) -> tuple[str, dict[str, float]]:
    """(Content-Type, {series: value}), read by prometheus_client's own parser, which must find every
    family /metrics exposes, named and typed as tests/test_metrics.py's FAMILIES."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    assert {f.name: f.type for f in text_string_to_metric_families(text)} == FAMILIES
    return r.headers["Content-Type"], parse_samples(text)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """One app for this file's class tests (an app's start is most of such a test's cost). Streamlit
    logs each malformed frame with its traceback, for the operator; the client gets 1002."""
    log = tmp_path_factory.mktemp("metrics-app") / "app.log"
    with serve_app(log, client_faults="Error deserializing back message") as url:
        yield url


@pytest.mark.slow
def test_a_scrape_after_two_sessions_counts_their_first_tokens_runs_and_drafts(app_url):
    url = app_url
    kind, before = scrape(url)
    assert kind == CONTENT_TYPE
    decoded = ws_client.open_link(url, dict(LINK, seed="1"), timeout_s=300)
    assert decoded.ok, decoded.error
    # The same link: its recording. This page says it comes back from a session this server never
    # had (its replica lost): a reconnection.
    shared = ws_client.open_link(url, dict(LINK, seed="1"), timeout_s=300, had_session="lost-replicas-session")
    assert shared.ok, shared.error
    assert shared.session_id and shared.session_id != "lost-replicas-session"  # a new session here
    _, after = scrape(url)  # running.run observed both before their pages drew "Showing: run here"

    def grew(name: str) -> float:
        return after.get(f"{P}{name}", 0) - before.get(f"{P}{name}", 0)

    assert grew("time_to_first_token_seconds_count") == 2  # both sessions, the shared one at its end
    assert grew("e2e_request_latency_seconds_count") == 2
    assert grew('time_to_first_token_seconds_bucket{le="+Inf"}') == 2
    assert grew("e2e_request_latency_seconds_sum") >= grew("time_to_first_token_seconds_sum") > 0
    # The run and its baseline at least each waited for the gate once (and the preload's two decodes).
    assert grew("request_queue_time_seconds_count") >= 2 and after[f"{P}request_queue_time_seconds_count"] >= 4
    drafts, drafted = grew("spec_decode_num_drafts_total"), grew("spec_decode_num_draft_tokens_total")
    accepted = grew("spec_decode_num_accepted_tokens_total")
    per_position = [grew(k[len(P) :]) for k in after if k.startswith(f"{P}spec_decode_num_accepted_tokens_per_pos")]
    assert 0 < drafts <= drafted and accepted <= drafted  # one decoded run: the shared one drafted nothing
    assert sum(per_position) == accepted
    assert after[f"{P}num_requests_waiting"] == 0
    assert grew("session_reconnections_total") == 1  # the second page only
    assert after[f"{P}num_requests_deferred"] == 0 and after[f"{P}requests_refused_total"] == 0


def test_specviz_app_serves_metrics_beside_the_pages(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    cmd = launch.app_command(["--server.port", str(port), "--server.address", "127.0.0.1"])
    log = (tmp_path / "app.log").open("w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)  # any folder
    try:
        wait_until_serving(proc, url, tmp_path / "app.log")
        kind, samples = scrape(url)
        with urllib.request.urlopen(url, timeout=10) as r:
            page = r.read().decode()
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()
    assert kind == CONTENT_TYPE and f"{P}num_requests_running" in samples
    assert "<noscript>" in page  # the app's own page still answers at /


@pytest.mark.slow
def test_behind_nginx_each_replica_is_scraped_and_one_killed_under_a_class_loses_no_student(tmp_path):
    """Each replica answers /metrics on its own port. Then a small class through nginx, and the replica
    with a run in flight is killed (SIGKILL): its students reconnect through nginx by themselves, their
    runs start again on the other replica and finish, the other replica counts their reconnections, and
    every finished run's trace is in the shared store. Counts, no seconds (docs/reliability.md, "A
    lecture hall", has a class of 60's figures, from scripts/ws_load.py --replicas 2)."""
    if nginx_binary() is None:
        pytest.skip("nginx is not installed: `apt-get install nginx` (./dev.sh test installs it)")
    from specviz_app.serving import lecture_hall

    prompts = ["Name a river.", "Name a mountain.", "Name a city.", "Name a lake.", "Name a desert.", "Name a sea."]
    queries = [dict(LINK, prompt=prompt, max_new="24", baseline="0", seed=str(i)) for i, prompt in enumerate(prompts)]
    env = {"OMP_NUM_THREADS": "1"}  # two replicas on two cores: one torch thread each
    with Deployment(2, free_port(), work=tmp_path, env=env) as dep:
        kinds = [scrape(dep.replica_url(i))[0] for i in range(2)]
        through_proxy, samples = scrape(dep.url)  # one replica's, the one this client's cookie picks
        for i in range(2):  # each replica warm, as a class finds an app open a while
            warm = ws_client.open_link(dep.replica_url(i), dict(queries[0], seed="99"), timeout_s=300)
            assert warm.ok, warm.error
        report = lecture_hall.kill_mid_class(dep, queries, timeout_s=300)
        alive = next(i for i, app in enumerate(dep.apps) if app is not None)
        reconnections = scrape(dep.replica_url(alive))[1][f"{P}session_reconnections_total"]
    assert kinds == [CONTENT_TYPE, CONTENT_TYPE] and through_proxy == CONTENT_TYPE
    assert f"{P}num_requests_running" in samples
    assert report["killed"], f"no replica ever had a run in flight: {report}"
    assert report["served"] == len(prompts), report  # every student, the moved ones included
    assert report["moved"] >= 1 and report["moved_served"] == report["moved"], report
    assert len(report["reconnect_s"]) >= report["moved"] and reconnections >= report["moved"]
    assert report["finished_traces"] == len(prompts) and report["finished_traces_lost"] == [], report


# Absurd link values a class may send (issue 60): each page must say what it did with them.
BAD_LINKS = [
    {"gamma": "999"},
    {"temperature": "-1"},
    {"seed": "abc"},
    {"lang": "fr"},
    {"pair": "nonsense"},
    {"prompt": ""},
    {"prompt": "word " * 1000},  # 5,000 characters
]


@pytest.mark.slow
def test_bad_input_during_a_class_gets_clear_answers_and_no_other_session_notices(app_url):
    import threading

    url = app_url
    before = scrape(url)[1]
    good = [ws_client.Visit() for _ in range(3)]
    bad_links = [ws_client.Visit(page_only=True) for _ in BAD_LINKS]
    answers: dict[str, str] = {}

    def student(i: int) -> None:
        ws_client.open_link(url, dict(LINK, seed=str(i + 1), max_new="12"), timeout_s=300, visit=good[i])

    def bad_link(i: int) -> None:
        query = {**LINK, "max_new": "4", "baseline": "0", "seed": "7", **BAD_LINKS[i]}
        ws_client.open_link(url, query, timeout_s=300, visit=bad_links[i])

    def hostile() -> None:
        answers["malformed"] = ws_client.malformed_message(url)
        answers["oversized"] = ws_client.oversized_upload(url, 60)  # the server takes 50 MB

    threads = [threading.Thread(target=student, args=(i,)) for i in range(len(good))]
    threads += [threading.Thread(target=bad_link, args=(i,)) for i in range(len(BAD_LINKS))]
    threads.append(threading.Thread(target=hostile))
    for t in threads:
        t.start()
    for t in threads:
        t.join(360)  # each ends by its own deadline; this only bounds a hang
    _, after = scrape(url)
    assert all(v.ok for v in good), [v.error for v in good]  # the class did not notice
    assert answers["malformed"].startswith("closed: 1002")  # Streamlit's protocol error; the server stays up
    assert answers["oversized"].startswith("413")
    for link, visit in zip(BAD_LINKS, bad_links, strict=True):
        # Its page drawn with a warning that says what was done with the value, or an error box saying
        # what to do (an empty prompt: "The prompt is empty: type some text…").
        assert visit.finished_s is not None or visit.errors_seen, (link, visit.error)
        assert visit.notes, f"no message for {link}"
        assert "exception box" not in visit.error and not any("Traceback" in n for n in visit.notes), visit.error
    finished = after[f"{P}e2e_request_latency_seconds_count"] - before[f"{P}e2e_request_latency_seconds_count"]
    assert finished >= len(good)
