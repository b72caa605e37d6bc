"""The Streamlit app, driven by streamlit.testing.v1.AppTest.

Fast tests use the example traces in assets/examples and hand-made traces (no model). Tests marked
slow load the offline default target (SmolLM2-135M) and decode a few tokens; the model is loaded
once per test process (st.cache_resource and specviz.engine.models keep it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_charts import make_baseline, make_trace

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
PAGES = [
    "app_pages/playground.py",
    "app_pages/inspector.py",
    "app_pages/timeline.py",
    "app_pages/acceptance.py",
    "app_pages/traces.py",
]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def new_app(query: dict | None = None, timeout: float = 30) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(query or {})
    return at.run()


def no_error(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(page).run()
    no_error(at)
    return at


def html_bodies(at: AppTest) -> str:
    """Every st.html the page drew, less the app's own scripts (render: the hover cards' placing), which
    hold no user text: what is left must hold no script."""
    from specviz_app.render import APP_SCRIPTS

    return "\n".join(h.value for h in at.html if h.value not in APP_SCRIPTS)


def source_caption(at: AppTest) -> str:
    caption = next(c.value for c in at.caption if c.value.startswith("Showing"))
    return caption.replace("\\", "")  # markdown escapes


def _mime(name: str) -> str:
    return "text/csv" if name.endswith(".csv") else "application/json"


def upload(at: AppTest, files: list[tuple[str, bytes]]) -> AppTest:
    goto(at, "app_pages/traces.py")
    # the first uploader on the page: its key changes each time it is emptied after an opening
    at.file_uploader[0].set_value([(name, data, _mime(name)) for name, data in files]).run()
    at.button[[b.label for b in at.button].index("Open the uploaded trace")].click().run()
    no_error(at)
    return at


def test_first_visit_opens_the_default_example_on_every_page():
    at = new_app()
    no_error(at)
    assert "example" in source_caption(at)
    assert len(at.metric) == 8 and at.metric[0].label == "Speedup"
    assert "sv-accepted" in html_bodies(at) and "sv-legend" in html_bodies(at)
    assert at.query_params["pair"] == ["offline"] or at.query_params["pair"] == "offline"
    goto(at, "app_pages/inspector.py")
    assert at.slider(key="inspect_iter").value == 2  # past the prefill, which drafts nothing (issue 48, S1)
    goto(at, "app_pages/timeline.py")
    assert at.get("plotly_chart")
    goto(at, "app_pages/acceptance.py")
    assert len(at.get("plotly_chart")) == 3 and len(at.dataframe) == 3  # by position, lengths, beside the record
    goto(at, "app_pages/traces.py")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Trace (JSON)", "Per-token CSV", "accept_lengths", "Baseline (JSON)"]


def test_every_gallery_example_opens_and_renders_every_page():
    at = goto(new_app(), "app_pages/traces.py")
    names = [b.key for b in at.button if (b.key or "").startswith("example-")]
    assert names, "no example traces in assets/examples"
    for name in names:
        at = goto(at, "app_pages/traces.py")
        at.button(key=name).click().run()
        no_error(at)
        assert at.success and "Opened the example" in at.success[0].value
        for page in PAGES:
            goto(at, page)
        assert not at.warning, [w.value for w in at.warning]  # the sidebar now matches the example


def test_uploaded_trace_renders_every_page_without_a_model(monkeypatch):
    import specviz.decoding.decoder

    def refuse(*args, **kwargs):
        raise AssertionError("a model was run")

    monkeypatch.setattr(specviz.decoding.decoder, "speculative_generate", refuse)
    at = upload(
        new_app(), [("mine.json", make_trace().to_json().encode()), ("base.json", make_baseline().to_json().encode())]
    )
    assert "Opened the uploaded mine.json" in at.success[0].value
    for page in PAGES:
        goto(at, page)
        if page != "app_pages/traces.py":
            assert "file: mine.json" in source_caption(at)
    goto(at, "app_pages/inspector.py")
    assert at.slider(key="inspect_iter").max == 3
    goto(at, "app_pages/timeline.py")
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["name"] for t in fig["data"]} >= {"draft up to γ tokens (q)", "target-only step (p), one token each"}


def test_a_bad_upload_gets_a_clear_error_and_keeps_the_trace():
    at = new_app()
    before = source_caption(at)
    upload(at, [("broken.json", b'{"schema": "specviz.trace/1", "mode": ')])
    assert "broken.json" in at.error[0].value and "not valid JSON" in at.error[0].value
    upload(at, [("wrong.json", json.dumps({"schema": "other/2"}).encode())])
    assert "Unsupported trace schema" in at.error[0].value
    data = json.loads(make_trace().to_json())
    data["iterations"][0]["drafts"][0]["accept_prob"] = 0.01  # breaks accept_prob == min(1, p/q)
    upload(at, [("edited.json", json.dumps(data).encode())])
    assert "accept_prob" in at.error[0].value
    goto(at, "app_pages/playground.py")
    assert source_caption(at) == before


def test_the_pages_own_csv_and_accept_lengths_say_what_they_are_and_what_to_upload():
    """Both downloads are taken by the uploader (the CSV used to be refused as a file type) and
    answered with what the file is and which download reopens the run; the trace on show stays."""
    at = new_app()
    before = source_caption(at)
    trace = make_trace()
    upload(at, [("specviz-fox-seed0.csv", trace.to_csv().encode())])
    msg = at.error[0].value
    assert 'specviz-fox-seed0.csv is the "Per-token CSV" download' in msg
    assert '"Trace (JSON)"' in msg and "specviz-fox-seed0.json" in msg and "specviz-fox-seed0.baseline.json" in msg
    assert "The trace on show is unchanged" in msg
    upload(at, [("specviz-fox-seed0.accept_lengths.json", json.dumps(trace.accept_lengths()).encode())])
    msg = at.error[0].value
    assert 'is a list of 3 numbers, like the "accept_lengths" download' in msg
    assert '"Trace (JSON)"' in msg and "specviz-fox-seed0.json" in msg
    assert "expected a JSON object" not in msg
    upload(at, [("notes.csv", b"a,b\n1,2\n")])
    assert "notes.csv is a CSV file, and a trace is JSON" in at.error[0].value
    assert "notes.json" not in at.error[0].value  # no file is named that the page never made (issue 48, E4)
    assert "if the run had a baseline" in at.error[0].value  # a run without one is not told of it (E2)
    goto(at, "app_pages/playground.py")
    assert source_caption(at) == before


def test_a_file_added_again_replaces_the_earlier_one_and_the_uploader_empties_after_opening():
    """The browser's uploader keeps every file it was given: a re-added trace came as a third file
    ("Upload one trace, or ... (two files)") and a file added after a refused one joined it."""
    trace, base = make_trace().to_json().encode(), make_baseline().to_json().encode()
    at = upload(new_app(), [("mine.json", trace), ("base.json", base), ("mine.json", trace)])
    assert "Opened the uploaded mine.json" in at.success[0].value
    assert not at.error
    assert at.file_uploader[0].value == []  # emptied: the next file starts a new upload
    goto(at, "app_pages/playground.py")
    assert "file: mine.json" in source_caption(at) and at.metric[0].label == "Speedup"
    upload(at, [("broken.json", b"{")])  # refused: the uploader empties too, the trace stays
    assert "broken.json" in at.error[0].value and at.file_uploader[0].value == []
    at = upload(at, [("again.json", trace)])
    assert "Opened the uploaded again.json" in at.success[0].value and not at.error


def test_iteration_slider_and_buttons_change_the_inspected_tokens(monkeypatch):
    import specviz.decoding.decoder

    monkeypatch.setattr(specviz.decoding.decoder, "speculative_generate", None)  # any model run would fail loudly
    at = upload(new_app(), [("mine.json", make_trace().to_json().encode())])
    goto(at, "app_pages/inspector.py")

    def shown() -> str:
        return html_bodies(at)

    first = shown()
    assert 'sv-accepted"> The<span' in first and "resample" in at.subheader[0].value
    at.slider(key="inspect_iter").set_value(2).run()
    no_error(at)
    second = shown()
    assert second != first and 'sv-accepted"> lazy<span' in second and "bonus" in at.subheader[0].value
    # three drafts, the bonus distribution, the KV caches' rows and the measured cache comparison
    assert len(at.get("plotly_chart")) == 6
    at.button[[b.label for b in at.button].index("Next")].click().run()
    assert at.slider(key="inspect_iter").value == 3
    assert "discarded unchecked" in " ".join(c.value for c in at.caption)
    at.button[[b.label for b in at.button].index("Previous")].click().run()
    assert at.slider(key="inspect_iter").value == 2


def test_a_settings_change_says_a_run_is_needed_and_keeps_the_trace():
    at = new_app()
    assert not at.warning
    before = source_caption(at)
    at.slider(key="s_gamma").set_value(7).run()
    no_error(at)
    assert "differ" in at.warning[0].value and "Run" in at.warning[0].value
    assert source_caption(at) == before  # nothing re-ran
    assert at.query_params["gamma"] in ("7", ["7"])  # mirrored in the URL


def test_link_values_are_validated_not_crashing():
    # every value is refused or clamped back to a default, so the link matches the default example: no run
    at = new_app({"temperature": "hot", "pair": "gpt-9", "seed": "-5", "top_k": "-3"})
    no_error(at)
    warnings = " ".join(w.value for w in at.sidebar.warning)
    assert "temperature" in warnings and "gpt-9" in warnings and "seed" in warnings and "top-k" in warnings
    assert at.slider(key="s_temperature").value == 0.0 and at.number_input(key="s_top_k").value == 0
    assert "example" in source_caption(at)


def test_token_text_and_prompt_are_escaped():
    at = upload(new_app(), [("evil.json", make_trace(evil=True).to_json().encode())])
    goto(at, "app_pages/playground.py")
    body = html_bodies(at)
    assert "&lt;script&gt;" in body
    assert "<script" not in body.lower()
    assert not re.search(r"<b>there", body)


def test_online_pair_offline_gives_a_clear_message_quickly():
    at = new_app({"pair": "qwen2-5-1-5b-0-5b"}, timeout=60)  # the timeout bounds a hang (a wait for the network)
    no_error(at)
    assert at.error, "expected an error message"
    message = at.error[0].value
    assert "not available offline" in message and "Qwen/Qwen2.5-1.5B-Instruct" in message
    assert "Traceback" not in message


@pytest.mark.slow
def test_run_with_the_default_models_then_every_page(monkeypatch):
    at = new_app(timeout=600)
    at.text_area(key="s_prompt").set_value("List three fruits.")
    at.slider(key="s_max_new").set_value(16)
    at.slider(key="s_temperature").set_value(0.7)
    at.run()
    assert "differ" in at.warning[0].value
    at.button(key="run_sidebar").click().run()
    no_error(at)
    assert not at.error, [e.value for e in at.error]
    assert "run here" in source_caption(at)
    assert not [w for w in at.warning if "settings differ" in w.value]  # the trace now matches the sidebar
    # The run decoded batched, alone here (no other session to share with): its passes served it
    # alone, so its own pair is a solo timing and the page shows its speedup at once.
    from specviz_app import keys

    loaded = at.session_state[keys.LOADED]
    assert loaded.trace.config["batched"] and loaded.baseline.config["batched"]
    assert loaded.trace.extra["batch"] == {"most_sessions": 1}
    assert loaded.trace.extra["timing"]["pairs"][0]["batched"] is False
    assert at.metric[0].value.endswith("×")
    # The suite's app times no pair beyond a run's own (tests/conftest.py): no timing is started, and
    # the speedup says it is one pair's.
    assert loaded.trace.extra["timing"]["wanted"] == 1 and loaded.timing is None
    assert at.metric[0].delta == "one pair"
    assert not any("Decoded together with" in c.value for c in at.caption)  # nothing was shared
    for page in PAGES:
        goto(at, page)
    # moving the slider over the finished trace re-renders without any model
    import specviz.decoding.decoder

    monkeypatch.setattr(specviz.decoding.decoder, "speculative_generate", None)
    goto(at, "app_pages/inspector.py")
    first = html_bodies(at)
    if at.slider(key="inspect_iter").max > 1:  # it opens on the first iteration that drafted: show another
        shown = at.slider(key="inspect_iter").value
        at.slider(key="inspect_iter").set_value(1 if shown > 1 else 2).run()
        no_error(at)
        assert html_bodies(at) != first


@pytest.mark.slow
def test_a_script_prompt_runs_and_shows_as_text():
    at = new_app({"prompt": "Repeat: <script>alert('x')</script> <b>bold</b>", "max_new": "8"}, timeout=600)
    no_error(at)
    assert not at.error, [e.value for e in at.error]
    with_prompt = [h.value for h in at.html if "blockquote" in h.value]
    assert with_prompt and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt;" in with_prompt[0]
    assert "<script" not in html_bodies(at).lower()


@pytest.mark.slow
def test_a_custom_pair_with_an_unknown_draft_gives_a_clear_message():
    at = new_app()
    at.selectbox(key="s_pair").set_value("custom").run()
    at.text_input(key="s_target").set_value("offline:smollm2-135m-instruct")
    at.text_input(key="s_draft").set_value("nobody/no-such-draft")
    at.button(key="run_sidebar").click().run()
    no_error(at)
    assert at.error and "nobody/no-such-draft" in at.error[0].value
    assert "example" in source_caption(at)  # the previous trace is kept


@pytest.mark.slow
def test_check_the_pair_button_explains_the_vocabulary():
    at = new_app()
    at.selectbox(key="s_pair").set_value("custom").run()
    at.text_input(key="s_target").set_value("offline:smollm2-135m-instruct")
    at.text_input(key="s_draft").set_value("ngram")
    at.button(key="check_pair").click().run()
    no_error(at)
    assert "own vocabulary" in at.sidebar.success[0].value
    at.text_input(key="s_draft").set_value("nobody/no-such-draft")
    at.button(key="check_pair").click().run()
    assert "nobody/no-such-draft" in at.sidebar.error[0].value


def test_an_untraced_trace_renders_every_page():
    data = json.loads(make_trace().to_json())
    data["config"]["traced"] = False
    data["iterations"] = []
    data["extra"] = {}
    at = upload(new_app(), [("summary-only.json", json.dumps(data).encode())])
    for page in PAGES:
        goto(at, page)
    goto(at, "app_pages/inspector.py")
    assert "no recorded iterations" in at.info[0].value


def test_token_stream_escapes_and_can_hide_refused_drafts():
    from specviz_app import render

    trace = make_trace(evil=True)
    html = render.token_stream_html(trace.iterations, trace.extra)
    assert "<script" not in html.lower() and html.count("&lt;script&gt;") >= 2  # the token and its hover card
    assert "sv-rejected" in html and "sv-discarded" in html
    plain = render.token_stream_html(trace.iterations, trace.extra, show_refused=False)
    assert "sv-tok sv-rejected" not in plain and "sv-tok sv-discarded" not in plain
    assert plain.count('class="sv-tok ') == len(trace.output_token_ids)


def test_a_new_default_draft_still_opens_the_gallery(monkeypatch):
    """When models.DEFAULT_DRAFT changes, examples recorded with the previous default draft still
    open, with the sidebar naming that draft as a custom pair, until scripts/record_examples.py
    re-records them."""
    from specviz.engine import models

    monkeypatch.setattr(models, "DEFAULT_DRAFT", "offline:some-trained-draft")
    at = new_app()
    no_error(at)
    assert "example" in source_caption(at)
    assert not at.warning, [w.value for w in at.warning]  # the sidebar took the example's settings
    assert at.selectbox(key="s_pair").value == "offline-hybrid"  # the draft the gallery was recorded with


def test_a_decoding_page_redraws_at_most_every_stream_redraw_s():
    """The stream is sent whole at every redraw: the first iteration is drawn at once, later ones at
    most every render.STREAM_REDRAW_S, and the last one of max_new_tokens always."""
    from types import SimpleNamespace

    from specviz_app import render
    from specviz_app.runs import running

    step = render.STREAM_REDRAW_S
    times = iter([0.0, 0.4 * step, 1.1 * step, 1.5 * step, 1.6 * step, 1.7 * step])
    redraw = running._Redraw(clock=lambda: next(times))
    made = [SimpleNamespace(new_tokens=n, max_new_tokens=5) for n in (1, 2, 3, 4, 4, 5)]
    assert [redraw.due(p) for p in made] == [True, False, True, False, False, True]


def test_the_trace_json_alone_reproduces_the_speedup_the_page_showed():
    """ "Trace (JSON)" promises the full trace: uploaded alone in a fresh session it showed "Speedup n/a"
    and another tok/s (issue 59). It carries its baseline now: the same figures on every page."""
    from specviz_app.runs import gallery

    at = new_app()  # the first visit shows the default example with its baseline
    goto(at, "app_pages/playground.py")
    shown = {m.label: (m.value, m.delta) for m in at.metric}
    trace, baseline = gallery.example_traces(gallery.examples()[0])
    one_file = trace.with_baseline_json(baseline, indent=1).encode()  # what the Traces page's download gives
    fresh = upload(new_app(), [("01-default.json", one_file)])
    goto(fresh, "app_pages/playground.py")
    alone = {m.label: (m.value, m.delta) for m in fresh.metric}
    assert alone == shown and alone["Speedup"][0] != "n/a", (alone, shown)
    for page in ("timeline", "acceptance", "inspector", "theory"):  # every page opens it
        goto(fresh, f"app_pages/{page}.py")
        no_error(fresh)


def test_a_carried_baseline_is_checked_like_an_uploaded_one():
    from specviz.errors import TraceError
    from specviz.traces.trace import Trace
    from specviz_app.runs import gallery

    trace, baseline = gallery.example_traces(gallery.examples()[0])
    data = json.loads(trace.with_baseline_json(baseline))
    assert Trace.from_dict(data).carried_baseline()[1].to_dict() == baseline.to_dict()
    data["extra"]["baseline"]["summary"]["wall_ms"] = -1.0
    with pytest.raises(TraceError, match="extra.baseline: summary.wall_ms"):
        Trace.from_dict(data).carried_baseline()
    data["extra"]["baseline"] = trace.to_dict()  # a speculative run is no baseline
    with pytest.raises(TraceError, match="target-alone run"):
        Trace.from_dict(data).carried_baseline()


def test_a_run_says_it_loads_the_models_only_when_it_will(monkeypatch):
    """Run pressed again on a link whose models are loaded showed "Loading the models…" above the old
    stream for a second (issue 59): the first status says "Starting the run…" once they are."""
    from specviz_app import params
    from specviz_app.runs import loading

    settings = params.DEFAULTS
    monkeypatch.setattr(loading, "LOADED", set())
    assert not loading.target_loaded(settings)
    loading.LOADED.add((settings.model_names()[0], settings.dtype, settings.weights))
    assert loading.target_loaded(settings)
    other = params.Settings(**{**vars(settings), "weights": "float32"})  # another load of the same target
    assert not loading.target_loaded(other)
