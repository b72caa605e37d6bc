"""Decoder invariants, determinism, KV-cache correctness and greedy exactness on tiny models."""

from __future__ import annotations

import pytest
import torch

from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import lookup_continuation
from specviz.engine.sampling import probabilities
from specviz.traces.trace import Trace, validate

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]

SETTINGS = [
    dict(gamma=1, temperature=1.0),
    dict(gamma=3, temperature=0.7, top_k=5),
    dict(gamma=4, temperature=1.3, top_p=0.8),
    dict(gamma=8, temperature=0.0),
    dict(gamma=16, temperature=1.0),
]


def _strip_timing(trace: Trace) -> dict:
    d = trace.to_dict()
    for it in d["iterations"]:
        for key in ("start_ms", "draft_ms", "verify_ms"):
            it.pop(key)
    for key in ("wall_ms", "tokens_per_s", "draft_ms", "verify_ms"):
        d["summary"].pop(key)
    return d


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_trace_invariants_hold(tiny_pair, settings, drafter):
    target, draft = tiny_pair
    options = DecodeOptions(max_new_tokens=40, seed=7, **settings)
    trace = speculative_generate(PROMPT, target=target, draft=draft if drafter == "model" else "ngram", options=options)
    validate(trace.to_dict())  # prefix property, output = accepted + corrections, accept_prob, r, summary
    assert len(trace.output_token_ids) == 40
    for it in trace.iterations:
        flags = [d["accepted"] for d in it["drafts"]]
        assert flags == sorted(flags, reverse=True), "accepted drafts must form a prefix"
        for d in it["drafts"]:
            assert d["accept_prob"] == pytest.approx(min(1.0, d["p"] / d["q"]), abs=1e-6)
            if d["accepted"] and d["r"] is not None:
                assert d["r"] < d["accept_prob"]
    emitted = []
    for it in trace.iterations:
        emitted += [d["token_id"] for d in it["drafts"][: it["accepted_count"]]]
        emitted.append(it["correction"]["token_id"])
    assert emitted == trace.output_token_ids
    s = trace.summary
    assert s["accepted"] == sum(it["accepted_count"] for it in trace.iterations)
    assert s["mean_accepted_length"] == pytest.approx(40 / len(trace.iterations))
    assert trace.accept_lengths() == [it["accepted_count"] + 1 for it in trace.iterations]


def test_same_seed_same_trace(tiny_pair):
    target, draft = tiny_pair
    a = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=4, seed=11, max_new_tokens=30)
    )
    b = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=4, seed=11, max_new_tokens=30)
    )
    c = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=4, seed=12, max_new_tokens=30)
    )
    assert _strip_timing(a) == _strip_timing(b)
    assert a.output_token_ids != c.output_token_ids


def test_json_round_trip_of_a_real_trace(tiny_pair):
    target, draft = tiny_pair
    trace = speculative_generate(PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=3, max_new_tokens=20))
    again = Trace.from_json(trace.to_json())
    assert again.to_dict() == trace.to_dict()


def test_untraced_run_matches_traced_tokens(tiny_pair):
    target, draft = tiny_pair
    traced = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=3, seed=5, max_new_tokens=30)
    )
    plain = speculative_generate(
        PROMPT, target=target, draft=draft, trace=False, options=DecodeOptions(gamma=3, seed=5, max_new_tokens=30)
    )
    assert plain.output_token_ids == traced.output_token_ids
    assert plain.iterations == []
    for key in ("iterations", "drafted", "accepted", "new_tokens"):
        assert plain.summary[key] == traced.summary[key]
    validate(plain.to_dict())


