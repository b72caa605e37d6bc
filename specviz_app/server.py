"""What the app's server answers beside its pages: /metrics, in Prometheus' text format.

Streamlit serves on Starlette, and an `st.App` takes extra routes. The two ways to start the app
both serve one: `streamlit run app.py` (the root app.py) and `specviz app` (specviz_app/asgi.py,
launch.APP_SCRIPT), each an `st.App` of the page script specviz_app/app.py with ROUTES. The numbers
are specviz.traces.metrics'; this module adds what only the app knows: the device gates' queues
(read at each scrape) and each decode's wait for its gate. docs/reliability.md ("Metrics") says
what each metric counts and how to scrape it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from specviz.engine.gate import all_gates, observe_waits
from specviz.traces import metrics


def _holding() -> int:
    return sum(gate.counts()[0] for gate in all_gates())


def _waiting() -> int:
    return sum(gate.counts()[1] for gate in all_gates())


metrics.NUM_REQUESTS_RUNNING.read = _holding
metrics.NUM_REQUESTS_WAITING.read = _waiting
observe_waits(metrics.REQUEST_QUEUE_TIME.observe)


async def metrics_page(request: Request) -> Response:
    """GET /metrics: every metric, rendered now."""
    return Response(metrics.REGISTRY.render(), media_type=metrics.CONTENT_TYPE)


ROUTES = [Route("/metrics", metrics_page, methods=["GET"])]
