"""Chart builders from hand-made traces: pure functions, no torch and no streamlit needed."""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import pytest

from specviz.teaching import charts, glossary
from specviz.teaching.charts.style import STATUS_COLORS
from specviz.traces.trace import Trace

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

ROOT = Path(__file__).resolve().parent.parent
EVIL = "<script>alert(1)</script>"


def _draft(pos, tid, token, q, p, r, accepted, beta):
    return {
        "position": pos,
        "token_id": tid,
        "token": token,
        "q": q,
        "p": p,
        "accept_prob": min(1.0, p / q),
        "r": r,
        "accepted": accepted,
        "q_top": [[tid, q], [99, 1 - q]],
        "p_top": [[tid, p], [98, 1 - p]] if p < 1 else [[tid, 1.0]],
        "beta": beta,
    }


def make_trace(*, evil: bool = False) -> Trace:
    """Three iterations at gamma 3, sampled: (accept, accept, reject, discard-free) + resample;
    all accepted + bonus; reject first, two discarded + resample."""
    tok = EVIL if evil else " fox"
    its = [
        {
            "drafts": [
                _draft(0, 10, " The", 0.5, 0.6, 0.2, True, 0.8),
                _draft(1, 11, tok, 0.8, 0.4, 0.1, True, 0.6),
                _draft(2, 12, "\n", 0.9, 0.3, 0.9, False, 0.4),
            ],
            "accepted_count": 2,
            "correction": {
                "kind": "resample",
                "position": 2,
                "token_id": 13,
                "token": " jumps",
                "p": 0.7,
                "residual_top": [[13, 0.7], [14, 0.3]],
                "p_top": [[13, 0.5], [12, 0.3]],
            },
        },
        {
            "drafts": [
                _draft(3, 20, " over", 0.5, 0.5, 0.3, True, 0.9),
                _draft(4, 21, " the", 0.5, 0.9, 0.6, True, 0.7),
                _draft(5, 22, " lazy", 0.4, 0.4, 0.5, True, 0.5),
            ],
            "accepted_count": 3,
            "correction": {
                "kind": "bonus",
                "position": 6,
                "token_id": 23,
                "token": " dog",
                "p": 0.8,
                "residual_top": None,
                "p_top": [[23, 0.8], [24, 0.1]],
            },
        },
        {
            "drafts": [
                _draft(7, 30, ".", 0.9, 0.1, 0.5, False, 0.2),
                _draft(7, 31, " And", 0.5, 0.1, 0.9, False, 0.3),
                _draft(7, 32, " then", 0.5, 0.1, 0.9, False, 0.3),
            ],
            "accepted_count": 0,
            "correction": {
                "kind": "resample",
                "position": 7,
                "token_id": 33,
                "token": "!",
                "p": 0.9,
                "residual_top": [[33, 0.9]],
                "p_top": [[33, 0.8]],
            },
        },
    ]
    for i, it in enumerate(its):
        it.update(index=i, start_ms=i * 100.0, draft_ms=10.0, verify_ms=80.0)
        for j, d in enumerate(it["drafts"]):
            d["position"] = [0, 3, 7][i] + j
    output = [10, 11, 13, 20, 21, 22, 23, 33]
    reached = [0.8, 0.6, 0.4, 0.9, 0.7, 0.5, 0.2]
    data = {
        "schema": "specviz.trace/1",
        "mode": "speculative",
        "config": {
            "target": "offline:smollm2-135m-instruct",
            "draft": "ngram",
            "gamma": 3,
            "temperature": 1.0,
            "top_k": None,
            "top_p": None,
            "seed": 0,
            "max_new_tokens": 8,
            "device": "cpu",
            "dtype": "float32",
        },
        "prompt": EVIL if evil else "Say something.",
        "prompt_token_ids": [1, 2, 3],
        "output_token_ids": output,
        "output_text": "".join(["x"] * len(output)),
        "stop_reason": "max_new_tokens",
        "iterations": its,
        "summary": {
            "iterations": 3,
            "target_calls": 3,
            "drafted": 9,
            "accepted": 5,
            "new_tokens": 8,
            "acceptance_rate": 5 / 9,
            "mean_accepted_length": 8 / 3,
            "alpha": sum(reached) / len(reached),
            "wall_ms": 300.0,
            "tokens_per_s": 8 / 0.3,
            "draft_ms": 30.0,
            "verify_ms": 240.0,
        },
        "extra": {"token_text": {"98": EVIL, "99": " cat", "14": " runs", "24": " cat", "12": "\n"}},
    }
    return Trace.from_dict(data)  # validates: the hand-made trace obeys every invariant


