"""The Timeline's chart is the run's own pair, its first: the caption under it says whether that pair
is among the pairs the speedup beside it comes from, from the same reading as those numbers, and why
not when it is not (issue 35): decoded together with other sessions' runs only when the pair itself
is marked batched, not whenever it is missing from the figures."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from test_speedup import APP, example, pair

from specviz.traces import speedup
from specviz_app import keys
from specviz_app.session import Loaded


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def chart_caption(first: dict, others: list[dict]) -> str:
    trace, base = example()
    trace.extra["timing"] = {"pairs": [first, *others], "wanted": max(len(others), 1)}
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.session_state[keys.LOADED] = Loaded(trace, base, "run here", None)
    at.switch_page("app_pages/timeline.py").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption if "The chart shows" in c.value]
    assert len(captions) == 1, [c.value for c in at.caption]
    return captions[0]


def test_a_first_pair_that_counts_is_the_first_of_the_pairs():
    caption = chart_caption(pair(50.0, 100.0), [pair(80.0, 100.0), pair(100.0, 100.0)])
    assert "The chart shows the first of the 3 timed pairs" in caption


def test_a_batched_first_pair_was_decoded_with_other_sessions():
    first = dict(pair(50.0, 100.0), batched=True)
    caption = chart_caption(first, [pair(80.0, 100.0), pair(100.0, 100.0)])
    assert "decoded together with other sessions' runs, so it is none of the 2 pairs" in caption


def test_a_disturbed_first_pair_is_left_out_for_what_it_was_not_as_batched():
    """A solo first pair that met a page drawn while it ran (disturbed, not kept) is left out of the
    figures while other pairs count: the caption says so, and never that it was batched."""
    first = dict(pair(50.0, 100.0), disturbed=True)
    others = [pair(80.0, 100.0), pair(100.0, 100.0)]
    assert first not in speedup.figure_pairs([first, *others])
    caption = chart_caption(first, others)
    assert "a page was drawn in the same process" in caption and "none of the 2 pairs" in caption
    assert "other sessions" not in caption


def test_a_disturbed_first_pair_counts_when_no_pair_does():
    """The figures fall back on every solo pair when none counts: the chart's pair is then one of them."""
    first = dict(pair(50.0, 100.0), disturbed=True)
    caption = chart_caption(first, [dict(pair(80.0, 100.0), disturbed=True)])
    assert "The chart shows the first of the 2 timed pairs" in caption
