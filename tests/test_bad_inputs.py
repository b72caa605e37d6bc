"""Every bad input gets a clear SpecvizError that says what to do (and never a hang)."""

from __future__ import annotations

import concurrent.futures
import math

import pytest

from specviz.config import DecodeOptions, SamplingConfig, validate_prompt
from specviz.decoding.decoder import speculative_generate
from specviz.engine.models import check_vocabulary, load_model
from specviz.engine.toy import tiny_llama
from specviz.errors import ConfigError, ModelUnavailableError, VocabularyMismatchError


@pytest.mark.parametrize("prompt", ["", "   \n\t", []])
def test_empty_prompt_is_refused(prompt):
    with pytest.raises(ConfigError, match="empty|non-empty"):
        validate_prompt(prompt)


def test_empty_prompt_is_refused_before_any_model_loads(tiny_pair):
    target, draft = tiny_pair
    with pytest.raises(ConfigError, match="prompt is empty"):
        speculative_generate("  ", target=target, draft=draft)


@pytest.mark.parametrize("gamma", [0, 17, -1, 2.5, True])
def test_gamma_outside_range(gamma):
    with pytest.raises(ConfigError, match="gamma must be a whole number from 1 to 16"):
        DecodeOptions(gamma=gamma)


@pytest.mark.parametrize("temperature", [-0.1, math.nan, math.inf, 11.0, "hot"])
def test_bad_temperature(temperature):
    with pytest.raises(ConfigError, match="temperature"):
        SamplingConfig(temperature=temperature)


@pytest.mark.parametrize("top_p", [0.0, -0.5, 1.5, math.nan])
def test_top_p_outside_unit_interval(top_p):
    with pytest.raises(ConfigError, match=r"top_p must be in \(0, 1\]"):
        SamplingConfig(top_p=top_p)


@pytest.mark.parametrize("top_k", [0, -3, 1.5])
def test_bad_top_k(top_k):
    with pytest.raises(ConfigError, match="top_k"):
        SamplingConfig(top_k=top_k)


@pytest.mark.parametrize("max_new_tokens", [0, 100_000])
def test_max_new_tokens_bounded(max_new_tokens):
    with pytest.raises(ConfigError, match="max_new_tokens"):
        DecodeOptions(max_new_tokens=max_new_tokens)


def test_bad_settings_reach_the_public_api(tiny_pair):
    target, draft = tiny_pair
    with pytest.raises(ConfigError, match="gamma"):
        speculative_generate([1, 2], target=target, draft=draft, options=DecodeOptions(gamma=0))
    with pytest.raises(ConfigError, match="temperature"):
        speculative_generate([1, 2], target=target, draft=draft, options=DecodeOptions(temperature=float("nan")))
    with pytest.raises(ConfigError, match="rule"):
        speculative_generate([1, 2], target=target, draft=draft, options=DecodeOptions(rule="made-up"))


def test_prompt_longer_than_the_context_is_refused(tiny_pair):
    target, draft = tiny_pair
    with pytest.raises(ConfigError, match="reads at most 256 tokens"):
        speculative_generate([1] * 250, target=target, draft=draft, options=DecodeOptions(max_new_tokens=10))


def test_mismatched_vocabularies_are_refused(tiny_pair):
    target, _ = tiny_pair
    other = tiny_llama(vocab_size=20, seed=4)
    with pytest.raises(VocabularyMismatchError, match="share one vocabulary"):
        check_vocabulary(target, other)
    with pytest.raises(VocabularyMismatchError):
        speculative_generate([1, 2, 3], target=target, draft=other)


def within_a_minute(call, *args):
    """call(*args), failing the test if it hangs (a wait for the network): a bound on a hang, not a
    time goal; how long a failing load takes is not asserted here."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(call, *args).result(timeout=60)
    finally:
        pool.shutdown(wait=False)  # a hung call is left behind, not waited for


def test_unknown_model_offline_fails_fast_with_a_clear_message():
    with pytest.raises(ModelUnavailableError, match="not available offline.*offline default pair"):
        within_a_minute(load_model, "no-such-owner/no-such-model-xyz")


def test_strategy_names_are_not_models():
    from specviz.errors import ModelError

    with pytest.raises(ModelError, match="draft strategy"):
        load_model("ngram")


def test_unknown_model_fails_fast_even_without_hf_hub_offline(monkeypatch):
    """On a machine with no route to the hub, the reachability probe answers within seconds."""
    import specviz.engine.models as models

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(models, "_hub_checked", None)
    if within_a_minute(models.hub_reachable):
        pytest.skip("this machine can reach the Hugging Face hub")
    with pytest.raises(ModelUnavailableError, match="not available offline"):
        within_a_minute(load_model, "no-such-owner/another-missing-model")


def test_a_tokenizer_mismatch_is_refused_every_time_and_remembered_pairs_are_bounded(tiny_pair):
    """The vocabulary check is remembered per pair of tokenizers (the lab checks it for every
    sample): a mismatch is still refused the second time, with the same counts, and past
    VOCABULARY_CHECKS_KEPT pairs the least recently used are forgotten."""
    import dataclasses

    from specviz.engine import models

    class Tokenizer:
        def __init__(self, vocab: dict[str, int]):
            self.vocab, self.reads = vocab, 0

        def get_vocab(self) -> dict[str, int]:
            self.reads += 1
            return self.vocab

    target, _ = tiny_pair
    ours = Tokenizer({"a": 0, "b": 1, "c": 2})
    theirs = Tokenizer({"a": 0, "b": 1, "x": 2, "y": 3})
    with_ours = dataclasses.replace(target, tokenizer=ours)
    messages = []
    for _ in range(2):
        with pytest.raises(VocabularyMismatchError) as refused:
            check_vocabulary(with_ours, dataclasses.replace(target, name="other", tokenizer=theirs))
        messages.append(str(refused.value))
    assert messages[0] == messages[1] and "(4 vs 3 tokens; 1 only in the target, 2 only in the draft)" in messages[0]
    assert ours.reads == theirs.reads == 1  # read once, then remembered
    for _ in range(models.VOCABULARY_CHECKS_KEPT + 3):  # new pairs that match: accepted, and only the newest kept
        check_vocabulary(
            dataclasses.replace(target, tokenizer=Tokenizer({"a": 0})),
            dataclasses.replace(target, tokenizer=Tokenizer({"a": 0})),
        )
    assert models._vocabulary_difference.cache_info().currsize == models.VOCABULARY_CHECKS_KEPT


@pytest.mark.parametrize("name", ["../../etc/passwd", "/no/such/folder", "owner/na me"])
def test_a_name_that_is_no_model_id_is_refused_and_never_put_into_a_command(name):
    """Issue 48, E1: the library says what a model id looks like, and suggests no `hf download` of it."""
    from specviz.errors import ModelError

    with pytest.raises(ModelError) as caught:
        load_model(name)
    assert "is not a model name" in str(caught.value) and "owner/name" in str(caught.value)
    assert "hf download" not in str(caught.value)
