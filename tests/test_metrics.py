"""The server's metrics (specviz.traces.metrics), read back by prometheus_client's own parser; the
gate's counts and waits they read (specviz.serving.gate); and the websocket client's reading of the
server's messages (specviz_app.serving.ws_client). The scrape of a running app: tests/test_metrics_app.py."""

from __future__ import annotations

import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from specviz.serving import gate as gate_module
from specviz.serving.gate import DeviceGate, observe_waits
from specviz.traces import metrics
from specviz_app.serving import ws_client

P = metrics.PREFIX
# Every family /metrics exposes, as prometheus_client's parser names and types them (a counter's
# family is named without `_total`; its samples carry it).
FAMILIES = {
    f"{P}time_to_first_token_seconds": "histogram",
    f"{P}e2e_request_latency_seconds": "histogram",
    f"{P}request_queue_time_seconds": "histogram",
    f"{P}num_requests_running": "gauge",
    f"{P}num_requests_waiting": "gauge",
    f"{P}num_requests_deferred": "gauge",
    f"{P}requests_deferred": "counter",
    f"{P}admission_retries": "counter",
    f"{P}requests_refused": "counter",
    f"{P}session_reconnections": "counter",
    f"{P}cuda_step_fallbacks": "gauge",
    f"{P}spec_decode_num_drafts": "counter",
    f"{P}spec_decode_num_draft_tokens": "counter",
    f"{P}spec_decode_num_accepted_tokens": "counter",
    f"{P}spec_decode_num_accepted_tokens_per_pos": "counter",
}


def scraped(m: metrics.ServerMetrics) -> tuple[dict[str, str], dict[tuple[str, tuple], float]]:
    """A render read back by prometheus_client's own parser: ({family: type}, {(sample, labels): value})."""
    families = list(text_string_to_metric_families(m.render()))
    types = {f.name: f.type for f in families}
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    return types, values


def _record_known_runs(m: metrics.ServerMetrics) -> None:
    """Two Runs (one streamed, one a shared recording), three gate waits, two speculative decodes."""
    now = [100.0]
    streamed = metrics.RunTimer(clock=lambda: now[0], into=m)
    now[0] = 101.5
    streamed.first_token()
    now[0] = 102.0
    streamed.first_token()  # a later redraw: not a first token
    now[0] = 104.0
    streamed.finished()
    whole = metrics.RunTimer(clock=lambda: now[0], into=m)  # a shared recording: no stream before it
    now[0] = 105.0
    whole.finished()
    for waited in (0.0, 0.3, 3.0):
        m.request_queue_time.observe(waited)
    m.num_requests_running.set_function(lambda: 2)
    m.num_requests_waiting.set_function(lambda: 1)
    m.num_requests_deferred.set_function(lambda: 3)
    m.requests_deferred.inc(4)  # four runs deferred, one of them refused later at the hard bound
    m.admission_retries.inc(5)
    m.requests_refused.inc()
    m.session_reconnections.inc(2)
    m.cuda_step_fallbacks.set_function(lambda: 1)  # a target whose captured step failed its proof
    m.record_spec_decode(
        [
            {"drafts": [{}, {}, {}], "accepted_count": 2},
            {"drafts": [{}, {}, {}], "accepted_count": 3},
            {"drafts": [{}, {}, {}], "accepted_count": 0},
            {"drafts": [], "accepted_count": 0},  # drafted nothing: no proposal
        ]
    )
    metrics.record_spec_decode([{"drafts": [{}], "accepted_count": 1}], into=m)


