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
