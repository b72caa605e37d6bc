"""The lesson's recordings tell the story truthfully: the main example is faster than the target
alone on equal work, the contrast (a weak draft) is not, and every number the lesson prints is
recomputed here from the traces it comes from."""

from __future__ import annotations

import re

import pytest

from specviz.teaching import lesson
from specviz.traces.speedup import speedup_spread
from specviz.traces.trace import validate

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

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
    assert REC.trace.prompt == REC.baseline.prompt == REC.contrast.prompt == REC.contrast_baseline.prompt
    for key in ("temperature", "seed", "max_new_tokens"):  # every race is run on equal settings
        assert REC.trace.config[key] == REC.baseline.config[key] == REC.contrast.config[key], key
        assert REC.contrast.config[key] == REC.contrast_baseline.config[key], key
    assert REC.trace.config["temperature"] > 0  # sampled: the lesson teaches r, p/q and the residual


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
    assert speedup == pytest.approx(speedup_spread(trace, base).median, abs=0.006)  # the pages' own speedup
    annotations = [a.text for a in shown.figure.layout.annotations]
    assert any(f"{round(time_to(trace, n))} ms for the first {n} tokens" in a for a in annotations), annotations


# ----- the example is sampled (issue 35, item 2): what steps 3-8 teach must be in the recording ----


def taught() -> dict:
    """The iteration steps 3-8 show, read from the trace without the library's own checks."""
    from specviz.teaching.charts import lesson as lesson_charts

    it = REC.trace.iterations[lesson_charts.pick_iterations(REC.trace.iterations)["resample"]]
    k = it["accepted_count"]
    return {"it": it, "accepted": it["drafts"][:k], "rejected": it["drafts"][k], "correction": it["correction"]}


def test_a_draft_read_aloud_must_show_its_numbers():
    """Step 5 reads every checked draft's q, p and r to three decimals: an iteration whose rejected
    draft had p and q of 0.0004 ("q = 0.000, p = 0.000"), or whose accepted draft had p of 0.004, is
    not legible, so the recording script picks another seed."""
    from specviz.teaching.charts import lesson as lesson_charts

    def iteration(accepted_q, accepted_p, rejected_q, rejected_p):
        drafts = [
            {"q": accepted_q, "p": accepted_p, "r": 0.001, "beta": 0.5},
            {"q": rejected_q, "p": rejected_p, "r": 0.99, "beta": 0.5},
        ]
        return {"drafts": drafts, "accepted_count": 1, "correction": {"kind": "resample", "residual_top": []}}

    shown = lesson_charts.sampled_lessons(iteration(0.6, 0.3, 0.9, 0.4))
    assert shown["accepted_by_r"] and shown["rejected_by_r"] and shown["legible"]
    for faint in (iteration(0.6, 0.3, 0.0009, 0.0004), iteration(0.6, 0.004, 0.9, 0.4)):
        shown = lesson_charts.sampled_lessons(faint)
        assert shown["accepted_by_r"] and shown["rejected_by_r"] and not shown["legible"]


def test_the_examples_checked_drafts_show_their_numbers():
    from specviz.teaching.charts.lesson import LEGIBLE_PROB

    shown = taught()
    for draft in shown["accepted"] + [shown["rejected"]]:
        assert min(draft["p"], draft["q"]) >= LEGIBLE_PROB, draft


def test_every_checked_draft_of_the_example_drew_an_r():
    """Greedy decoding has no r ("r = none (greedy)" on step 5): a sampled example draws one for
    every draft it checks."""
    shown = taught()
    for draft in shown["accepted"] + [shown["rejected"]]:
        assert draft["r"] is not None and 0 <= draft["r"] < 1, draft


def test_the_example_accepts_a_draft_the_target_likes_less():
    """An accepted draft with 0 < p/q < 1: accepted only because its r fell under p/q."""
    below = [d for d in taught()["accepted"] if 0 < d["p"] / d["q"] < 1]
    assert below, [(d["token"], d["q"], d["p"]) for d in taught()["accepted"]]
    assert all(d["r"] < d["p"] / d["q"] and d["accept_prob"] == pytest.approx(d["p"] / d["q"]) for d in below)


