"""A trace file too large to open is refused in a sentence, in the language on show (issue 48, E3): a
25 MB upload got only the uploader's red "!". The server and the uploader take up to
server.maxUploadSize (more than a trace may be), and the Traces page says that the file is too large,
the limit and what to do, with no Open button."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.teaching.catalogue import words
from specviz.traces.validation import MAX_TRACE_BYTES

APP = str(Path(__file__).resolve().parent.parent / "specviz_app" / "app.py")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize(("lang", "said"), [("en", ["too large", "at most 20 MB", "21.0 MB"]),
                                            ("zh", ["太大", "最大 20 MB", "21.0 MB"])])  # fmt: skip
def test_a_trace_too_large_is_refused_with_the_limit_and_what_to_do(lang, said):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page("app_pages/traces.py").run()
    big = b" " * (MAX_TRACE_BYTES + 1024 * 1024)  # 21 MB, as Streamlit counts them
    at.file_uploader[0].set_value([("huge.json", big, "application/json")]).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any("huge.json" in e and all(s in e for s in said) and "--max-new-tokens" in e for e in errors), errors
    open_label = words("traces", lang)["open_upload"]
    assert open_label not in [b.label for b in at.button]  # nothing to open