def make_baseline() -> Trace:
    its = []
    for i in range(8):
        its.append(
            {
                "index": i,
                "start_ms": i * 80.0,
                "draft_ms": 0.0,
                "verify_ms": 75.0,
                "accepted_count": 0,
                "drafts": [],
                "correction": {
                    "kind": "target",
                    "position": i,
                    "token_id": 40 + i,
                    "token": f"t{i}",
                    "p": 0.5,
                    "residual_top": None,
                    "p_top": [[40 + i, 0.5]],
                },
            }
        )
    data = json.loads(make_trace().to_json())
    data.update(
        mode="autoregressive",
        iterations=its,
        output_token_ids=[40 + i for i in range(8)],
        summary={
            "iterations": 8,
            "target_calls": 8,
            "drafted": 0,
            "accepted": 0,
            "new_tokens": 8,
            "acceptance_rate": None,
            "mean_accepted_length": 1.0,
            "alpha": None,
            "wall_ms": 640.0,
            "tokens_per_s": 12.5,
            "draft_ms": 0.0,
            "verify_ms": 600.0,
        },
    )
    data["config"].update(draft=None, gamma=0)
    return Trace.from_dict(data)


def _all_figures(trace: Trace, baseline: Trace | None = None) -> list[go.Figure]:
    it0, it1 = trace.iterations[0], trace.iterations[1]
    return [
        charts.timeline_figure(trace, baseline),
        charts.acceptance_by_position_figure(trace),
        charts.accept_length_figure(trace),
        charts.beta_along_text_figure(trace),
        charts.draft_figure(it0["drafts"][0], "accepted", trace.extra, 1),
        charts.residual_figure(it0["drafts"][2], it0["correction"], trace.extra),
        charts.bonus_figure(it1["correction"], trace.extra),
    ]


def test_every_chart_has_title_axis_titles_and_legend():
    for fig in _all_figures(make_trace(), make_baseline()):
        layout = fig.layout
        assert layout.title.text, fig
        assert layout.xaxis.title.text, layout.title.text
        if layout.title.text.startswith("Timeline"):
            continue  # the rows are named on the axis itself
        assert layout.yaxis.title.text, layout.title.text
        assert any(t.name for t in fig.data), layout.title.text


def test_axis_titles_carry_units():
    timeline = charts.timeline_figure(make_trace(), make_baseline())
    assert "(ms)" in timeline.layout.xaxis.title.text
    for fig in _all_figures(make_trace())[1:]:
        y = fig.layout.yaxis.title.text
        assert "probability" in y or "fraction" in y, y


def test_one_plotly_trace_per_status_not_per_token():
    trace = make_trace()
    fig = charts.beta_along_text_figure(trace)
    scatter = [t for t in fig.data if t.type == "scatter" and t.mode == "markers"]  # the α line is a legend entry
    assert [t.name for t in scatter] == ["accepted draft", "rejected draft"]
    assert len(scatter[0].x) == 5 and len(scatter[1].x) == 2  # discarded drafts were never reached
    assert scatter[0].marker.color == STATUS_COLORS["accepted"]
    timeline = charts.timeline_figure(trace, make_baseline())
    assert len(timeline.data) == 3  # draft, verify, baseline step: one trace per phase kind
    assert len(timeline.data[1].x) == 3 and len(timeline.data[2].x) == 8


def test_token_statuses():
    rows = charts.token_rows(make_trace())
    statuses = [r["status"] for r in rows]
    assert statuses == [
        "accepted",
        "accepted",
        "rejected",
        "resampled",
        "accepted",
        "accepted",
        "accepted",
        "bonus",
        "rejected",
        "discarded",
        "discarded",
        "resampled",
    ]