def test_the_example_rejects_a_draft_by_its_r():
    """The rejection: p/q strictly between 0 and 1 and a drawn r at or above it."""
    rejected = taught()["rejected"]
    ratio = rejected["p"] / rejected["q"]
    assert not rejected["accepted"] and 0 < ratio < 1 and rejected["r"] >= ratio, rejected


def test_the_examples_residual_spreads_over_several_tokens_with_both_routes_visible():
    """Step 6's residual: at least three tokens of visible mass; step 8's two routes (accepted
    directly: β; via the residual: 1 − β) both visible, on the chart the step draws."""
    from specviz.teaching.charts import lesson as lesson_charts

    shown = taught()
    residual = [prob for _, prob in shown["correction"]["residual_top"]]
    assert sum(prob >= lesson_charts.VISIBLE_MASS for prob in residual) >= 3, residual
    assert shown["correction"]["token_id"] in [t for t, _ in shown["correction"]["residual_top"]]
    beta = shown["rejected"]["beta"]
    assert 0.05 <= beta <= 0.95, beta
    fig = lesson.shown_for("unchanged", REC).figure
    routes = {t.name: sum(t.y) for t in fig.data if t.type == "bar"}
    assert len(routes) == 2 and all(total >= 0.05 for total in routes.values()), routes


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_steps_3_to_8_never_say_r_is_none(language):
    """Every note and figure word of the iteration steps: no "r = none (greedy)" in either language."""
    from specviz.teaching.charts.words import words

    greedy = [words(language)["r_greedy"], words("en")["r_greedy"], "greedy", "贪心"]
    for kind in ("draft", "verify", "decide", "resample", "bonus", "unchanged"):
        shown = lesson.shown_for(kind, REC, language)
        texts = [text for _, text in shown.notes] + (chart_words(shown.figure) if shown.figure else [])
        for text in texts:
            assert not any(g in text for g in greedy), (kind, text)
    decide = " ".join(text for _, text in lesson.shown_for("decide", REC, language).notes)
    assert decide.count("r = ") == len(taught()["accepted"]) + 1 and "r = 0." in decide, decide


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_the_decide_step_describes_the_examples_own_decisions(language):
    """Step 5's text says the first draft was accepted with p/q below 1 and the second rejected."""
    body = step_of(language, "decide")["body"]
    assert ("first draft" in body and "second draft" in body) or ("第一个草稿" in body and "第二个草稿" in body)
    first, second = taught()["it"]["drafts"][:2]
    assert first["accepted"] and first["r"] is not None and 0 < first["p"] / first["q"] < 1, first
    assert not second["accepted"] and second["r"] >= second["p"] / second["q"] > 0, second


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
    from specviz.teaching.charts import theory as theory_charts
    from specviz.teaching.charts import timeline_figure

    assert timeline_figure(REC.trace, REC.baseline).layout.title.text == "Timeline: where the time goes"
    fig = theory_charts.walltime_curve_figure(0.8, 0.05, 4)
    assert fig.layout.yaxis.title.text == "× target alone"


def test_the_token_legend_follows_the_lesson_language():
    from specviz.teaching.charts.stream import MAIN_STATUSES, legend_html
    from specviz.teaching.charts.style import STATUS_LABELS

    english, chinese = legend_html(), legend_html(lang="zh")
    assert all(STATUS_LABELS[s] in english for s in MAIN_STATUSES)
    assert not any(STATUS_LABELS[s] in chinese for s in MAIN_STATUSES)
    assert "被拒绝的草稿" in chinese and 'class="sv-key sv-rejected">rejected<' in english
    # The colour chips too (issue 35: the Chinese lesson's chips said "accepted", "rejected", ...).
    chips = re.findall(r'class="sv-key sv-\w+">([^<]*)<', chinese)
    assert len(chips) == len(MAIN_STATUSES) and all(CJK.search(c) and not english_words(c) for c in chips), chips


# ----- the lesson at projector size (issue 24, item 5) ---------------------------------------------


