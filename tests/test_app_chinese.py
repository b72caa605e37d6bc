"""With Chinese chosen, every page's own words are Chinese (issue 48): each page is opened in
Streamlit's AppTest with ?lang=zh on the first visit's example, and every text it shows is read:
titles, markdown, captions, alerts, metrics, widget labels, help, placeholders and options, and its
charts' titles, axes, legends, annotations and hover text. The model's output and the prompt are
data, not words of the app: every string of the trace on show is taken out before reading. What
is left may keep only the Latin words a Chinese text on the subject keeps (test_catalogue's list).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app_pages import offline, one_thread  # noqa: F401 (their autouse fixtures: offline, one torch thread)

from specviz.teaching import lesson
from specviz.teaching.catalogue import LATIN_KEPT
from specviz_app import params

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "specviz_app" / "app.py")
# The pages whose words are all in the catalogue; each page joins when it is converted.
PAGES = [
    "lesson",
    "lab",
    "sweep",
    "acceptance",
    "theory",
    "workloads",
    "serving",
    "traces",
    "drafts",
    "playground",
    "inspector",
    "timeline",
]


def _strings(value, out: set[str]) -> None:
    """Every string inside a trace's dict (tokens, prompt, texts, top alternatives)."""
    if isinstance(value, str):
        if len(value.strip()) >= 2:
            out.add(value.strip())
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, out)


def data_strings(at: AppTest) -> tuple[list[str], set[str]]:
    """The trace on show's own strings (and its baseline's) and the example prompts: -> (the texts of
    eight characters or more, longest first, taken out wherever they stand whole (not inside a word);
    every string as a word, lower case, so a token counts as data only where a whole word is that token)."""
    out: set[str] = set(params.EXAMPLE_PROMPTS)
    loaded = at.session_state["loaded"] if "loaded" in at.session_state else None
    recordings = lesson.load_recordings()  # the lesson's own example
    shown = (loaded.trace, loaded.baseline) if loaded else ()
    for trace in (*shown, recordings.trace, recordings.contrast):
        if trace is not None:
            _strings(trace.to_dict(), out)
            out.add(trace.prompt.strip())
    long = sorted((s for s in out if len(s) >= 8), key=len, reverse=True)
    return long, {s.strip().lower() for s in out}


def _figure_texts(spec: dict) -> list[str]:
    found: list[str] = []

    def walk(value, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in ("text", "name", "hovertemplate", "title", "tickvals_text"):
            found.append(value)

    walk(spec.get("layout", {}))
    walk(spec.get("data", []))
    return found


def shown_texts(at: AppTest) -> list[str]:
    """Every text the page shows, as read from its element tree."""
    texts: list[str] = []

    def walk(node) -> None:
        kind = getattr(node, "type", "")
        # A widget's value is the user's choice (a key, a number, the prompt); a text element's value is its text.
        names = ("value", "label", "body") if kind in TEXT_ELEMENTS else ("label", "help", "placeholder")
        for name in names:
            value = getattr(node, name, None)
            if isinstance(value, str):
                texts.append(value)
        options = getattr(node, "options", None)  # as shown (format_func applied)
        if isinstance(options, list | tuple):
            texts.extend(o for o in options if isinstance(o, str))
        proto = getattr(node, "proto", None)
        if getattr(node, "type", "") == "plotly_chart" and proto is not None:
            texts.extend(_figure_texts(json.loads(proto.spec)))
        for child in (
            getattr(node, "children", {}).values() if isinstance(getattr(node, "children", None), dict) else []
        ):
            walk(child)

    walk(at.main)
    walk(at.sidebar)
    return texts


TEXT_ELEMENTS = {"title", "header", "subheader", "markdown", "caption", "text", "alert", "metric", "expandable", "tab"}
# Left out before reading: icons (:material/tune:), code, links, formulas, markup, file names, and an English gloss in
# full-width brackets after a Chinese term (推测解码（Speculative Decoding）), as Chinese textbooks write.
NOT_WORDS = (
    r":material/[a-z_]+:|"
    r"`[^`]*`|https?://\S+|\$[^$]*\$|<[^>]+>|&[a-z]+;|\{[^}]*\}|[\w\\.-]+\.(json|csv|pt|gguf)|（[A-Za-z ,-]+）"
)


def english_left(text: str, data: tuple[list[str], set[str]]) -> list[str]:
    long, tokens = data
    for s in long:  # never inside a word: a token " transform" must not leave "ers" of "transformers"
        text = re.sub(rf"(?<![A-Za-z]){re.escape(s)}(?![A-Za-z])", " ", text)
    text = re.sub(NOT_WORDS, " ", text)
    words = re.findall(r"[A-Za-z][A-Za-z0-9.\-/']*[A-Za-z0-9]|[A-Za-z]", text)
    kept = LATIN_KEPT | tokens
    return [w for w in words if len(w) > 1 and w.lower().strip(".-/'") not in kept]


@pytest.mark.parametrize("page", PAGES)
def test_every_word_a_page_shows_in_chinese_is_chinese(page):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"lang": "zh"})
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    data = data_strings(at)
    left = {}
    for text in shown_texts(at):
        if words := english_left(text, data):
            left[text[:120]] = words
    assert left == {}, f"{page}: English left on the Chinese page:\n" + "\n".join(
        f"{t!r}: {w}" for t, w in left.items()
    )