def test_a_known_sequence_of_runs_scrapes_as_these_names_types_and_values():
    m = metrics.ServerMetrics()
    _record_known_runs(m)
    types, values = scraped(m)
    assert types == FAMILIES
    ttft, e2e, queue = (f"{P}{n}_seconds" for n in ("time_to_first_token", "e2e_request_latency", "request_queue_time"))
    expected = {
        # first tokens at 1.5 s (streamed) and 1.0 s (the recording, at its end); buckets are cumulative
        (f"{ttft}_count", ()): 2,
        (f"{ttft}_sum", ()): 2.5,
        (f"{ttft}_bucket", (("le", "0.75"),)): 0,
        (f"{ttft}_bucket", (("le", "1.0"),)): 1,  # le: 1.0 itself falls in the 1.0 bucket
        (f"{ttft}_bucket", (("le", "2.5"),)): 2,
        (f"{ttft}_bucket", (("le", "+Inf"),)): 2,
        (f"{e2e}_count", ()): 2,
        (f"{e2e}_sum", ()): 5.0,
        (f"{e2e}_bucket", (("le", "1.0"),)): 1,
        (f"{e2e}_bucket", (("le", "2.5"),)): 1,
        (f"{e2e}_bucket", (("le", "5.0"),)): 2,
        (f"{queue}_count", ()): 3,
        (f"{queue}_sum", ()): pytest.approx(3.3),
        (f"{queue}_bucket", (("le", "0.3"),)): 2,
        (f"{queue}_bucket", (("le", "2.5"),)): 2,
        (f"{queue}_bucket", (("le", "5.0"),)): 3,
        (f"{P}num_requests_running", ()): 2,
        (f"{P}num_requests_waiting", ()): 1,
        (f"{P}num_requests_deferred", ()): 3,
        (f"{P}requests_deferred_total", ()): 4,
        (f"{P}admission_retries_total", ()): 5,
        (f"{P}requests_refused_total", ()): 1,
        (f"{P}session_reconnections_total", ()): 2,
        (f"{P}cuda_step_fallbacks", ()): 1,
        (f"{P}spec_decode_num_drafts_total", ()): 4,
        (f"{P}spec_decode_num_draft_tokens_total", ()): 10,
        (f"{P}spec_decode_num_accepted_tokens_total", ()): 6,
        (f"{P}spec_decode_num_accepted_tokens_per_pos_total", (("position", "1"),)): 3,
        (f"{P}spec_decode_num_accepted_tokens_per_pos_total", (("position", "2"),)): 2,
        (f"{P}spec_decode_num_accepted_tokens_per_pos_total", (("position", "3"),)): 1,
    }
    assert {k: values[k] for k in expected} == expected
    per_pos = [v for (name, _), v in values.items() if name.endswith("_per_pos_total")]
    assert sum(per_pos) == values[(f"{P}spec_decode_num_accepted_tokens_total", ())]
    # Only the series above: no `_created` timestamps beside them.
    assert not [name for name, _ in values if name.endswith("_created")]


def test_parse_samples_reads_a_scrape_by_series():
    m = metrics.ServerMetrics()
    _record_known_runs(m)
    got = metrics.parse_samples(m.render())
    assert got[f'{P}time_to_first_token_seconds_bucket{{le="+Inf"}}'] == 2
    assert got[f"{P}e2e_request_latency_seconds_sum"] == 5.0
    assert got[f'{P}spec_decode_num_accepted_tokens_per_pos_total{{position="3"}}'] == 1
    assert metrics.CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


def test_each_server_keeps_its_own_registry():
    one, other = metrics.ServerMetrics(), metrics.ServerMetrics()
    one.record_spec_decode([{"drafts": [{}, {}], "accepted_count": 1}])
    assert scraped(one)[1][(f"{P}spec_decode_num_drafts_total", ())] == 1
    assert scraped(other)[1][(f"{P}spec_decode_num_drafts_total", ())] == 0
    assert one.registry is not other.registry is not metrics.METRICS.registry
    assert scraped(metrics.METRICS)[0] == FAMILIES  # the app's process registry: the same names


def test_counts_from_many_threads_are_all_kept():
    m = metrics.ServerMetrics()

    def work():
        for _ in range(2000):
            m.spec_decode_num_drafts.inc()
            m.request_queue_time.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _, values = scraped(m)
    assert values[(f"{P}spec_decode_num_drafts_total", ())] == 16000
    assert values[(f"{P}request_queue_time_seconds_count", ())] == 16000


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


def test_a_session_that_names_one_this_server_lacks_is_a_reconnection():
    from specviz_app.serving.reconnect import came_back_from

    assert came_back_from({"Sec-WebSocket-Protocol": "streamlit, token, old-id"}, "new-id") == "old-id"
    assert came_back_from({"sec-websocket-protocol": "streamlit, token, same-id"}, "same-id") is None  # resumed
    assert came_back_from({"Sec-WebSocket-Protocol": "streamlit"}, "new-id") is None  # a first visit
    assert came_back_from({"Sec-WebSocket-Protocol": "streamlit, , "}, "new-id") is None
    assert came_back_from({}, "new-id") is None
