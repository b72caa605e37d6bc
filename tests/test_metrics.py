"""The server's metrics (specviz.traces.metrics) in Prometheus' text format, the gate's counts and
waits they read (specviz.engine.gate), and the websocket client's reading of the server's messages
(specviz_app.ws_client). The scrape of a running app: tests/test_metrics_app.py."""

from __future__ import annotations

import re
import threading

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from specviz.engine import gate as gate_module
from specviz.engine.gate import DeviceGate, observe_waits
from specviz.traces import metrics
from specviz_app import ws_client

samples = metrics.parse_samples


def test_a_histogram_counts_into_cumulative_buckets_with_its_sum_and_count():
    h = metrics.Histogram("t:latency_seconds", "help", buckets=(0.5, 1.0, 5.0))
    for v in (0.2, 0.5, 0.7, 3.0, 9.0):
        h.observe(v)
    got = samples("".join(line + "\n" for line in h.samples()))
    assert got == {
        't:latency_seconds_bucket{le="0.5"}': 2,  # le: 0.5 itself falls in the 0.5 bucket
        't:latency_seconds_bucket{le="1"}': 3,
        't:latency_seconds_bucket{le="5"}': 4,
        't:latency_seconds_bucket{le="+Inf"}': 5,
        "t:latency_seconds_sum": pytest.approx(13.4),
        "t:latency_seconds_count": 5,
    }
    with pytest.raises(ValueError, match="never negative"):
        h.observe(-1)
    with pytest.raises(ValueError, match="increasing"):
        metrics.Histogram("t:x", "help", buckets=(1.0, 0.5))


def test_counters_render_as_prometheus_client_writes_them_and_refuse_going_down():
    c = metrics.Counter("t:drafts", "Drafts.", label="position")
    c.inc(label=2)
    c.inc(3, label=10)
    c.inc(label=2)
    lines = [*c.header(), *c.samples()]
    assert lines == [
        "# HELP t:drafts_total Drafts.",
        "# TYPE t:drafts_total counter",
        't:drafts_total{position="2"} 2',
        't:drafts_total{position="10"} 3',  # positions in numeric order
    ]
    with pytest.raises(ValueError, match="only goes up"):
        c.inc(-1, label=1)
    with pytest.raises(ValueError, match="takes a position"):
        c.inc()
    with pytest.raises(ValueError, match="metric name"):
        metrics.Counter("2bad name", "help")


def test_label_values_are_escaped():
    c = metrics.Counter("t:odd", "help", label="what")
    c.inc(label='a "quoted" \\ back\nslash')
    assert c.samples() == ['t:odd_total{what="a \\"quoted\\" \\\\ back\\nslash"} 1']


def test_a_registry_renders_every_metric_once_with_help_and_type():
    reg = metrics.Registry()
    reg.add(metrics.Gauge("t:running", "Running now.", read=lambda: 3))
    reg.add(metrics.Counter("t:done", "Done."))
    with pytest.raises(ValueError, match="already registered"):
        reg.add(metrics.Counter("t:done", "Again."))
    assert reg.render() == (
        "# HELP t:running Running now.\n# TYPE t:running gauge\nt:running 3\n"
        "# HELP t:done_total Done.\n# TYPE t:done_total counter\nt:done_total 0\n"
    )


def test_the_app_registry_has_vllms_names_prefixed_specviz():
    names = set(re.findall(r"^# TYPE (\S+) (\w+)$", metrics.REGISTRY.render(), re.M))
    assert {
        ("specviz:time_to_first_token_seconds", "histogram"),
        ("specviz:e2e_request_latency_seconds", "histogram"),
        ("specviz:request_queue_time_seconds", "histogram"),
        ("specviz:num_requests_running", "gauge"),
        ("specviz:num_requests_waiting", "gauge"),
        ("specviz:spec_decode_num_drafts_total", "counter"),
        ("specviz:spec_decode_num_draft_tokens_total", "counter"),
        ("specviz:spec_decode_num_accepted_tokens_total", "counter"),
        ("specviz:spec_decode_num_accepted_tokens_per_pos_total", "counter"),
    } <= names


def test_counts_from_many_threads_are_all_kept():
    c, h = metrics.Counter("t:many", "help"), metrics.Histogram("t:many_s", "help", (1.0,))

    def work():
        for _ in range(2000):
            c.inc()
            h.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.value() == 16000 and h.count() == 16000


