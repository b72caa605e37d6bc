"""The server's /healthz and its 404 for paths that are no page (specviz_app/serving/health.py), on a
Starlette app built as st.App builds one: the routes, the middleware, and a catch-all that answers
every path with the page (Streamlit's static files, for its client-side routing)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from specviz.engine import models
from specviz_app.serving import background, health

ROOT = Path(__file__).resolve().parents[1]


def _client() -> TestClient:
    async def page(request):  # Streamlit's static files: index.html for any path
        return PlainTextResponse("the app's page")

    static = Mount("/", routes=[Route("/{path:path}", page, methods=["GET", "HEAD", "POST"])])

    async def stcore_health(request):
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[*health.ROUTES, Route("/_stcore/health", stcore_health), static],
        middleware=[Middleware(health.UnknownPathIs404)],
    )
    return TestClient(app)


@pytest.mark.parametrize(
    ("preloading", "loaded", "status", "state"),
    [
        (True, set(), 503, "loading"),
        (False, {models.DEFAULT_TARGET}, 200, "ready"),
        (False, set(), 200, "not loaded: they load as the first page opens"),
    ],
)
def test_healthz_says_whether_the_default_models_are_loaded(monkeypatch, preloading, loaded, status, state):
    monkeypatch.setattr(background, "preload_running", lambda: preloading)
    monkeypatch.setattr(models, "loaded_names", lambda: loaded)
    answer = _client().get("/healthz")
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    body = json.loads(answer.text)
    assert body["default_models"] == state
    assert body["status"] == ("ok" if status == 200 else "loading")


def test_a_path_that_is_no_page_gets_404_with_the_pages_named():
    client = _client()
    for path in ("/healthy", "/etc/passwd", "/no-such-page/deeper"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "is no page of this app" in answer.text and "/lesson" in answer.text and "/healthz" in answer.text


def test_pages_and_streamlits_own_paths_pass():
    client = _client()
    for path in ("/", "/playground", "/lesson?step=3", "/drafts", "/_stcore/health", "/favicon.png", "/static/x.js"):
        assert client.get(path).status_code == 200, path
    assert client.post("/not-a-get").status_code == 200  # only GET and HEAD are judged


def test_the_page_paths_are_the_pages_app_py_registers():
    text = (ROOT / "specviz_app" / "app.py").read_text()  # PAGES: st.Page(PAGES_DIR / "x.py") or ("x", icon)
    registered = set(re.findall(r'PAGES_DIR / "(\w+)\.py"', text)) | set(re.findall(r'\("(\w+)", ":material/', text))
    assert registered and set(health.page_paths()) == registered


def test_both_start_commands_serve_the_health_route_and_the_404():
    for script in (ROOT / "app.py", ROOT / "specviz_app" / "serving" / "asgi.py"):
        text = script.read_text()
        assert "health.ROUTES" in text and "health.UnknownPathIs404" in text, script
