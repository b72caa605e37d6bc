"""The server's metrics in Prometheus' text format: a small registry of counters, gauges and histograms.

The app serves `REGISTRY.render()` at /metrics (specviz_app/server.py) from its own process, so an
admin scrapes each replica as Prometheus scrapes a vLLM server. The names are vLLM's where they fit,
prefixed `specviz:` as vLLM prefixes `vllm:`; docs/reliability.md ("Metrics") says what each counts.

Pure and thread-safe: sessions record from their own script threads while a scrape renders, so every
metric keeps its numbers under its own lock. No dependency: the text format is a few lines per metric
(https://prometheus.io/docs/instrumenting/exposition_formats/), and prometheus_client is not installed.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence

PREFIX = "specviz:"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# vLLM's buckets (vllm/v1/metrics/loggers.py): a first token in milliseconds to minutes, a whole request
# in a fraction of a second to hours. Queue times use the request buckets, as vLLM's do.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip


def _number(value: float) -> str:
    """A sample value as the text format writes it: integers without a point, +Inf and NaN by name."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape(value: object) -> str:
    """A label value as the text format quotes it: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, object]]) -> str:
    """`{name="value",...}`, or "" without labels."""
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + text + "}" if text else ""


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str) -> None:
        if not name or not all(c.isalnum() or c in "_:" for c in name) or name[0].isdigit():
            raise ValueError(f"a metric name is letters, digits, '_' and ':', not starting with a digit; got {name!r}")
        self.name, self.help = name, help_text
        self._lock = threading.Lock()

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def samples(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    """A count that only goes up; one series per value of its label (a Counter without a label has one)."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, label: str | None = None) -> None:
        super().__init__(name, help_text)
        self.label = label
        self._values: dict[str, float] = {} if label else {"": 0.0}

    def inc(self, amount: float = 1.0, label: object = "") -> None:
        if amount < 0:
            raise ValueError(f"a counter only goes up; got inc({amount!r})")
        if bool(self.label) != (label != ""):
            raise ValueError(f"{self.name} takes {'a ' + self.label if self.label else 'no label'}; got {label!r}")
        with self._lock:
            self._values[str(label)] = self._values.get(str(label), 0.0) + amount

    def value(self, label: object = "") -> float:
        with self._lock:
            return self._values.get(str(label), 0.0)

    def header(self) -> list[str]:  # named with _total, as prometheus_client (and so vLLM) writes counters
        return [f"# HELP {self.name}_total {self.help}", f"# TYPE {self.name}_total counter"]

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items(), key=lambda kv: (len(kv[0]), kv[0]))  # position 2 before 10
        name = f"{self.name}_total"
        return [f"{name}{_labels([(self.label, k)] if self.label else [])} {_number(v)}" for k, v in items]


class Gauge(_Metric):
    """A value that goes up and down: set by the code that knows it, or read at each scrape (`read`)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, read: Callable[[], float] | None = None) -> None:
        super().__init__(name, help_text)
        self.read, self._value = read, 0.0

    def set(self, value: float) -> None:
        with self._lock:
            self._value = float(value)

    def value(self) -> float:
        if self.read is not None:
            return float(self.read())
        with self._lock:
            return self._value

    def samples(self) -> list[str]:
        return [f"{self.name} {_number(self.value())}"]


class Histogram(_Metric):
    """Observations counted into cumulative buckets (upper bounds, `le`), with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        super().__init__(name, help_text)
        if not buckets or list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{name}: buckets must be increasing and distinct; got {list(buckets)!r}")
        self.bounds = [float(b) for b in buckets if not math.isinf(b)]
        self._counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)
        self._sum = 0.0

    def observe(self, value: float) -> None:
        if math.isnan(value) or value < 0:
            raise ValueError(f"{self.name} observes durations, never negative or NaN; got {value!r}")
        with self._lock:
            self._counts[bisect.bisect_left(self.bounds, value)] += 1
            self._sum += value

    def count(self) -> int:
        with self._lock:
            return sum(self._counts)

    def samples(self) -> list[str]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        lines, running = [], 0
        for bound, n in zip([*self.bounds, math.inf], counts, strict=True):
            running += n
            lines.append(f'{self.name}_bucket{{le="{_number(bound)}"}} {running}')
        return [*lines, f"{self.name}_sum {_number(total)}", f"{self.name}_count {running}"]


