"""Bad links and the operator's routes, as a browser meets them (issue 48, E1, E5, E7): a name that is
no model id is refused and never echoed into a command, a link's target without pair=custom is
named, a language or a switch the app does not understand is named while what it understands is
applied, and /healthz answers JSON while an unknown path gets 404."""

from __future__ import annotations

import json

import pytest

from .helpers import main_text, sidebar_text, warnings

pytestmark = pytest.mark.browser


def test_a_path_as_a_model_name_is_refused_and_never_put_in_a_command(new_page):
    page = new_page({"pair": "custom", "target": "../../etc/passwd", "draft": "ngram"})
    said = " ".join(warnings(page))
    assert "'../../etc/passwd' is not a model name" in said and "owner/name" in said
    everything = main_text(page) + sidebar_text(page)
    assert "hf download ../../etc/passwd" not in everything and "download ../../etc" not in everything


def test_a_links_models_without_the_custom_pair_are_named_not_dropped(new_page):
    page = new_page({"pair": "offline", "target": "HuggingFaceTB/SmolLM2-360M-Instruct"})
    said = " ".join(warnings(page))
    assert "only apply with pair=custom" in said and "SmolLM2-360M-Instruct" in said


def test_a_language_and_a_switch_the_app_does_not_know_are_named_and_the_rest_applied(new_page):
    page = new_page({"lang": "fr"})
    assert any("lang=fr is not a language of this app" in w for w in warnings(page))
    assert page.locator('[data-testid="stSidebar"] h2').first.inner_text().strip() == "Run settings"  # English

    page = new_page({"presenter": "yes", "lang": "zh"}, path="lesson", wait=False)
    page.locator('[data-testid="stMain"] h1').first.wait_for()
    page.locator('[data-testid="stSidebar"]').wait_for(state="hidden")  # yes means on: the presenter view
    # and in Chinese: wait for the button, which the script run may draw after the heading
    page.locator('[data-testid="stMain"] button', has_text="下一步").first.wait_for()

    page = new_page({"presenter": "maybe"}, path="lesson")
    said = " ".join(warnings(page))
    assert "presenter=maybe is not understood" in said and "yes, true or on" in said


def test_the_health_route_answers_json_and_an_unknown_path_gets_404(new_page, app_url):
    page = new_page()
    health = page.request.get(f"{app_url}/healthz")
    assert health.status in (200, 503)
    body = json.loads(health.text())
    assert body["status"] in ("ok", "loading") and "default_models" in body and "lesson" in body["pages"]
    assert page.request.get(f"{app_url}/_stcore/health").status == 200
    missing = page.request.get(f"{app_url}/no-such-page")
    assert missing.status == 404 and "/lesson" in missing.text()


def test_a_chinese_lesson_link_is_answered_in_chinese(new_page):
    """Issue 59: the lesson's own link messages were English inside the Chinese page."""
    page = new_page({"step": "99", "lang": "zh"}, path="lesson")
    said = warnings(page)
    assert any("来自链接" in w and "显示第" in w for w in said), said
    assert not any(word in " ".join(said) for word in ("From the link", "showing step", "the lesson has")), said
    page = new_page({"step": "abc", "lang": "zh"}, path="lesson")
    said = warnings(page)
    assert any("不是步骤编号" in w for w in said) and not any("is not a step number" in w for w in said), said


def test_the_playground_has_its_own_path_too(new_page):
    """/healthz lists "playground"; /playground opened Streamlit's "Page not found" (issue 59)."""
    page = new_page({"max_new": "4", "baseline": "0"}, path="playground")
    assert "Page not found" not in main_text(page)
    assert page.locator('[data-testid="stMain"] h1').first.inner_text().startswith("Playground")
    assert page.locator('[data-testid="stSidebarNav"] a[aria-current="page"]').first.inner_text().endswith("Playground")