def test_acceptance_tables_match_the_trace():
    trace = make_trace()
    by_pos = charts.position_table(trace)
    assert [r["reached"] for r in by_pos] == [3, 2, 2]
    assert [r["accepted"] for r in by_pos] == [2, 2, 1]
    assert by_pos[0][glossary.ACCEPTANCE_AT_POSITION.label] == pytest.approx(2 / 3)
    lengths = charts.length_table(trace)
    assert [r["iterations"] for r in lengths] == [1, 0, 1, 1]  # 1 token, 3 tokens, 4 tokens
    assert sum(r["predicted fraction"] for r in lengths) == pytest.approx(1.0)


def test_residual_bars_are_normalised_times_one_minus_beta():
    trace = make_trace()
    it = trace.iterations[0]
    fig = charts.residual_figure(it["drafts"][2], it["correction"], trace.extra)
    raw, normalised = fig.data[0].y, fig.data[1].y
    assert normalised[0] == pytest.approx(0.7)
    assert raw[0] == pytest.approx(0.7 * (1 - 0.4))
    assert sum(raw) == pytest.approx(0.6)
    assert fig.data[1].x[0] == "␣jumps"  # the resampled token first, leading space made visible


def test_draft_figure_has_other_bucket_and_sums_to_one():
    trace = make_trace()
    d = trace.iterations[0]["drafts"][0]
    fig = charts.draft_figure(d, "accepted", trace.extra, 1)
    q = next(t for t in fig.data if t.name == "q (draft)")
    p = next(t for t in fig.data if t.name == "p (target)")
    assert q.x[-1] == "other"
    assert sum(q.y) == pytest.approx(1.0) and sum(p.y) == pytest.approx(1.0)


def test_hover_text_is_escaped():
    trace = make_trace(evil=True)
    texts = []
    for fig in _all_figures(trace):
        for t in fig.data:
            texts += list(t.hovertext or []) + [str(x) for x in (t.x or [])]
    joined = " ".join(texts)
    assert "&lt;script&gt;" in joined
    assert "<script>" not in " ".join(t for t in texts if "<br>" in t)  # hover cards are HTML: escaped


def test_charts_handle_a_target_only_trace():
    base = make_baseline()
    for fig in (
        charts.timeline_figure(base, base),
        charts.acceptance_by_position_figure(base),
        charts.accept_length_figure(base),
        charts.beta_along_text_figure(base),
    ):
        assert fig.layout.title.text


def test_an_iteration_without_drafts_is_the_target_alone_not_a_bonus():
    it = {
        "index": 0,
        "accepted_count": 0,
        "drafts": [],
        "correction": {"kind": "bonus", "position": 0, "token_id": 5, "token": "Hi", "p": 0.4, "p_top": [[5, 0.4]]},
    }
    (row,) = charts.iteration_tokens(it)
    assert row["status"] == "target"
    assert "no draft" in charts.hover_card(row)


def test_timeline_races_over_the_tokens_both_runs_wrote():
    """A run that wrote more tokens is cut where the shorter one ended: never 48 tokens against 15."""
    import copy

    from specviz.teaching.charts.timeline import iterations_for, time_to_tokens_ms, tokens_in_common

    trace, baseline = make_trace(), make_baseline()
    short = copy.deepcopy(baseline)
    short.iterations = short.iterations[:2]
    short.output_token_ids = short.output_token_ids[:2]
    short.summary = {**short.summary, "new_tokens": 2, "iterations": 2}
    assert trace.summary["new_tokens"] > 2
    assert tokens_in_common(trace, short) == 2
    kept = iterations_for(trace, 2)
    assert sum(it["accepted_count"] + (it["correction"] is not None) for it in kept) >= 2
    assert len(kept) < len(trace.iterations)
    fig = charts.timeline_figure(trace, short)
    texts = [a.text for a in fig.layout.annotations]
    assert all("first 2 tokens" in t for t in texts), texts
    spec_bars = [t for t in fig.data if t.y and t.y[0] == "speculative"]
    assert all(len(t.x) == len(kept) for t in spec_bars)
    assert time_to_tokens_ms(short, 2) == short.summary["wall_ms"]  # all its tokens: the run's own wall time
    assert time_to_tokens_ms(trace, 2) == max(it["start_ms"] + it["draft_ms"] + it["verify_ms"] for it in kept)