class Registry:
    """Metrics by name, rendered in the order they were made."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._lock = threading.Lock()

    def add(self, metric: _Metric):
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f"a metric named {metric.name!r} is already registered")
            self._metrics[metric.name] = metric
        return metric

    def render(self) -> str:
        """Every metric in Prometheus' text exposition format (version 0.0.4)."""
        with self._lock:
            metrics = list(self._metrics.values())
        return "".join(line + "\n" for m in metrics for line in (*m.header(), *m.samples()))


REGISTRY = Registry()
# The metrics, in vLLM's names where they fit (each after PREFIX), registered in the order they render.
TIME_TO_FIRST_TOKEN, E2E_REQUEST_LATENCY, REQUEST_QUEUE_TIME = (
    REGISTRY.add(Histogram(f"{PREFIX}{name}", help_text, buckets))
    for name, help_text, buckets in (
        ("time_to_first_token_seconds",
         "Seconds from a Run's start (a click, or a shared link's first visit) to its first tokens on the page.",
         TTFT_BUCKETS),
        ("e2e_request_latency_seconds",
         "Seconds from a Run's start to its finished trace on show (its baseline included).", REQUEST_BUCKETS),
        ("request_queue_time_seconds",
         "Seconds each decode (a Run, its baseline, a timing pair) waited for its device's gate.", REQUEST_BUCKETS),
    )
)  # fmt: skip
NUM_REQUESTS_RUNNING, NUM_REQUESTS_WAITING = (
    REGISTRY.add(Gauge(f"{PREFIX}{name}", help_text))
    for name, help_text in (
        ("num_requests_running", "Decodes holding a device's gate now (batched ones together)."),
        ("num_requests_waiting", "Decodes queued for a device's gate now."),
    )
)  # fmt: skip
SPEC_DECODE_NUM_DRAFTS, SPEC_DECODE_NUM_DRAFT_TOKENS, SPEC_DECODE_NUM_ACCEPTED_TOKENS = (
    REGISTRY.add(Counter(f"{PREFIX}spec_decode_{name}", help_text))
    for name, help_text in (
        ("num_drafts", "Draft proposals of Runs' speculative decodes (iterations that drafted)."),
        ("num_draft_tokens", "Tokens drafted by Runs' speculative decodes."),
        ("num_accepted_tokens", "Drafted tokens the target accepted in Runs' speculative decodes."),
    )
)  # fmt: skip
SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS = REGISTRY.add(Counter(
    f"{PREFIX}spec_decode_num_accepted_tokens_per_pos",
    "Accepted drafted tokens by draft position (1 = the first draft of an iteration).",
    label="position",
))  # fmt: skip


def parse_samples(text: str) -> dict[str, float]:
    """The sample lines of an exposition as {series (name with its labels): value}: what a load test
    or a test reads back from a scrape (comments skipped; the values this module writes)."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples


class RunTimer:
    """One Run's clock, started as the Run starts: first_token() observes its time to first token
    (once), finished() its end-to-end latency, and its time to first token too when no token was
    streamed first (a shared recording arrives whole). A failed or cancelled Run observes nothing."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.start, self._first_seen = clock, clock(), False

    def first_token(self) -> None:
        if not self._first_seen:
            self._first_seen = True
            TIME_TO_FIRST_TOKEN.observe(self.clock() - self.start)

    def finished(self) -> None:
        self.first_token()
        E2E_REQUEST_LATENCY.observe(self.clock() - self.start)


def record_spec_decode(iterations: Iterable[dict]) -> None:
    """Count a speculative decode's drafts from its trace's iterations (each with `drafts` and
    `accepted_count`), as vLLM counts its proposals: an iteration that drafted nothing proposes nothing."""
    for it in iterations:
        drafted, accepted = len(it["drafts"]), int(it["accepted_count"])
        if drafted == 0:
            continue
        SPEC_DECODE_NUM_DRAFTS.inc()
        SPEC_DECODE_NUM_DRAFT_TOKENS.inc(drafted)
        SPEC_DECODE_NUM_ACCEPTED_TOKENS.inc(accepted)
        for position in range(1, accepted + 1):
            SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.inc(label=position)
