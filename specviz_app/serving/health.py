"""What the server answers an operator beside the pages: /healthz, and 404 for a path that is no page.

- `GET /healthz`: JSON saying whether the default models are loaded. 200 when they are (a Run starts
  decoding at once) or when no page has opened yet (they load as the first page opens,
  background.preload); 503 while they load. Streamlit's own `/_stcore/health` stays as it is: it
  answers "ok" as soon as the server is up.
- Any other path that is neither a page (st.navigation's URL paths: /playground, /lesson, ...), nor
  one of Streamlit's own files and routes, nor a route of this server (/metrics, /healthz) gets 404
  with a plain sentence naming the pages, instead of the app's page with 200 (Streamlit's static
  files answer every unknown path with its index.html, for its client-side routing).

Both are served by the st.App of specviz_app/serving/asgi.py and the root app.py, beside server.ROUTES.
docs/reliability.md ("Health") says what each answers.
"""

from __future__ import annotations

import json
from pathlib import Path

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from specviz.engine import models
from specviz_app.serving import background

HEALTH_PATH = "/healthz"
PAGES_DIR = Path(__file__).resolve().parents[1] / "app_pages"  # as render.PAGES_DIR (no page imports here)


def health_state() -> tuple[int, dict]:
    """(HTTP status, body) of /healthz: the default target loaded (200), loading (503), or not yet
    asked for (200: nothing is wrong, the first page starts loading it)."""
    loaded = models.DEFAULT_TARGET in models.loaded_names()
    if background.preload_running():
        state, status = "loading", 503
    elif loaded:
        state, status = "ready", 200
    else:
        state, status = "not loaded: they load as the first page opens", 200
    return status, {"status": "ok" if status == 200 else "loading", "default_models": state, "pages": page_paths()}


async def health_page(request: Request) -> Response:
    """GET /healthz: whether the default models are loaded, as JSON."""
    status, body = health_state()
    return Response(json.dumps(body), status_code=status, media_type="application/json")


ROUTES = [Route(HEALTH_PATH, health_page, methods=["GET"])]


def page_paths() -> list[str]:
    """The pages' URL paths: st.Page names a page by its file's name (specviz_app/app.py's PAGES, one
    file per page in app_pages/: tests/test_health.py keeps the two lists equal)."""
    return sorted(path.stem for path in PAGES_DIR.glob("*.py") if not path.stem.startswith("_"))


def _static_names() -> set[str]:
    """Streamlit's own files at the server's root (index.html, favicon.png, static/, ...)."""
    from streamlit import file_util

    root = Path(file_util.get_static_dir())
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def _route_heads(app) -> set[str]:
    """The first path segment of every route the server serves (/_stcore/..., /media/..., /metrics)."""
    heads = set()
    for route in getattr(app, "routes", []):
        head = str(getattr(route, "path", "")).strip("/").split("/", 1)[0]
        if head and "{" not in head:
            heads.add(head)
    return heads


class UnknownPathIs404:
    """ASGI middleware: a GET or HEAD for a path that is no page, no Streamlit file or route and no route
    of this server gets 404 and a sentence naming the pages. Everything else passes untouched."""

    def __init__(self, app) -> None:
        self.app = app
        self._known: set[str] | None = None

    def _known_heads(self, scope) -> set[str]:
        if self._known is None:
            self._known = {"", *page_paths(), *_static_names(), *_route_heads(scope.get("app"))}
        return self._known

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            path = scope.get("path", "")
            root = scope.get("root_path", "")
            rel = path[len(root) :] if root and path.startswith(root) else path
            head = rel.strip("/").split("/", 1)[0]
            if head not in self._known_heads(scope):
                pages = ", ".join(f"/{p}" for p in page_paths())
                body = (
                    f"Not found: {rel[:100]} is no page of this app. Its pages are / and {pages}; "
                    f"the server's health is at {HEALTH_PATH} and its metrics at /metrics."
                )
                await PlainTextResponse(body, status_code=404)(scope, receive, send)
                return
        await self.app(scope, receive, send)
