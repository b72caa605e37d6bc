"""The staged drafter (specviz.drafters.staged): the same drafts and q as the plain draft model in
fewer draft passes, and exactness on tiny models (greedy identity with the target alone; a
chi-square at T=1 that a wrong rule fails)."""

from __future__ import annotations

import pytest
import torch
from test_lab import ALPHA_LEVEL, one_thread  # noqa: F401 (one_thread: the lab's autouse fixture, one CPU thread)

from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import ModelDrafter
from specviz.drafters.staged import StagedDrafter
from specviz.engine import toy
from specviz.engine.toy import PEAKY
from specviz.labs.lab import exact_distribution, run_lab
from specviz.traces.trace import validate

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


@pytest.fixture(scope="module")
def pair():
    target = toy.tiny_llama(16, seed=1, init_scale=PEAKY, name="staged-target")
    return target, toy.tiny_llama(16, seed=2, layers=1, init_scale=PEAKY, name="staged-draft")


def recording(cls, draft):
    """A drafter of class cls over `draft` that keeps every proposal: (context, tokens, q)."""

    class Recording(cls):
        def propose(self, context, gamma):
            tokens, q = super().propose(context, gamma)  # [g], [g, V]
            self.seen.append((context.tolist(), tokens.tolist(), q))
            return tokens, q

    drafter = Recording(draft)
    drafter.seen = []
    return drafter


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_same_drafts_and_q_as_the_plain_draft_model_in_fewer_passes(pair, temperature, gamma):
    target, draft = pair
    plain, staged = recording(ModelDrafter, draft), recording(StagedDrafter, draft)
    runs = [
        speculative_generate(
            PROMPT,
            target=target,
            draft=d,
            options=DecodeOptions(gamma=gamma, temperature=temperature, max_new_tokens=40, seed=3),
        )
        for d in (plain, staged)
    ]
    assert runs[0].output_token_ids == runs[1].output_token_ids
    assert len(plain.seen) == len(staged.seen)
    for (context_a, tokens_a, q_a), (context_b, tokens_b, q_b) in zip(plain.seen, staged.seen, strict=True):
        assert context_a == context_b and tokens_a == tokens_b
        torch.testing.assert_close(q_a, q_b, atol=5e-5, rtol=0)  # a longer pass may round differently
    drafted = sum(len(tokens) for _, tokens, _ in staged.seen)
    if gamma == 1:
        assert staged.passes == drafted  # nothing to guess: one pass a draft, as the plain drafter
    else:
        assert staged.passes < drafted  # some guesses were the draft model's own choices


def test_a_wrong_guess_leaves_the_cache_a_fresh_drafter_builds(pair):
    """After a proposal whose guesses failed, the next proposal equals a fresh drafter's (a stale cache
    row would change it)."""
    _, draft = pair
    sampling = SamplingConfig(0.0)
    staged = StagedDrafter(draft)
    staged.start(sampling, torch.Generator(), 16)
    context = torch.tensor([5, 6, 5, 6, 5, 6, 5])  # the lookup guesses 6 5 6 ...
    tokens, _ = staged.propose(context, 6)
    assert tokens[0] != 6  # the guess was wrong: the draft model drafted otherwise
    follow = torch.cat([context, tokens[:3]])  # the target kept three drafts
    fresh = ModelDrafter(draft)
    fresh.start(sampling, torch.Generator(), 16)
    a, qa = staged.propose(follow, 5)
    b, qb = fresh.propose(follow, 5)
    assert a.tolist() == b.tolist()
    torch.testing.assert_close(qa, qb, atol=1e-5, rtol=0)


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_output_equals_the_target_alone(pair, gamma):
    target, draft = pair
    base = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=30))
    trace = speculative_generate(
        PROMPT,
        target=target,
        draft=StagedDrafter(draft),
        options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=30),
    )
    assert trace.output_token_ids == base.output_token_ids
    validate(trace.to_dict())


@pytest.mark.parametrize("rule", ["exact", "resample_from_p"])
def test_sampled_first_tokens_follow_the_targets_distribution(rule):
    """Chi-square of the first three tokens at T=1 against the target's exact p (the lab's peaky pair,
    far apart); the wrong rule resample_from_p fails it, so the test can fail."""
    target = toy.tiny_llama(12, seed=1, layers=2, init_scale=PEAKY, name="staged-lab-1")
    draft = toy.tiny_llama(12, seed=2, layers=1, init_scale=PEAKY, name="staged-lab-2")
    prompt = [3, 1, 4, 1, 5]
    exact = exact_distribution(target, prompt, k=3, sampling=SamplingConfig(1.0))
    result = run_lab(
        prompt, target=target, draft=StagedDrafter(draft), rule=rule, k=3, n=400, gamma=3, seed=0, exact=exact,
        with_target=False,
    )  # fmt: skip
    assert result.impossible_spec == 0
    if rule == "exact":
        assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test
    else:
        assert result.spec_test.p_value < ALPHA_LEVEL * 1e-6, result.spec_test
