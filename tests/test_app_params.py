"""The app's settings and their URL form: validation, clamping and round trips (no streamlit)."""

from __future__ import annotations

import pytest

from specviz.engine import models
from specviz_app import params
from specviz_app.params import DEFAULTS, Settings


def test_defaults_round_trip_through_the_url():
    settings, messages = params.from_query(DEFAULTS.to_query())
    assert settings == DEFAULTS and messages == []


def test_a_full_link_restores_every_setting():
    s = Settings(
        pair="offline-self",
        gamma=7,
        temperature=0.65,
        top_k=40,
        top_p=0.9,
        max_new=20,
        seed=123,
        prompt="Hi <b>there</b> & more",
        baseline=False,
    )
    restored, messages = params.from_query(s.to_query())
    assert restored == s and messages == []


def test_out_of_range_values_are_clamped_with_a_message():
    settings, messages = params.from_query({"gamma": "99", "temperature": "-1", "max_new": "100000", "seed": "-3"})
    assert (settings.gamma, settings.temperature, settings.max_new, settings.seed) == (16, 0.0, 256, 0)
    assert len(messages) == 4
    assert any("γ: 99 is outside 1..16; using 16." in m for m in messages)


def test_garbage_values_are_refused_and_defaults_kept():
    query = {"gamma": "lots", "temperature": "nan", "top_k": "2.5", "pair": "gpt-9", "baseline": "maybe"}
    settings, messages = params.from_query(query)
    assert settings == DEFAULTS
    assert len(messages) == 5
    assert any("gpt-9" in m and "not one of" in m for m in messages)


def test_long_prompts_are_cut_and_lists_take_the_last_value():
    settings, messages = params.from_query({"prompt": "x" * 5000, "gamma": ["2", "3"]})
    assert len(settings.prompt) == params.PROMPT_MAX_CHARS and settings.gamma == 3
    assert messages == [f"prompt: longer than {params.PROMPT_MAX_CHARS} characters; cut to that length."]


def test_pairs_cover_offline_online_custom_ngram_and_self():
    pairs = params.pairs()
    assert pairs["offline"].target == models.OFFLINE_TARGET and pairs["offline"].draft is None
    assert pairs["offline-self"].draft == "self"
    drafts = {p.draft for p in pairs.values()} | {models.DEFAULT_DRAFT}
    assert "ngram" in drafts
    online = {(p.target, p.draft) for p in pairs.values() if p.online}
    assert online == set(models.HUB_PAIRS.values())
    assert "custom" in pairs


def test_run_key_ignores_the_baseline_switch_but_not_the_seed():
    assert Settings(baseline=False).run_key() == DEFAULTS.run_key()
    assert Settings(seed=1).run_key() != DEFAULTS.run_key()
    # "off" values mean the same run as None
    assert Settings(top_k=0, top_p=1.0).decode_options().top_k is None


def test_a_trace_config_maps_back_to_its_pair():
    cfg = {
        "target": models.OFFLINE_TARGET,
        "draft": "self",
        "gamma": 3,
        "temperature": 0.5,
        "top_k": None,
        "top_p": None,
        "seed": 4,
        "max_new_tokens": 30,
    }
    settings, messages = params.from_trace_config(cfg, "Hello", baseline=True)
    assert messages == [] and settings.pair == "offline-self" and settings.gamma == 3 and settings.seed == 4
    cfg["target"], cfg["draft"] = "someone/big", "someone/small"
    settings, _ = params.from_trace_config(cfg, "Hello", baseline=False)
    assert (settings.pair, settings.target, settings.draft) == ("custom", "someone/big", "someone/small")


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "a/b/c", "x y", "owner/..", "-x/y"])
@pytest.mark.parametrize("key", ["target", "draft"])
def test_a_link_names_no_path_only_model_ids(key, name):
    """Issue 48, E1: a name that is no model id is refused with what one looks like, never kept."""
    settings, messages = params.from_query(
        {"pair": "custom", "target": "HuggingFaceTB/SmolLM2-135M-Instruct", key: name}
    )
    assert getattr(settings, key) in ("", "HuggingFaceTB/SmolLM2-135M-Instruct") and name not in settings.model_names()
    said = " ".join(messages)
    assert f"{key}: {name!r} is not a model name" in said and "owner/name" in said
    assert "hf download" not in said


def test_link_models_without_pair_custom_are_applied_or_explained():
    settings, messages = params.from_query({"target": "Qwen/Qwen2.5-1.5B-Instruct", "draft": "ngram"})
    assert (settings.pair, settings.model_names()) == ("custom", ("Qwen/Qwen2.5-1.5B-Instruct", "ngram"))
    assert messages == []
    settings, messages = params.from_query({"pair": "offline", "target": "Qwen/Qwen2.5-1.5B-Instruct"})
    assert settings.pair == "offline" and settings.model_names()[0] == models.OFFLINE_TARGET
    assert any("only apply with pair=custom" in m and "add pair=custom" in m for m in messages), messages
    _, messages = params.from_query({"draft": "ngram"})
    assert any("draft=ngram" in m and "only apply with pair=custom" in m for m in messages), messages


@pytest.mark.parametrize(("raw", "on"), [("1", True), ("yes", True), ("TRUE", True), (" on ", True), ("0", False),
                                         ("no", False), ("false", False), ("Off", False)])  # fmt: skip
def test_switches_in_a_link_understand_yes_true_on_and_their_opposites(raw, on):
    assert params.link_switch(raw, "presenter", default=not on) == (on, None)
    assert params.from_query({"baseline": raw})[0].baseline is on


def test_a_switch_value_not_understood_is_named_and_the_default_kept():
    on, message = params.link_switch("maybe", "presenter", default=False)
    assert on is False
    assert message == (
        "presenter=maybe is not understood: use 1, yes, true or on (or 0, no, false, off); presenter stays off."
    )


def test_a_language_not_offered_is_named_and_english_shown():
    from specviz.teaching.catalogue import parse_language

    assert parse_language("zh") == ("zh", None) and parse_language(None) == ("en", None)
    language, message = parse_language("fr")
    assert language == "en"
    assert message.startswith(
        "lang=fr is not a language of this app: English (en) or 中文 Chinese (zh); showing English."
    )
