"""The app's settings and their URL form: validation, clamping and round trips (no streamlit)."""

from __future__ import annotations

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
    assert pairs["offline-self"].draft == models.SELF_DRAFT
    drafts = {p.draft for p in pairs.values()} | {models.DEFAULT_DRAFT}
    assert models.NGRAM_DRAFT in drafts
    online = {(p.target, p.draft) for p in pairs.values() if p.online}
    assert online == set(models.HUB_PAIRS.values())
    assert "custom" in pairs


def test_run_key_ignores_the_baseline_switch_but_not_the_seed():
    assert Settings(baseline=False).run_key() == DEFAULTS.run_key()
    assert Settings(seed=1).run_key() != DEFAULTS.run_key()
    # "off" values mean the same run as None
    assert Settings(top_k=0, top_p=1.0).decode_kwargs()["top_k"] is None


def test_a_trace_config_maps_back_to_its_pair():
    cfg = {
        "target": models.OFFLINE_TARGET,
        "draft": models.SELF_DRAFT,
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
