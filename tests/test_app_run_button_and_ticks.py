"""As the app draws it: a Run under the prompt that does what the top one does,
and the learned-drafts chart's right axis with round ticks. (How each looks at 1280 and 1400 px was
checked in screenshots; these hold the behaviour behind it.)"""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest
from test_app import APP, goto, new_app, no_error, source_caption

from specviz_app import keys


def test_the_run_under_the_prompt_does_what_the_top_one_does():
    """Both buttons request one run: an empty prompt gets the same message from either, and the trace
    on show stays."""
    messages = []
    for button in (keys.RUN_BUTTON, keys.RUN_BUTTON_UNDER_PROMPT):
        at = new_app()
        before = source_caption(at)
        at.text_area(key=keys.setting("prompt")).set_value("   ")
        at.button(key=button).click().run()
        no_error(at)
        messages.append([e.value for e in at.error])
        assert source_caption(at) == before
    assert messages[0] == messages[1] and "The prompt is empty" in messages[0][0]
    at = new_app()
    sidebar = [b.key for b in at.sidebar.button]
    # the top one stays first (the browser tests find Run as the sidebar's first button named so)
    assert sidebar.index(keys.RUN_BUTTON) < sidebar.index(keys.RUN_BUTTON_UNDER_PROMPT)


def test_the_learned_drafts_speedup_axis_has_round_ticks():
    """Plotly syncs an overlaying axis's ticks to the left axis's grid by default: 1.491, 1.193, 0.895."""
    at = goto(AppTest.from_file(APP, default_timeout=60).run(), "app_pages/drafts.py")
    figures = [
        json.loads(c.proto.spec) for c in at.get("plotly_chart") if (c.key or "").startswith(keys.DRAFT_QUALITY_PREFIX)
    ]
    assert figures, "no training chart on the Drafters page"
    for fig in figures:
        assert fig["layout"]["yaxis2"]["tickmode"] == "auto"