def test_the_lab_pages_machine_check_is_said_in_chinese(monkeypatch, tmp_path):
    """The Lab page's last `specviz check` report: its verdicts said from their numbers in the page's
    language (the report's own one-line sentences are English, in the JSON only)."""
    from specviz.labs import check

    report = {
        "schema": check.CHECK_SCHEMA, "quick": True, "rule": "exact", "made_at": "2026-12-06 09:00:00 UTC",
        "machine": {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "torch": "2.13.0+cpu"}, "seconds": 38.0,
        "passed": False, "caught_by": ["chi2"],
        "verdicts": [
            {"check": "kernels", "passed": True, "said": "shipped weights", "detail": {
                "weights": "shipped", "forward": "lean", "draft_step": "native"}},
            {"check": "greedy", "passed": True, "said": "2 of 2 prompts identical", "detail": {
                "tokens": 16, "prompts": [{"verdict": "identical"}, {"verdict": "near_tie", "at": 3, "gap": 1e-6}]}},
            {"check": "chi2", "passed": False, "said": "hybrid, rule resample_from_p", "detail": {
                "drafter": "hybrid", "rule": "resample_from_p", "p_value": 1.8e-18, "level": 0.001, "n": 400,
                "cells": 15}},
            {"check": "invariants", "passed": True, "said": "3 traces, 0 problems", "detail": {
                "traces": 3, "problems": []}},
            {"check": "speed", "passed": True, "said": "0.90×", "detail": {
                "spread": {"median": 0.9, "low": 0.87, "high": 0.97, "pairs": 3}, "costs": {"c": 0.24},
                "v": [0.0, 1.0, 1.1, 1.23, 1.39]}},
        ],
    }  # fmt: skip
    (tmp_path / "check.json").write_text(json.dumps(report), encoding="utf-8")
    monkeypatch.setattr(check, "last_report_path", lambda: tmp_path / "check.json")
    for lang in ("en", "zh"):
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params.update({"lang": lang})
        at.run()
        at.switch_page("app_pages/lab.py").run()
        assert not at.exception, [e.value for e in at.exception]
        alerts = [e.value for e in at.error]
        shown = " ".join(shown_texts(at) + alerts)
        if lang == "en":
            assert "A check failed: distribution (chi-square)" in shown and "p = `1.8e-18` (level 0.001)" in shown
            continue
        assert "有检查未通过：分布（卡方检验）" in shown and "p = `1.8e-18`（显著性水平 0.001）" in shown
        data = data_strings(at)
        left = {t[:120]: w for t in shown_texts(at) + alerts if (w := english_left(t, data))}
        assert left == {}, left


def test_a_second_session_pressing_the_machine_check_waits_for_the_first_and_runs_none(monkeypatch):
    """One check at a time per server: a session that finds one running is told so, in its language,
    and shows that check's report when it ends, without starting another."""

    from specviz.labs import check
    from specviz_app.controls import machine_check

    started: list[int] = []
    monkeypatch.setattr(check, "run_check", lambda **_: started.append(1))
    told: list[str] = []
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"lang": "zh"})
    at.run()
    at.switch_page("app_pages/lab.py").run()
    monkeypatch.setattr(machine_check.st, "empty", _recording_empty(told, machine_check.CHECKING.release))
    machine_check.CHECKING.acquire()  # another session's check, running: it ends once the wait is said
    try:
        at.button(key="lab_check_run").click().run()
    finally:
        if not told:  # the wait was never said: free the lock for the rest of the suite
            machine_check.CHECKING.release()
    assert not at.exception, [e.value for e in at.exception]
    assert started == []  # no second check ran
    assert told and "另一个会话正在检查这台机器" in told[0]
    assert machine_check.CHECKING.acquire(blocking=False)  # and the lock was left free
    machine_check.CHECKING.release()


def _recording_empty(told: list[str], on_first):
    """st.empty whose placeholder keeps what its info() said (AppTest clears a placeholder emptied
    later), calling on_first() once, after the first thing it said."""
    import streamlit as st

    real = st.empty

    def empty():
        placeholder = real()
        info = placeholder.info

        def said(body, **kwargs):
            told.append(body)
            shown = info(body, **kwargs)
            if len(told) == 1:
                on_first()
            return shown

        placeholder.info = said
        return placeholder

    return empty
