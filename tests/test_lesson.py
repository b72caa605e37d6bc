"""The lesson's recordings tell the story truthfully: the main example is faster than the target
alone on equal work, the contrast (a weak draft) is not, and every number the lesson prints is
recomputed here from the traces it comes from."""

from __future__ import annotations

import re

import pytest

from specviz import lesson
from specviz.trace import validate

REC = lesson.load_recordings()


def time_to(trace, tokens: int) -> float:
    """Independently of the library: the whole run's recorded wall time (what its tokens/s is computed
    from), or for fewer tokens the end of the iteration that wrote the tokens-th token."""
    if tokens == trace.summary["new_tokens"]:
        return trace.summary["wall_ms"]
    written = 0
    for it in trace.iterations:
        written += it["accepted_count"] + (1 if it["correction"] else 0)
        if written >= tokens:
            return it["start_ms"] + it["draft_ms"] + it["verify_ms"]
    raise AssertionError("the trace wrote fewer tokens")


def test_recordings_are_valid_traces_of_the_same_prompt():
    for trace in (REC.trace, REC.baseline, REC.contrast, REC.contrast_baseline):
        assert trace is not None
        validate(trace.to_dict())
    assert REC.trace.prompt == REC.baseline.prompt == REC.contrast.prompt
    assert REC.trace.config["temperature"] == 0  # greedy: the speculative text must be the target's own
    assert (
        REC.trace.output_token_ids[: len(REC.baseline.output_token_ids)]
        == REC.baseline.output_token_ids[: len(REC.trace.output_token_ids)]
    )


def test_main_example_wins_on_equal_tokens_and_the_contrast_loses():
    main = lesson.race_numbers(REC.trace, REC.baseline)
    n = min(REC.trace.summary["new_tokens"], REC.baseline.summary["new_tokens"])
    assert main["tokens"] == n
    assert main["speculative_ms"] == pytest.approx(time_to(REC.trace, n))
    assert main["target_ms"] == pytest.approx(time_to(REC.baseline, n))
    assert main["speedup"] > 1.0, main
    contrast = lesson.race_numbers(REC.contrast, REC.contrast_baseline)
    assert contrast["speedup"] < 1.0, contrast


@pytest.mark.parametrize("kind", ["timeline", "not"])
def test_printed_race_numbers_agree_with_the_traces(kind):
    shown = lesson.shown_for(kind, REC)
    text = " ".join(t for _, t in shown.notes)
    spec_ms, base_ms = (float(x) for x in re.findall(r"\*\*(\d+) ms\*\*", text))
    speedup = float(re.search(r"\*\*(\d+\.\d+)×\*\*", text).group(1))
    trace, base = (REC.trace, REC.baseline) if kind == "timeline" else (REC.contrast, REC.contrast_baseline)
    n = min(trace.summary["new_tokens"], base.summary["new_tokens"])
    assert spec_ms == round(time_to(trace, n)) and base_ms == round(time_to(base, n))
    assert speedup == pytest.approx(time_to(base, n) / time_to(trace, n), abs=0.006)
    annotations = [a.text for a in shown.figure.layout.annotations]
    assert any(f"{round(time_to(trace, n))} ms for the first {n} tokens" in a for a in annotations), annotations


def test_every_step_has_a_figure_builder():
    for language in lesson.LANGUAGES:
        for step in lesson.load_lesson(language)["steps"]:
            assert step["figure"] in lesson.FIGURES
            assert lesson.shown_for(step["figure"], REC).figure is not None, step["figure"]
