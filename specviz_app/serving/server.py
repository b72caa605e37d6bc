"""What the app's server answers beside its pages: /metrics, in Prometheus' text format.

Streamlit serves on Starlette, and an `st.App` takes extra routes. The two ways to start the app
both serve one: `streamlit run app.py` (the root app.py) and `specviz app` (specviz_app/serving/asgi.py,
launch.APP_SCRIPT), each an `st.App` of the page script specviz_app/app.py with ROUTES. The numbers
are specviz.traces.metrics' (prometheus_client's, in the process's own registry, METRICS); this
module adds what only the app knows: the device gates' queues (read at each scrape) and each
decode's wait for its gate. docs/reliability.md ("Metrics") says what each metric counts and how to
scrape it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from specviz.engine import capture_proof
from specviz.serving.gate import all_gates, observe_admission, observe_waits
from specviz.traces import metrics


def _holding() -> int:
    return sum(gate.counts()[0] for gate in all_gates())


def _waiting() -> int:
    return sum(gate.counts()[1] for gate in all_gates())


metrics.METRICS.num_requests_running.set_function(_holding)  # read at each scrape
metrics.METRICS.num_requests_waiting.set_function(_waiting)
observe_waits(metrics.METRICS.request_queue_time.observe)
metrics.METRICS.num_requests_deferred.set_function(lambda: sum(gate.deferred() for gate in all_gates()))
ADMISSION_COUNTERS = {
    "deferred": metrics.METRICS.requests_deferred,
    "retry": metrics.METRICS.admission_retries,
    "refused": metrics.METRICS.requests_refused,
}
observe_admission(lambda event: ADMISSION_COUNTERS[event].inc())
metrics.METRICS.cuda_step_fallbacks.set_function(lambda: len(capture_proof.FALLBACKS))


async def metrics_page(request: Request) -> Response:
    """GET /metrics: every metric, rendered now."""
    return Response(metrics.METRICS.render(), media_type=metrics.CONTENT_TYPE)


ROUTES = [Route("/metrics", metrics_page, methods=["GET"])]
