"""Bad input through the app's script (streamlit.testing AppTest, no browser): each gets a clear
message, the app keeps running, and the trace on show and the sidebar settings are kept.
The browser versions are in tests/browser/test_bad_input.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.traces.trace import MAX_TRACE_BYTES

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
EXAMPLE = ROOT / "specviz" / "assets" / "examples" / "01-default.json"


def _with(section: str, key: str, raw: str) -> bytes:
    """The example trace with one field replaced by raw JSON text (NaN and the like)."""
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    data[section][key] = "@RAW@"
    return json.dumps(data).replace('"@RAW@"', raw).encode()


def _without(section: str, key: str) -> bytes:
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    del data[section][key]
    return json.dumps(data).encode()


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def new_app(query: dict | None = None, timeout: float = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(query or {})
    return at.run()


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def showing(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Showing")).replace("\\", "")


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    ok(at.switch_page("app_pages/traces.py").run())
    at.file_uploader(key="traces_upload").set_value([(name, data, "application/json")]).run()
    labels = [b.label for b in at.button]
    if "Open the uploaded trace" in labels:  # a file too large to open gets no Open button, only the reason
        at.button[labels.index("Open the uploaded trace")].click().run()
    return ok(at)


def kept(at: AppTest, before: str, gamma: int) -> None:
    ok(at.switch_page("app_pages/playground.py").run())
    assert showing(at) == before and at.slider(key="s_gamma").value == gamma


def test_empty_prompt_gets_a_message_and_keeps_the_trace_and_settings():
    at = new_app()
    before = showing(at)
    at.slider(key="s_gamma").set_value(6)
    at.text_area(key="s_prompt").set_value("   ")
    at.button(key="run_sidebar").click().run()
    ok(at)
    assert "The prompt is empty: type some text for the model to continue." in errors(at)[0]
    assert "Nothing was lost" in errors(at)[0]
    kept(at, before, 6)


def test_link_values_outside_the_sliders_are_clamped():
    at = ok(new_app({"gamma": "99", "temperature": "7", "max_new": "100000", "prompt": ""}))
    warnings = [w.value for w in at.sidebar.warning]
    assert "From the link: γ: 99 is outside 1..16; using 16." in warnings
    assert "From the link: temperature: 7.0 is outside 0.0..2.0; using 2.0." in warnings
    assert at.slider(key="s_gamma").value == 16 and at.slider(key="s_temperature").value == 2.0
    assert at.slider(key="s_max_new").value == 256


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("nan.json", _with("config", "temperature", "NaN"), "contains NaN"),
        ("deep.json", b"[" * 100_000, "nested too deeply"),
        ("pickle.json", b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94.", "not UTF-8"),
        (
            "huge.json",
            b" " * (MAX_TRACE_BYTES + 1),
            "too large to open. A trace file may be at most 20 MB",
        ),  # said by the Traces page as the file arrives (issue 48, E3)
        ("no-calls.json", _without("summary", "target_calls"), "target_calls"),
    ],
)
def test_bad_uploads_get_clear_errors_and_keep_the_trace(name, content, words):
    at = new_app()
    before = showing(at)
    at.slider(key="s_gamma").set_value(3).run()
    upload(at, name, content)
    assert any(name in e and words in e for e in errors(at)), errors(at)
    kept(at, before, 3)


def test_runs_are_told_when_they_wait_for_another_sessions_decode(monkeypatch):
    """state.run hands the decoder hooks whose on_wait reports the queue position."""
    import specviz.decoding.decoder
    from specviz.errors import ConfigError

    seen = []

    def fake(*args, hooks=None, **kwargs):
        seen.append(hooks.on_wait)
        hooks.on_wait(2)  # what specviz.serving.gate does while two runs are ahead
        raise ConfigError("stop here")

    monkeypatch.setattr(specviz.decoding.decoder, "speculative_generate", fake)
    at = new_app()
    at.button(key="run_sidebar").click().run()
    ok(at)
    assert seen and callable(seen[0])
    assert "stop here" in errors(at)[0]
    from specviz.teaching import catalogue

    said = catalogue.words("running", "en")  # running.py's status line while queued (the catalogue's "running")
    assert said["waiting"].startswith("Waiting for the model: {place}")
    assert said["place_estimate"].format(nth="3rd", s=8) == "3rd in line, about 8 s"  # as gate.place_words says it


def test_a_custom_pair_without_a_target_is_refused_in_words_and_the_trace_kept():
    """One rule for a missing target (loading.load_pair), for a Run as for the pages that run the
    sidebar's pair: the message asks for a target, before any model loads or any decode starts."""
    from specviz.errors import SpecvizError
    from specviz_app.params import Settings
    from specviz_app.runs import loading

    message = "Name a target model in the sidebar (custom pair), or pick another pair."
    with pytest.raises(SpecvizError, match="Name a target model"):
        loading.sidebar_pair(Settings(pair="custom", draft="ngram"))
    at = new_app()
    before = showing(at)
    at.selectbox(key="s_pair").set_value("custom").run()
    at.text_input(key="s_target").set_value("   ")
    at.button(key="run_sidebar").click().run()
    ok(at)
    assert errors(at) and errors(at)[0].startswith(message), errors(at)
    assert showing(at) == before


@pytest.mark.slow
def test_a_custom_draft_with_another_vocabulary_is_refused_and_the_trace_kept(tmp_path):
    from browser.helpers import save_foreign_vocab_model

    folder = save_foreign_vocab_model(tmp_path / "foreign")
    at = new_app(timeout=300)
    before = showing(at)
    at.selectbox(key="s_pair").set_value("custom").run()
    at.text_input(key="s_target").set_value("offline:smollm2-135m-instruct")
    at.text_input(key="s_draft").set_value(str(folder))
    at.button(key="run_sidebar").click().run()
    ok(at)
    assert any("do not share a vocabulary" in e for e in errors(at)), errors(at)
    ok(at.switch_page("app_pages/playground.py").run())
    assert showing(at) == before and at.selectbox(key="s_pair").value == "custom"


def test_a_missing_custom_model_is_named_in_the_message():
    at = new_app()
    at.selectbox(key="s_pair").set_value("custom").run()
    at.text_input(key="s_target").set_value("nobody/no-such-model")
    at.button(key="run_sidebar").click().run()
    ok(at)
    assert "The model 'nobody/no-such-model' is not available offline" in errors(at)[0]
    assert "example" in showing(at)
