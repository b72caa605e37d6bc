"""The server's metrics, kept and exposed by prometheus_client, as vLLM keeps its own.

The app serves `METRICS.render()` at /metrics (specviz_app/serving/server.py) from its own process, so an
admin scrapes each replica as Prometheus scrapes a vLLM server. The names are vLLM's where they fit,
prefixed `specviz:` as vLLM prefixes `vllm:`; docs/reliability.md ("Metrics") says what each counts.

Each `ServerMetrics` holds its own CollectorRegistry (not prometheus_client's global one): the app's
process has one, `METRICS`, and a test makes its own, so no test sees another's counts.
prometheus_client's metrics are thread-safe: sessions record from their own script threads while a
scrape renders.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.parser import text_string_to_metric_families

PREFIX = "specviz:"
# Prometheus' text format, version 0.0.4: what generate_latest writes, and what a scraper expects.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# vLLM's buckets (vllm/v1/metrics/loggers.py): a first token in milliseconds to minutes, a whole request
# in a fraction of a second to hours. Queue times use the request buckets, as vLLM's do.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip


# Every metric, in the order a scrape lists it: (attribute, kind, name after PREFIX, help, options).
# Counters are named without `_total`: prometheus_client adds it, as vLLM's are written.
DECLARED = (
    ("time_to_first_token", Histogram, "time_to_first_token_seconds",
     "Seconds from a Run's start (a click, or a shared link's first visit) to its first tokens on the page.",
     {"buckets": TTFT_BUCKETS}),
    ("e2e_request_latency", Histogram, "e2e_request_latency_seconds",
     "Seconds from a Run's start to its finished trace on show (its baseline included).",
     {"buckets": REQUEST_BUCKETS}),
    ("request_queue_time", Histogram, "request_queue_time_seconds",
     "Seconds each decode (a Run, its baseline, a timing pair) waited for its device's gate.",
     {"buckets": REQUEST_BUCKETS}),
    ("num_requests_running", Gauge, "num_requests_running",
     "Decodes holding a device's gate now (batched ones together).", {}),
    ("num_requests_waiting", Gauge, "num_requests_waiting", "Decodes queued for a device's gate now.", {}),
    ("num_requests_deferred", Gauge, "num_requests_deferred",
     "Runs waiting to join a gate's queue now: their estimated wait was past the bound, and they join by themselves.",
     {}),
    ("requests_deferred", Counter, "requests_deferred",
     "Runs deferred because their estimated wait was past the bound (they joined the queue later by themselves).", {}),
    ("admission_retries", Counter, "admission_retries",
     "Periodic tries of deferred runs to join the queue (a place freeing also lets one in at once).", {}),
    ("requests_refused", Counter, "requests_refused",
     "Runs refused at once: the hard bound of sessions queued and deferred was reached.", {}),
    ("session_reconnections", Counter, "session_reconnections",
     "Browser sessions that came back carrying a session this server does not hold (a replica lost, "
     "or a restart): their page was opened again from its link.", {}),
    ("cuda_step_fallbacks", Gauge, "cuda_step_fallbacks",
     "Targets loaded on CUDA whose captured step failed its proof, so transformers' eager forward serves them.",
     {}),
    ("spec_decode_num_drafts", Counter, "spec_decode_num_drafts",
     "Draft proposals of Runs' speculative decodes (iterations that drafted).", {}),
    ("spec_decode_num_draft_tokens", Counter, "spec_decode_num_draft_tokens",
     "Tokens drafted by Runs' speculative decodes.", {}),
    ("spec_decode_num_accepted_tokens", Counter, "spec_decode_num_accepted_tokens",
     "Drafted tokens the target accepted in Runs' speculative decodes.", {}),
    ("spec_decode_num_accepted_tokens_per_pos", Counter, "spec_decode_num_accepted_tokens_per_pos",
     "Accepted drafted tokens by draft position (1 = the first draft of an iteration).",
     {"labelnames": ("position",)}),
)  # fmt: skip


class _WithoutCreated:
    """A registry's metrics without prometheus_client's `_created` timestamps: the exposition keeps
    the series it always had, and a scrape needs no start times (the process's own since it started)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self):
        for family in self.registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


class ServerMetrics:
    """One server's metrics in one registry, rendered in the order they are made here."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        for attr, kind, name, doc, extra in DECLARED:
            setattr(self, attr, kind(f"{PREFIX}{name}", doc, registry=r, **extra))

    def render(self) -> str:
        """Every metric in Prometheus' text exposition format (version 0.0.4), by prometheus_client."""
        return generate_latest(_WithoutCreated(self.registry)).decode()

    def record_spec_decode(self, iterations: Iterable[dict]) -> None:
        """Count a speculative decode's drafts from its trace's iterations (each with `drafts` and
        `accepted_count`), as vLLM counts its proposals: an iteration that drafted nothing proposes nothing."""
        for it in iterations:
            drafted, accepted = len(it["drafts"]), int(it["accepted_count"])
            if drafted == 0:
                continue
            self.spec_decode_num_drafts.inc()
            self.spec_decode_num_draft_tokens.inc(drafted)
            self.spec_decode_num_accepted_tokens.inc(accepted)
            for position in range(1, accepted + 1):
                self.spec_decode_num_accepted_tokens_per_pos.labels(position=str(position)).inc()


# The app's own: one per process, as each replica is scraped on its own port.
METRICS = ServerMetrics()


def parse_samples(text: str) -> dict[str, float]:
    """The samples of an exposition as {series (name with its labels): value}, read by
    prometheus_client's own parser: what a load test or a test reads back from a scrape."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
            samples[s.name + ("{" + labels + "}" if labels else "")] = s.value
    return samples


class RunTimer:
    """One Run's clock, started as the Run starts: first_token() observes its time to first token
    (once), finished() its end-to-end latency, and its time to first token too when no token was
    streamed first (a shared recording arrives whole). A failed or cancelled Run observes nothing."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, into: ServerMetrics | None = None) -> None:
        self.clock, self.start, self._first_seen = clock, clock(), False
        self.into = into or METRICS

    def first_token(self) -> None:
        if not self._first_seen:
            self._first_seen = True
            self.into.time_to_first_token.observe(self.clock() - self.start)

    def finished(self) -> None:
        self.first_token()
        self.into.e2e_request_latency.observe(self.clock() - self.start)


def record_spec_decode(iterations: Iterable[dict], into: ServerMetrics | None = None) -> None:
    """The app's Runs count their drafts here (ServerMetrics.record_spec_decode)."""
    (into or METRICS).record_spec_decode(iterations)