def test_a_run_timer_observes_first_tokens_once_and_a_shared_recording_at_its_end():
    now = [100.0]
    ttft, e2e = metrics.TIME_TO_FIRST_TOKEN, metrics.E2E_REQUEST_LATENCY
    before = ttft.count(), e2e.count()
    streamed = metrics.RunTimer(clock=lambda: now[0])
    now[0] = 101.5
    streamed.first_token()
    now[0] = 102.0
    streamed.first_token()  # a later redraw: not a first token
    now[0] = 104.0
    streamed.finished()
    whole = metrics.RunTimer(clock=lambda: now[0])  # a shared recording: no stream before it
    now[0] = 105.0
    whole.finished()
    assert (ttft.count(), e2e.count()) == (before[0] + 2, before[1] + 2)


def test_spec_decode_counters_count_proposals_drafts_and_accepted_by_position():
    c = metrics
    before = [
        c.SPEC_DECODE_NUM_DRAFTS.value(),
        c.SPEC_DECODE_NUM_DRAFT_TOKENS.value(),
        c.SPEC_DECODE_NUM_ACCEPTED_TOKENS.value(),
        *(c.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.value(k) for k in (1, 2, 3)),
    ]
    iterations = [
        {"drafts": [{}, {}, {}], "accepted_count": 2},
        {"drafts": [{}, {}, {}], "accepted_count": 3},
        {"drafts": [{}, {}, {}], "accepted_count": 0},
        {"drafts": [], "accepted_count": 0},  # drafted nothing: no proposal
    ]
    metrics.record_spec_decode(iterations)
    after = [
        c.SPEC_DECODE_NUM_DRAFTS.value(),
        c.SPEC_DECODE_NUM_DRAFT_TOKENS.value(),
        c.SPEC_DECODE_NUM_ACCEPTED_TOKENS.value(),
        *(c.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.value(k) for k in (1, 2, 3)),
    ]
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 9, 5, 2, 2, 1]


def test_the_gate_counts_holders_and_waiters_and_reports_each_wait():
    gate, waits = DeviceGate(), []
    observe_waits(waits.append)
    observe_waits(waits.append)  # once, however often it is added
    try:
        _hold_and_wait(gate)
    finally:
        gate_module._wait_observers.remove(waits.append)  # the other tests' gates are not this test's
    assert len(waits) == 2 and waits[0] >= 0 and waits[1] > 0  # the second waited for the first


def _hold_and_wait(gate: DeviceGate) -> None:
    """One decode holds the gate while a second queues; then both finish."""
    held, queued = threading.Event(), threading.Event()
    release = threading.Event()

    def holder():
        with gate.turn():
            held.set()
            release.wait(10)

    def waiter():
        with gate.turn(on_wait=lambda ahead: queued.set(), poll_s=0.01):
            pass

    first = threading.Thread(target=holder)
    first.start()
    assert held.wait(10)
    second = threading.Thread(target=waiter)
    second.start()
    assert queued.wait(10)
    assert gate.counts() == (1, 1)
    release.set()
    first.join(10)
    second.join(10)
    assert gate.counts() == (0, 0)


def _element_msg(**element) -> ForwardMsg:
    msg = ForwardMsg()
    for kind, fields in element.items():
        getattr(msg.delta.new_element, kind).MergeFrom(fields)
    return msg


def test_the_websocket_client_times_first_tokens_the_finished_run_and_failures():
    from streamlit.proto.Alert_pb2 import Alert
    from streamlit.proto.Html_pb2 import Html
    from streamlit.proto.Markdown_pb2 import Markdown

    visit, shown = ws_client.Visit(), False
    stream = _element_msg(html=Html(body='<div class="sv-stream"><span class="sv-tok">Hi</span></div>'))
    showing = _element_msg(markdown=Markdown(body="Showing: run here · target t · draft d"))
    finished = ForwardMsg()
    finished.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    for t, msg in enumerate([_element_msg(html=Html(body="<p>no tokens</p>")), finished, stream, stream, showing]):
        shown = ws_client._note(msg, visit, shown, float(t))
    assert visit.first_tokens_s == 2.0 and shown and visit.finished_s is None  # not until the script ends
    ws_client._note(finished, visit, shown, 5.0)
    assert visit.ok and visit.finished_s == 5.0

    failed = ws_client.Visit()
    ws_client._note(
        _element_msg(alert=Alert(body="The model is busy: 9 runs…", format=Alert.ERROR)), failed, False, 1.0
    )
    assert not failed.ok and failed.error.startswith("The model is busy")


def test_the_websocket_client_talks_to_loopback_only_with_the_page_load_message():
    assert ws_client.ws_url("http://127.0.0.1:8650") == "ws://127.0.0.1:8650/_stcore/stream"
    with pytest.raises(ValueError, match="loopback only"):
        ws_client.open_link("http://example.org:8501", {}, timeout_s=1)
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg.FromString(ws_client.rerun_message({"prompt": "a b&c", "seed": "3"}))
    assert msg.WhichOneof("type") == "rerun_script" and msg.rerun_script.query_string == "prompt=a+b%26c&seed=3"
