"""Token labels on every chart come from one home (specviz.teaching.charts.tokens): a token with no readable
text of its own is named readably, never as a raw <3929> (the lesson's step 6 residual bar showed one:
an id whose text the recording did not keep) nor as a bare "�" (a byte-level piece of a character)."""

from __future__ import annotations

import re

import pytest

from specviz.shipped import ASSETS
from specviz.teaching.charts import inspector
from specviz.teaching.charts.lesson import composition_figure
from specviz.teaching.charts.tokens import BYTE_PIECE, hover_card, label_token, token_rows, token_text
from specviz.traces.trace import Trace

RAW = re.compile(r"(<|&lt;)\d+(>|&gt;)")  # how an unknown id used to read, as text or HTML-escaped


def test_an_unrecorded_id_is_named_as_a_token_not_as_markup():
    assert token_text({"token_text": {"3929": " Well"}}, 3929) == " Well"
    unknown = token_text({"token_text": {}}, 3929)
    assert "3929" in unknown and not RAW.search(unknown) and "token" in unknown
    assert token_text({}, 7) != token_text({}, 8)  # two unknown ids stay two bars


@pytest.mark.parametrize(("text", "shown"), [("�", BYTE_PIECE), (" �", "␣" + BYTE_PIECE), ("a�", "a" + BYTE_PIECE)])
def test_a_piece_of_a_character_is_named_so(text, shown):
    assert label_token(text) == shown


def labels_of(fig) -> list[str]:
    return [str(x) for t in fig.data if t.x is not None for x in t.x if x is not None]


@pytest.mark.parametrize("name", ["lesson_trace.json", "lesson_contrast.json", "examples/02-sampled.json"])
def test_no_chart_or_hover_card_of_a_shipped_recording_shows_a_raw_id_or_a_bare_replacement_character(name):
    """Every token chart (the inspector's draft, residual and bonus bars, the lesson's two routes) and
    every hover card of the recordings the lesson and the gallery ship."""
    trace = Trace.from_json((ASSETS / name).read_bytes())
    extra = trace.extra
    shown: list[str] = []
    for it in trace.iterations:
        for slot, draft in enumerate(it["drafts"], 1):
            status = "accepted" if slot <= it["accepted_count"] else "rejected"
            shown += labels_of(inspector.draft_figure(draft, status, extra, slot))
            shown += labels_of(composition_figure(draft, extra))
        corr = it.get("correction")
        if corr and corr["kind"] == "resample" and corr.get("residual_top"):
            shown += labels_of(inspector.residual_figure(it["drafts"][it["accepted_count"]], corr, extra))
        elif corr:
            shown += labels_of(inspector.bonus_figure(corr, extra, no_draft=not it["drafts"]))
    shown += [hover_card(row, extra) for row in token_rows(trace)]
    assert shown
    assert not [s for s in shown if RAW.search(s) or "\ufffd" in s]


# The named entities Plotly turns back into characters (plotly.js convertEntities); any other, such as
# html.escape's &quot;, stays on the chart as typed: the lesson's steps 3 and 4 showed `!&quot;`.
PLOTLY_ENTITIES = {"&lt;", "&gt;", "&amp;", "&mu;", "&nbsp;", "&times;", "&plusmn;", "&deg;"}
ENTITY = re.compile(r"&[a-z]+;|&#x?[0-9a-f]+;", re.IGNORECASE)


def unknown_entities(texts: list[str]) -> set[str]:
    return {e for s in texts for e in ENTITY.findall(s) if e not in PLOTLY_ENTITIES}


def test_a_quote_in_a_token_reaches_the_chart_as_a_quote_and_markup_stays_text():
    draft = {
        "token": '!"',
        "token_id": 2,
        "q": 0.6,
        "p": 0.5,
        "position": 3,
        "q_top": [[2, 0.6], [7, 0.2], [9, 0.1]],
        "p_top": [[2, 0.5], [7, 0.3], [9, 0.1]],
    }
    extra = {"token_text": {"7": " it's", "9": "<b>"}}
    labels = labels_of(composition_figure(draft, extra))
    assert '!"' in labels and "␣it's" in labels and "&lt;b&gt;" in labels, labels
    assert not unknown_entities(labels), labels
    inspector_labels = labels_of(inspector.draft_figure(draft, "accepted", extra, 1))
    assert '!"' in inspector_labels and not unknown_entities(inspector_labels), inspector_labels
    card = hover_card(
        {**draft, "status": "accepted", "is_draft": True, "iteration": 0, "accept_prob": 1.0, "r": 0.2}, extra
    )
    assert '<b>!"</b>' in card and not unknown_entities([card]), card


@pytest.mark.parametrize("name", ["lesson_trace.json", "lesson_contrast.json", "examples/02-sampled.json"])
def test_no_chart_of_a_shipped_recording_shows_an_entity_plotly_does_not_read(name):
    trace = Trace.from_json((ASSETS / name).read_bytes())
    shown: list[str] = []
    for it in trace.iterations:
        for slot, draft in enumerate(it["drafts"], 1):
            shown += labels_of(inspector.draft_figure(draft, "accepted", trace.extra, slot))
            shown += labels_of(composition_figure(draft, trace.extra))
    shown += [hover_card(row, trace.extra) for row in token_rows(trace)]
    assert not unknown_entities(shown), unknown_entities(shown)