def every_text(language: str) -> list[tuple[str, str]]:
    """(where, markdown) for every text the lesson page prints in `language`."""
    out = []
    for step in lesson.load_lesson(language)["steps"]:
        out += [(f"{step['id']} body", step["body"]), (f"{step['id']} takeaway", step.get("takeaway", ""))]
        out += [(f"{step['id']} note", text) for _, text in lesson.shown_for(step["figure"], REC, language).notes]
    return out


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_every_bold_span_renders_as_bold(language):
    """Chinese step 10 showed literal ** : CommonMark does not close `**` after `）` when a letter
    follows (`**草稿（Drafters）**页面`). Rendered by a CommonMark parser, no text keeps an asterisk pair."""
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark")
    for where, text in every_text(language):
        html = md.render(text)
        assert "**" not in html, (where, html)
        assert html.count("<strong>") == text.count("**") // 2, (where, html)


def test_safe_bold_only_touches_delimiters_that_would_not_count():
    assert lesson.safe_bold("**草稿（Drafters）**页面") == "**草稿（Drafters）\u2060**页面"
    assert lesson.safe_bold("的**（括号）**") == "的**\u2060（括号）**"  # ends the text: closes as it is
    unchanged = ["a **b** c", "**1.41×**（更快）", "**p(x)**.", "odd ** count", "**␣is**: q"]
    assert [lesson.safe_bold(t) for t in unchanged] == unchanged


def step_of(language: str, step_id: str) -> dict:
    """The step as the page shows it: its words with the example's numbers put in."""
    step = next(s for s in lesson.load_lesson(language)["steps"] if s["id"] == step_id)
    return lesson.with_numbers(step, REC, language)


@pytest.mark.parametrize(
    ("language", "step_id", "pattern", "truth"),
    [
        ("en", "idea", r"here (\d+) tokens take", lambda: lesson.race_numbers(REC.trace, REC.baseline)["tokens"]),
        ("zh", "idea", r"生成 (\d+) 个 token 的用时", lambda: lesson.race_numbers(REC.trace, REC.baseline)["tokens"]),
        ("en", "idea", r"temperature ([\d.]+)", lambda: REC.trace.config["temperature"]),
        ("zh", "idea", r"温度 ([\d.]+)", lambda: REC.trace.config["temperature"]),
        ("en", "idea", r"γ \+ 1 = (\d+) steps it replaces", lambda: REC.trace.config["gamma"] + 1),
        ("zh", "idea", r"（这里 γ = (\d+)）", lambda: REC.trace.config["gamma"]),
        ("en", "not", r"asked for γ = (\d+) guesses", lambda: REC.contrast.config["gamma"]),
        ("zh", "not", r"γ = (\d+)）", lambda: REC.contrast.config["gamma"]),
        ("en", "pays", r"α ≈ ([\d.]+)", lambda: lesson.GOOD_DRAFT[0]),
        ("zh", "pays", r"α ≈ ([\d.]+)", lambda: lesson.GOOD_DRAFT[0]),
        ("en", "pays", r"c ≈ ([\d.]+)", lambda: lesson.GOOD_DRAFT[1]),
        ("zh", "pays", r"c ≈ ([\d.]+)", lambda: lesson.GOOD_DRAFT[1]),
        ("en", "pays", r"about (\d+)× at the best γ", lambda: round(best_speedup(*lesson.GOOD_DRAFT))),
        ("zh", "pays", r"大约能快 (\d+) 倍", lambda: round(best_speedup(*lesson.GOOD_DRAFT))),
    ],
)
def test_numbers_in_the_text_are_the_examples_own(language, step_id, pattern, truth):
    """The lesson text names numbers of its recordings and curves; each must be the number shown."""
    step = step_of(language, step_id)
    found = re.search(pattern, step["body"] + " " + step.get("takeaway", ""))
    assert found, (language, step_id, pattern)
    assert float(found.group(1)) == pytest.approx(truth()), (language, step_id, found.group(0))


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_every_placeholder_names_a_number_of_the_example_and_none_is_left(language):
    """A step's {name} is filled from the recording (lesson.step_numbers), never printed as it is."""
    for raw in lesson.load_lesson(language)["steps"]:
        names = set(re.findall(r"\{(\w+)\}", raw["body"] + raw.get("takeaway", "")))
        assert names <= set(lesson.STEP_NUMBERS), (raw["id"], names)
        shown = lesson.with_numbers(raw, REC, language)
        assert not re.search(r"\{\w+\}", shown["body"] + shown.get("takeaway", "")), raw["id"]
        assert "–" not in shown["body"] + shown.get("takeaway", ""), raw["id"]  # the recordings give every one