def test_titles_sit_under_the_band_plotlys_toolbar_takes():
    """Plotly draws its toolbar across the top right of a figure under the pointer; in a half-width
    column it covered the title's end (issue 35). Every title starts below that band."""
    from specviz.teaching.charts.style import MODEBAR_BAND_PX

    for fig in _all_figures(make_trace(), make_baseline()):
        title, margin = fig.layout.title, fig.layout.margin
        assert title.yref == "container" and title.y == 1.0 and title.yanchor == "top", title.text
        assert title.pad.t >= MODEBAR_BAND_PX >= 24, title.text  # the toolbar's buttons are 24 px tall
        assert margin.t >= title.pad.t + 40, title.text  # and a line of title under the band


# The race's drafters by name (specviz.config.DRAFTERS); the chart names them from the catalogue.
NAMES = {"n-gram": "ngram", "draft head": "offline:specviz-head-smollm2", "hybrid": "hybrid"}


def _race(rows: list[tuple[str, list[float]]]) -> dict:
    return {
        "config": {"gamma": 3, "temperature": 0.0},
        "rows": [{"draft": NAMES.get(label, label), "acceptance_by_position": values} for label, values in rows],
    }


def test_race_lines_that_meet_stay_visible_and_say_so():
    """The head and the hybrid hold about equally deep: drawn alike, the hybrid hid the head (issue 35)."""
    from specviz.teaching.charts.race import race_position_figure

    fig = race_position_figure(
        _race([("n-gram", [0.13, 0.5, 0.0]), ("draft head", [0.57, 0.3, 0.0]), ("hybrid", [0.63, 0.3, 0.0])])
    )
    lines = list(fig.data)
    assert len({t.line.dash for t in lines}) == 3 and len({t.marker.symbol for t in lines}) == 3
    for j in range(3):  # at every position the points sit side by side, each near its own position
        xs = [t.x[j] for t in lines]
        assert len(set(xs)) == 3 and all(abs(x - (j + 1)) < 0.25 for x in xs)
    head = next(t for t in lines if t.name == "draft head")
    assert [c[0] for c in head.customdata] == [1, 2, 3]  # the hover names the position itself
    assert "customdata[0]" in head.hovertemplate
    assert head.customdata[0][1] == "" and head.customdata[1][1] == "<br>the same as hybrid"
    assert head.customdata[2][1] == "<br>the same as n-gram, hybrid"


def test_race_positions_no_draft_reached_are_gaps_and_equal_nothing():
    """A drafter whose drafts never reached a position has None there (specviz.labs.race): the figure
    draws a gap and names no other drafter as the same (the worked notebook's race has one)."""
    from specviz.teaching.charts.race import race_position_figure

    fig = race_position_figure(_race([("n-gram", [0.5, None, None]), ("draft head", [0.5, None, 0.2])]))
    ngram, head = fig.data
    assert ngram.y[1] is None and ngram.customdata[1][1] == ""
    assert head.customdata[2][1] == "" and ngram.customdata[0][1] == "<br>the same as draft head"


def test_the_race_chart_labels_no_line_a_bar_label_could_meet():
    """The "0.93×" of a bar just below 1× met the 1× line's own label (issue 59): the line's meaning is
    in the y-axis title, in both languages, and nothing is written on the line."""
    from specviz.labs.race import RECORDING
    from specviz.teaching.charts.race import race_speed_figure

    result = json.loads(RECORDING.read_text(encoding="utf-8"))
    for lang, said in (("en", "1× = no gain"), ("zh", "1×")):
        fig = race_speed_figure(result, lang)
        assert not fig.layout.annotations
        assert said in fig.layout.yaxis.title.text
