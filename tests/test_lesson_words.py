"""The lesson says only what it has taught, in both languages, and its numbers are the chart's (issue 48,
L2): step 2 used words no step had explained ("packed weights", "native kernel", the draft's code name
alone) and a colour the chart hardly shows; step 12 cited "the source article" without naming it."""

from __future__ import annotations

import statistics

import pytest

from specviz.teaching import lesson
from specviz.teaching.charts.style import P_COLOR, Q_COLOR

UNTAUGHT = {
    "en": ["packed weights", "native kernel", "teal", "source article", "paper-head"],
    "zh": ["打包", "原生内核", "青色", "原文", "paper-head"],
}
ARTICLE = "Fast Inference from Transformers via Speculative Decoding"  # ../shared/seed's title


def step(lang: str, step_id: str) -> dict:
    """The step as the page shows it: its words with the example's numbers put in (lesson.with_numbers)."""
    raw = next(s for s in lesson.load_lesson(lang)["steps"] if s["id"] == step_id)
    return lesson.with_numbers(raw, lesson.load_recordings(), lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_2_and_step_12_use_only_words_the_lesson_taught(lang):
    for step_id in ("idea", "task"):
        text = step(lang, step_id)["body"]
        assert not [w for w in UNTAUGHT[lang] if w in text], (step_id, text)
    assert lesson.notes_text(lang)["with_draft"].count("{draft}") == 1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_12_names_the_article_the_lesson_follows(lang):
    text = step(lang, "task")["body"]
    assert ARTICLE in text and "Leviathan" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_2s_numbers_and_colours_are_the_charts(lang):
    """A checking pass in steps of the target alone, the drafting's share of a pass and γ: the recording's,
    which the timeline beside the words draws (recomputed here from its iterations, whichever recording
    ships); dark purple and green are the colours it draws them in."""
    rec = lesson.load_recordings()
    text = step(lang, "idea")["body"]
    # Both runs wrote the same tokens, so the timeline draws all of them; the first iteration of each
    # reads the prompt (the prefill), not a checking pass or one token's step.
    assert rec.trace.summary["new_tokens"] == rec.baseline.summary["new_tokens"]
    checks = rec.trace.iterations[1:]
    passes = statistics.mean(it["verify_ms"] for it in checks)
    steps = statistics.mean(it["verify_ms"] for it in rec.baseline.iterations[1:])
    drafting = statistics.mean(it["draft_ms"] for it in checks)
    assert rec.trace.iterations[0]["verify_ms"] > 2 * passes  # the prefill, left out: it would skew both
    assert f"**{passes / steps:.1f}**" in text
    assert f"{drafting / passes:.0%}" in text
    gamma = rec.trace.config["gamma"]
    assert f"γ = {gamma}" in text and f"γ + 1 = {gamma + 1}" in text
    fig = lesson.timeline_figure(rec.trace, rec.baseline, lang)
    assert [d.marker.color for d in fig.data] == [Q_COLOR, P_COLOR, P_COLOR]  # green draft, purple target twice
    assert fig.data[1].opacity == 1.0 and fig.data[2].opacity < 1.0  # dark purple above, light purple below
    colours = {"en": ["dark purple", "green", "light purple"], "zh": ["深紫色", "绿色", "浅紫色"]}[lang]
    assert all(c in text for c in colours), text