def test_a_copy_without_the_target_alone_recording_still_reads_as_sentences():
    """No baseline: no race and no step to measure a pass in; the words say what the timeline shows."""
    import dataclasses

    alone = dataclasses.replace(REC, baseline=None)
    numbers = lesson.step_numbers(alone, "en")
    assert numbers["pass_steps"] == "–" and numbers["race"] == lesson.notes_text("en")["race_unknown"]
    raw = next(s for s in lesson.load_lesson("en")["steps"] if s["id"] == "idea")
    takeaway = lesson.with_numbers(raw, alone, "en")["takeaway"]
    assert takeaway.endswith("take the time the timeline shows.")


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_a_recording_that_lost_its_race_is_said_to_take_longer(monkeypatch, language):
    """Step 2's takeaway says how the race ended, from the recording: never "less time" beside a loss."""
    won = step_of(language, "idea")["takeaway"]
    real = lesson.race_numbers
    monkeypatch.setattr(lesson, "race_numbers", lambda *a: {**real(*a), "speedup": 0.9})
    lost = step_of(language, "idea")["takeaway"]
    notes = lesson.notes_text(language)
    tokens = real(REC.trace, REC.baseline)["tokens"]
    assert notes["race_less"].format(tokens=tokens) in won and notes["race_more"].format(tokens=tokens) in lost


def best_speedup(alpha: float, c: float) -> float:
    from specviz.labs import theory

    return theory.walltime_improvement(alpha, theory.best_gamma(alpha, c, 16), c)


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_step_9_marks_the_examples_gamma_not_a_fixed_one(language):
    """Step 9 said "your γ = 4" while the example used γ = 3 (config.DEFAULT_GAMMA)."""
    from specviz.config import DEFAULT_GAMMA

    fig = lesson.shown_for("pays", REC, language).figure
    gamma = REC.trace.config["gamma"]
    assert gamma == DEFAULT_GAMMA == lesson.example_gamma(REC.trace)
    marked = [t for t in fig.data if t.marker.symbol == "circle-open"]
    assert len(marked) == 1 and list(marked[0].x) == [gamma], [(t.name, t.x) for t in fig.data]
    assert f"γ = {gamma}" in marked[0].name and "your" not in marked[0].name and "你的" not in marked[0].name


