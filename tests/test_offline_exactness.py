"""End-to-end exactness on the offline default target (SmolLM2-135M-Instruct).

Greedy speculative output must equal transformers' own greedy `generate(do_sample=False)` token
for token, for several prompts and gamma in {1, 3, 8}, with the n-gram drafter, a model drafter (a
random tiny model that disagrees often, so every rejection path runs), the draft head, the hybrid,
the suffix-tree hybrid, the staged draft (the distilled draft drafted by n-gram lookup), and the
default as a new user gets it (no draft named) at the default gamma. The target is float32 with packed weights,
the default on a CPU; transformers' generate runs the same packed model.
"""

from __future__ import annotations

import pytest
import torch

from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import speculative_generate
from specviz.traces.trace import validate

pytestmark = pytest.mark.slow

PROMPTS = [
    "List three fruits and one fact about each.",
    "Write a Python function that reverses a string.",
    "Once upon a time, a robot",
]
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def greedy_references(offline_target):
    refs = {}
    tok = offline_target.tokenizer
    for prompt in PROMPTS:
        ids = tok.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        with torch.inference_mode():
            out = offline_target.model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False)
        refs[prompt] = (ids, out[0, len(ids) :].tolist())
    return refs


# Every drafter at gamma 1, 3 and 8; the default as a new user gets it (no draft named: the hybrid,
# whose three gammas are above) at the default gamma, for the path that resolves it.
DRAFTERS = ["ngram", "model", "offline:specviz-head-smollm2", "hybrid", "hybrid-suffix", "staged"]
CASES = [(drafter, gamma) for drafter in DRAFTERS for gamma in (1, 3, 8)] + [(None, 3)]


@pytest.mark.parametrize(("drafter", "gamma"), CASES)
def test_greedy_speculative_equals_transformers_greedy(
    offline_target, random_draft_for_offline, greedy_references, gamma, drafter
):
    draft = random_draft_for_offline if drafter == "model" else drafter
    for prompt in PROMPTS:
        ids, reference = greedy_references[prompt]
        trace = speculative_generate(
            prompt,
            target=offline_target,
            draft=draft,
            options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=NEW_TOKENS),
        )
        assert trace.prompt_token_ids == ids
        assert trace.output_token_ids == reference, f"{prompt!r} gamma={gamma} drafter={drafter}"
        validate(trace.to_dict())


def test_sampled_run_with_the_default_pair_is_a_valid_trace(offline_target):
    trace = speculative_generate(
        PROMPTS[0],
        target=offline_target,
        options=DecodeOptions(gamma=4, temperature=1.0, top_p=0.9, max_new_tokens=NEW_TOKENS, seed=3),
    )
    validate(trace.to_dict())
    assert trace.summary["new_tokens"] >= 1
    assert trace.extra["token_text"][str(trace.output_token_ids[0])]


@pytest.fixture(scope="module")
def first_two_tokens(offline_target):
    """(a short prompt's ids, the target's exact distribution of its first two tokens at T=1): the
    chi-square tests below share one enumeration of its outcomes."""
    from specviz.labs.lab import exact_distribution

    # The user's turn without the template's default system turn: 13 tokens instead of 34, which
    # every one of the 80 samples feeds the target first (most of a short sample's cost).
    ids = offline_target.tokenizer("<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    return ids, exact_distribution(offline_target, ids, k=2, sampling=SamplingConfig(1.0), min_prob=2e-3)


@pytest.mark.slow
# "self" is left out: its q is p, so every draft passes and the test could not fail.
@pytest.mark.parametrize("draft", ["hybrid", "offline:specviz-draft-smollm2"])
def test_sampled_first_tokens_follow_the_targets_exact_distribution(offline_target, first_two_tokens, draft):
    """Chi-square of the first two sampled tokens against the target's exact p, for the offline
    target's model-based drafters as it loads (its kernels, the lean forward, the head's tree and
    early stop in the hybrid): a wrong rule or a q that is not the one a token was drawn from is
    caught here (the lab's tests show such rules fail this test)."""
    from specviz.labs.lab import run_lab

    ids, exact = first_two_tokens
    result = run_lab(ids, target=offline_target, draft=draft, k=2, n=80, gamma=2, exact=exact, with_target=False)
    assert result.impossible_spec == 0
    assert result.spec_test.p_value > 0.001, (draft, result.spec_test)


@pytest.mark.parametrize("gamma", [3, 5])
@pytest.mark.parametrize("drafter", ["offline:specviz-head-smollm2", "hybrid"])
def test_greedy_dynamic_tree_equals_transformers_greedy(offline_target, greedy_references, gamma, drafter):
    """EAGLE-2's dynamic tree (DecodeOptions.tree "dynamic"), its budget from this machine's measured
    v(rows): greedy float32 output is transformers' greedy generate, token for token."""
    for prompt in PROMPTS:
        _ids, reference = greedy_references[prompt]
        options = DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=NEW_TOKENS, tree="dynamic")
        trace = speculative_generate(prompt, target=offline_target, draft=drafter, options=options)
        assert trace.output_token_ids == reference, f"{prompt!r} gamma={gamma} drafter={drafter}"
        validate(trace.to_dict())
        assert any("nodes" in it.get("tree", {}) for it in trace.iterations) or drafter == "hybrid"


@pytest.mark.slow
@pytest.mark.parametrize("draft", ["hybrid", "offline:specviz-head-smollm2"])
def test_sampled_first_tokens_of_the_dynamic_tree_follow_the_targets_exact_distribution(
    offline_target, first_two_tokens, draft
):
    """The chi-square above with EAGLE-2's dynamic tree, at T=1 drawn from q (specviz.drafters.sampled_tree:
    children without replacement, their counts decided before they are drawn), batched through the
    serving path."""
    from specviz.labs.lab import run_lab

    ids, exact = first_two_tokens
    result = run_lab(
        ids, target=offline_target, draft=draft, k=2, n=80, gamma=2, exact=exact, with_target=False, tree="dynamic"
    )
    assert result.impossible_spec == 0
    assert result.spec_test.p_value > 0.001, (draft, result.spec_test)
