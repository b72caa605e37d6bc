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


CJK = re.compile(r"[\u4e00-\u9fff]")
SYMBOLS = re.compile(r"\b(max|min|norm|ms|token)\b|[pqcαβγ]\b")  # math and units the Chinese text keeps as they are


def chart_words(fig) -> list[str]:
    """Every word a reader sees on a figure apart from the tick labels: the title, the axis titles,
    the legend's names and the annotations."""
    layout = fig.layout
    out = [layout.title.text, layout.xaxis.title.text, layout.yaxis.title.text]
    out += [t.name for t in fig.data if t.showlegend is not False]
    out += [a.text for a in layout.annotations]
    return [t for t in out if t]


def english_words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z]{2,}", SYMBOLS.sub(" ", text))


def test_chinese_lesson_figures_and_notes_are_in_chinese():
    """?lang=zh translated the steps but left every figure's title, axes, legend and annotations, and
    the notes beside them, in English."""
    for step in lesson.load_lesson("zh")["steps"]:
        shown = lesson.shown_for(step["figure"], REC, "zh")
        texts = chart_words(shown.figure) + [text for _, text in shown.notes]
        assert texts, step["id"]
        for text in texts:
            assert CJK.search(text) or not english_words(text), (step["id"], text)


def test_english_lesson_figures_stay_english():
    for step in lesson.load_lesson("en")["steps"]:
        shown = lesson.shown_for(step["figure"], REC, "en")
        for text in chart_words(shown.figure) + [text for _, text in shown.notes]:
            assert not CJK.search(text), (step["id"], text)


def test_shared_builders_keep_their_english_default():
    from specviz.charts import theory as theory_charts
    from specviz.charts import timeline_figure

    assert timeline_figure(REC.trace, REC.baseline).layout.title.text == "Timeline: where the time goes"
    fig = theory_charts.walltime_curve_figure(0.8, 0.05, 4)
    assert fig.layout.yaxis.title.text == "walltime improvement (× target alone)"


def test_the_token_legend_follows_the_lesson_language():
    from specviz.charts.stream import MAIN_STATUSES, legend_html
    from specviz.charts.style import STATUS_LABELS

    english, chinese = legend_html(), legend_html(lang="zh")
    assert all(STATUS_LABELS[s] in english for s in MAIN_STATUSES)
    assert not any(STATUS_LABELS[s] in chinese for s in MAIN_STATUSES)
    assert "被拒绝的草稿" in chinese and 'class="sv-key sv-rejected">rejected<' in chinese  # names stay