def luminance(color: str) -> float:
    rgb = [int(color.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_presenter_figures_use_large_dark_type(language):
    """Presenter view: every figure's text is at least 20 px in dark ink, and a y-axis title is
    wrapped short enough to stay beside the plot, clear of the chart's title."""
    from specviz.teaching.charts import lesson as lesson_charts

    for step in lesson.load_lesson(language)["steps"]:
        fig = lesson.shown_for(step["figure"], REC, language, projector=True).figure
        layout = fig.layout
        assert layout.height == lesson.PROJECTOR_FIGURE_PX
        fonts = [layout.font, layout.title.font, layout.legend.font, layout.xaxis.tickfont, layout.yaxis.tickfont]
        fonts += [layout.xaxis.title.font, layout.yaxis.title.font] + [a.font for a in layout.annotations]
        for font in fonts:
            assert font.size >= 20, (step["id"], font)
            assert luminance(font.color) <= 0.1, (step["id"], font)
        for line in (layout.yaxis.title.text or "").split("<br>"):
            assert lesson_charts.text_px(line, 20) <= 0.4 * layout.height, (step["id"], line)


def test_the_reading_view_keeps_its_figures_as_they_were():
    fig = lesson.shown_for("pays", REC, "en").figure
    assert fig.layout.height == 400 and "<br>" not in fig.layout.yaxis.title.text


# ----- the second half (issue 38, item 4): numbers from the recordings the pages open on ------------


def note_numbers(kind: str, language: str = "en") -> list[float]:
    """The bold numbers of a step's notes, in order."""
    text = " ".join(t for _, t in lesson.shown_for(kind, REC, language).notes)
    return [float(x) for x in re.findall(r"\*\*(\d+(?:\.\d+)?)×?\*\*", text)]


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_the_second_half_follows_the_first_with_the_same_steps_in_both_languages(language):
    steps = lesson.load_lesson(language)["steps"]
    assert [s["id"] for s in steps[-4:]] == ["layers", "task", "system", "family"]
    assert [s["id"] for s in steps] == [s["id"] for s in lesson.load_lesson("en")["steps"]]
    assert set(lesson.load_lesson(language)["notes"]) == set(lesson.load_lesson("en")["notes"])


def test_the_layers_step_quotes_the_kv_cache_comparison():
    """No cache, cache, cache + speculative: each speedup recomputed from the recorded wall times."""
    import json
    import statistics

    from specviz.labs import kv_cache

    data = json.loads(kv_cache.ASSET.read_text(encoding="utf-8"))
    per_token = {r["mode"]: statistics.median(r["wall_ms"]) / len(r["tokens"]) for r in data["runs"]}
    cache, spec, total = note_numbers("layers")
    assert cache == pytest.approx(per_token["no_cache"] / per_token["kv_cache"], abs=0.06)
    assert spec == pytest.approx(per_token["kv_cache"] / per_token["speculative"], abs=0.006)
    assert total == pytest.approx(per_token["no_cache"] / per_token["speculative"], abs=0.06)


def test_the_task_step_quotes_the_workloads_recording():
    """The hybrid's best and worst kind of task and the weak draft's kinds below 1×, from the JSON."""
    import json

    from specviz.engine.models import TRAINED_DRAFT
    from specviz.labs import workloads

    cells = json.loads(workloads.RECORDING.read_text(encoding="utf-8"))["cells"]
    hybrid = {c["kind"]: c["speedup"] for c in cells if c["draft"] == "hybrid"}
    weak = [c["speedup"] for c in cells if c["draft"] == TRAINED_DRAFT]
    best, worst = note_numbers("task")
    assert best == pytest.approx(max(hybrid.values()), abs=0.006) and best > 1
    assert worst == pytest.approx(min(hybrid.values()), abs=0.006)
    text = lesson.shown_for("task", REC).notes[0][1]
    assert f"on {max(hybrid, key=hybrid.get)} but" in text and f"on {min(hybrid, key=hybrid.get)};" in text
    assert f"below 1× on {sum(s < 1 for s in weak)} of {len(weak)} kinds" in text


def test_the_system_step_counts_what_each_iteration_kept_and_threw_away():
    """Kept: accepted drafts and the target's token; thrown away: every other draft made."""
    its = REC.trace.iterations
    kept = [it["accepted_count"] + (it["correction"] is not None) for it in its]
    assert sum(kept) == REC.trace.summary["new_tokens"]
    thrown = sum(len(it["drafts"]) - it["accepted_count"] for it in its)
    text = lesson.shown_for("system", REC).notes[0][1]
    assert f"{len(its)} iterations, each writing {min(kept)} to {max(kept)} tokens" in text, text
    assert f"{thrown} of its {sum(len(it['drafts']) for it in its)} drafts were thrown away" in text, text
    fig = lesson.shown_for("system", REC).figure
    assert [list(t.y) for t in fig.data] == [kept, [len(it["drafts"]) - it["accepted_count"] for it in its]]


def test_the_family_step_quotes_the_race_and_leaves_the_target_drafting_for_itself_out():
    import json

    from specviz.labs import race
    from specviz.teaching.charts import lesson as lesson_charts

    left_out = {"self", "staged", "hybrid-suffix"}  # family_figure's docstring says why
    assert not left_out & set(lesson_charts.DRAFTER_WORDS)
    rows = [r for r in json.loads(race.RECORDING.read_text(encoding="utf-8"))["rows"] if r["draft"] not in left_out]
    per_pass = [r["tokens_per_iteration"] for r in rows]
    high, low, speedup = note_numbers("family")
    assert high == pytest.approx(max(per_pass), abs=0.006) and low == pytest.approx(min(per_pass), abs=0.006)
    assert speedup == pytest.approx(max(rows, key=lambda r: r["tokens_per_iteration"])["speedup"], abs=0.006)
    bars = lesson.shown_for("family", REC).figure.data[0]
    assert list(bars.y) == per_pass and len(bars.x) == len(rows)


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_the_second_half_links_to_pages_the_app_has(language):
    """Each difficulty links to the page that measures it, by the page's url path (its file's name)."""
    from specviz_app.render import PAGES_DIR

    pages = {p.stem for p in PAGES_DIR.glob("*.py")}
    links = {}
    for kind in ("task", "system", "family"):
        for _, text in lesson.shown_for(kind, REC, language).notes:
            links.update(dict.fromkeys(re.findall(r"\]\(([^)]+)\)", text), kind))
    assert {"drafts", "workloads", "inspector", "timeline", "serving"} <= set(links), links
    assert set(links) <= pages, sorted(set(links) - pages)


def test_the_system_step_quotes_the_serving_recording():
    """Difficulty 4 measured: speculation's gain at the smallest and largest B, and where it stops paying."""
    import json

    from specviz.labs import serving

    cells = json.loads(serving.RECORDING.read_text(encoding="utf-8"))["cells"]
    speed = {(c["batch"], c["mode"]): c["tokens_per_s"] for c in cells}
    batches = sorted({b for b, _ in speed})
    gain = {b: speed[b, "speculative"] / speed[b, "target"] for b in batches}
    first, last = note_numbers("system")
    assert first == pytest.approx(gain[batches[0]], abs=0.006) and last == pytest.approx(gain[batches[-1]], abs=0.006)
    text = " ".join(t for _, t in lesson.shown_for("system", REC).notes)
    stops = [b for b in batches if gain[b] <= 1]
    text = text.replace("\u00a0", " ")  # B = 4 is kept on one line
    assert (f"from B = {stops[0]} on it no longer paid" if stops else "it paid at every B measured") in text, text


@pytest.mark.parametrize("language", list(lesson.LANGUAGES))
def test_the_layers_figure_fits_beside_the_takeaway(language):
    """The comparison's bars named short (the step's text explains each) and labelled with how many
    times faster than no cache, recomputed from the recording."""
    from specviz.labs import kv_cache

    comparison = kv_cache.load_comparison()
    bars = lesson.shown_for("layers", REC, language, projector=True).figure.data[0]
    assert all(":" not in name and "：" not in name for name in bars.y), bars.y
    no_cache = comparison.run("no_cache").ms_per_token
    assert list(bars.text) == [f"{no_cache / run.ms_per_token:.1f}×" for run in comparison.runs]
    assert bars.text[0] == "1.0×" and float(bars.text[-1][:-1]) > float(bars.text[1][:-1]) > 1


def test_the_family_step_says_what_specviz_runs():
    """Step 14 says specviz runs the staged draft and offers suffix trees in the hybrid: both are in
    the race's drafters; its chart leaves the staged draft out, as the text says."""
    from specviz.labs import race
    from specviz.teaching.charts import lesson as lesson_charts

    assert {"staged", "hybrid-suffix"} <= set(race.OFFLINE_DRAFTS)
    for language in lesson.LANGUAGES:
        body = step_of(language, "family")["body"]
        assert "**staged**" in body and "SuffixDecoding" in body and "Spector & Ré" in body, language
    recorded = dict(race.shipped(), rows=[{"draft": "staged", "tokens_per_iteration": 2.0}])
    assert lesson_charts.family_figure(recorded).data[0].x == ()  # a staged row drawn nowhere


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_serving_figures_the_lesson_quotes_are_the_recordings(language):
    """Step 13 quotes the Serving page's recording: its gains at the smallest and largest B and where it
    stopped paying must be that recording's, in both languages, whichever recording ships (issue 59)."""
    import re

    from specviz.labs import serving

    result = serving.shipped()
    gains = {b: g for b in result.batches() if (g := result.gain(b)) is not None}
    first, last, cross = min(gains), max(gains), result.crossover()
    text = " ".join(t for _, t in lesson.shown_for("system", REC, language).notes).replace("\xa0", " ")
    quoted = [float(x) for x in re.findall(r"\*\*(\d+\.\d\d)×\*\*", text)]
    assert quoted == [round(gains[first], 2), round(gains[last], 2)], (quoted, gains)
    assert f"B = {first}" in text and f"B = {last}" in text
    if cross is not None:
        assert f"B = {cross}" in text