def _full_forward_probs(target, ids: list[int], sampling: SamplingConfig) -> torch.Tensor:
    """p at every position from one forward pass without any cache: [L, V]."""
    with torch.inference_mode():
        logits = target.model(torch.tensor([ids])).logits[0]
    return probabilities(logits, sampling)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_kv_cache_probabilities_match_a_full_forward(tiny_pair, temperature):
    """The p recorded with cached, multi-token verification equals a cache-free forward.

    Tolerance 1e-5 absolute in float32: the two paths sum attention in different orders.
    """
    target, draft = tiny_pair
    sampling = SamplingConfig(temperature)
    trace = speculative_generate(
        PROMPT,
        target=target,
        draft=draft,
        options=DecodeOptions(gamma=4, temperature=temperature, seed=3, max_new_tokens=40),
    )
    full = trace.prompt_token_ids + trace.output_token_ids
    probs = _full_forward_probs(target, full, sampling)
    offset = len(trace.prompt_token_ids) - 1  # probs[offset + k] predicts output position k
    checked = 0
    for it in trace.iterations:
        n = it["accepted_count"]
        for d in it["drafts"][: n + 1]:  # positions whose prefix is in the final text
            assert d["p"] == pytest.approx(float(probs[offset + d["position"], d["token_id"]]), abs=1e-5)
            checked += 1
        corr = it["correction"]
        for token_id, prob in corr["p_top"]:
            assert prob == pytest.approx(float(probs[offset + corr["position"], token_id]), abs=1e-5)
    assert checked > 10


@pytest.mark.parametrize("gamma", [1, 3, 8])
@pytest.mark.parametrize("drafter", ["model", "ngram", "self"])
def test_greedy_equals_transformers_greedy_on_tiny_models(tiny_pair, gamma, drafter):
    target, draft = tiny_pair
    draft_arg = {"model": draft, "ngram": "ngram", "self": "self"}[drafter]
    trace = speculative_generate(
        PROMPT, target=target, draft=draft_arg, options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=30)
    )
    with torch.inference_mode():
        reference = target.model.generate(
            torch.tensor([PROMPT]), max_new_tokens=30, do_sample=False, min_new_tokens=30, pad_token_id=0
        )
    assert trace.output_token_ids == reference[0, len(PROMPT) :].tolist()
    baseline = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=30))
    assert baseline.output_token_ids == trace.output_token_ids


def test_self_draft_accepts_everything(tiny_pair):
    target, _ = tiny_pair
    trace = speculative_generate(
        PROMPT, target=target, draft="self", options=DecodeOptions(gamma=4, temperature=1.0, max_new_tokens=30)
    )
    assert trace.summary["acceptance_rate"] == pytest.approx(1.0, abs=0.05)
    assert trace.summary["alpha"] == pytest.approx(1.0, abs=1e-4)


def test_eos_stops_the_run(tiny_pair):
    """With an end-of-sequence id set, the run stops right after it, wherever it appears."""
    target, draft = tiny_pair
    baseline = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=30))
    eos = baseline.output_token_ids[5]
    first = baseline.output_token_ids.index(eos)
    target.model.config.eos_token_id = eos
    try:
        for gamma in (1, 4, 8):
            trace = speculative_generate(
                PROMPT,
                target=target,
                draft="self",
                options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=30),
            )
            assert trace.output_token_ids == baseline.output_token_ids[: first + 1]
            assert trace.stop_reason == "eos"
            validate(trace.to_dict())
    finally:
        target.model.config.eos_token_id = None


def test_ngram_lookup_continues_latest_match():
    ids = [1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert lookup_continuation(ids, 2, 3, 1) == [7, 8]  # latest earlier "1 2 3" is followed by 7 8
    assert lookup_continuation([4, 5, 6], 3, 3, 1) == []
    assert lookup_continuation([5, 6, 5], 4, 3, 1) == [6, 5]


def test_every_token_a_chart_may_label_has_its_text_in_the_trace():
    """extra.token_text holds every id the trace mentions, the residual's top tokens included (the
    lesson's residual bars read '⟨token 3929⟩' where the recorder had left them out). A vocabulary
    wide enough that the residual's top 10 are not all among p's and q's top 10."""
    from specviz.engine.toy import tiny_llama

    target, draft = tiny_llama(vocab_size=300, seed=1), tiny_llama(vocab_size=300, seed=2, layers=1)
    trace = speculative_generate(
        PROMPT, target=target, draft=draft, options=DecodeOptions(gamma=3, seed=5, max_new_tokens=40)
    )
    texts = {int(k) for k in trace.extra["token_text"]}
    residual_ids = {
        token_id
        for it in trace.iterations
        if it.get("correction") and it["correction"].get("residual_top")
        for token_id, _ in it["correction"]["residual_top"]
    }
    assert residual_ids, "no resample with a residual in this run: pick another seed"
    top_ids = {t for it in trace.iterations for d in it["drafts"] for key in ("q_top", "p_top") for t, _ in d[key]}
    assert residual_ids | top_ids <= texts, sorted((residual_ids | top_ids) - texts)[:10]
