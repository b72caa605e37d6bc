"""The suffix-tree drafter (specviz.drafters.suffix): the tree's counts, matches and scores, the
process memory of earlier outputs, and exactness on tiny models (greedy identity with the target
alone, alone and inside the hybrid; a chi-square at T=1 that a wrong rule fails)."""

from __future__ import annotations

import pytest
import torch
from test_head import TRAINED_SUBSET, random_head
from test_lab import ALPHA_LEVEL, one_thread  # noqa: F401 (one_thread: the lab's autouse fixture, one CPU thread)

from specviz.config import DecodeOptions, SamplingConfig
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter, HybridDrafter
from specviz.drafters.suffix import SuffixDrafter, SuffixMemory, SuffixTree, continuation
from specviz.engine import toy
from specviz.engine.toy import PEAKY
from specviz.labs.lab import exact_distribution, run_lab
from specviz.traces.trace import validate

REPEATING = [3, 1, 4, 1, 5, 3, 1, 4, 1, 5, 3, 1]  # a prompt whose suffixes match earlier text


@pytest.fixture(scope="module")
def target():
    return toy.tiny_llama(12, seed=1, layers=2, init_scale=PEAKY, name="suffix-tiny-1")


def paths(tree: SuffixTree) -> dict[tuple[int, ...], int]:
    """Every path of the tree with its count."""
    out, stack = {}, [((), tree.root)]
    while stack:
        path, node = stack.pop()
        for token, child in node.children.items():
            out[(*path, token)] = child.count
            stack.append(((*path, token), child))
    return out


def test_insert_counts_every_substring_up_to_the_depth():
    tree = SuffixTree(depth=3)
    tree.extend("a", [1, 2, 3, 1, 2, 4])
    counts = paths(tree)
    assert counts[(1,)] == 2 and counts[(1, 2)] == 2 and counts[(1, 2, 3)] == 1 and counts[(1, 2, 4)] == 1
    assert counts[(2, 3, 1)] == 1 and (1, 2, 3, 1) not in counts  # deeper than 3 is not kept
    assert sum(c for p, c in counts.items() if len(p) == 1) == 6  # one length-1 path per token


def test_growing_in_pieces_equals_inserting_at_once_and_removal_takes_it_back():
    whole, pieces = SuffixTree(depth=4), SuffixTree(depth=4)
    whole.extend(0, [5, 6, 5, 6, 7, 5, 6])
    for chunk in ([5], [6, 5], [], [6, 7, 5], [6]):
        pieces.extend(0, chunk)
    assert paths(whole) == paths(pieces)
    pieces.extend(1, [9, 5, 6, 8])
    only_second = SuffixTree(depth=4)
    only_second.extend(1, [9, 5, 6, 8])
    pieces.remove(0)
    assert paths(pieces) == paths(only_second)
    pieces.remove(1)
    assert paths(pieces) == {} and pieces.docs == {}


def test_matches_run_from_the_longest_suffix_down():
    tree = SuffixTree(depth=8)
    tree.extend(0, [1, 2, 3, 4, 9, 3, 4])
    lengths = [length for length, _ in tree.matches([7, 2, 3, 4])]
    assert lengths == [3, 2, 1]  # "2 3 4" occurs; "7 2 3 4" does not
    assert tree.matches([7, 2, 3, 4], min_match=4) == []
    assert tree.matches([8]) == []


def test_continuation_follows_the_most_frequent_child_while_its_probability_holds():
    tree = SuffixTree(depth=6)
    tree.extend(0, [1, 2, 1, 2, 1, 3, 1, 2])
    node = tree.matches([1], min_match=1)[0][1]  # the path "1": four occurrences
    score, tokens = continuation(node, gamma=3, min_prob=0.0)
    # 2 followed "1" three times of four; 1 followed "1 2" twice of three (the last is the text's end);
    # 2 and 3 followed "1 2 1" once each (a tie: the smaller id).
    assert tokens == [2, 1, 2]
    assert score == pytest.approx(0.75 + 0.75 * (2 / 3) + 0.75 * (2 / 3) * 0.5)
    assert continuation(node, gamma=3, min_prob=0.6) == (pytest.approx(0.75), [2])  # 0.5 < 0.6 stops it
    assert continuation(node, gamma=0, min_prob=0.0) == (0.0, [])


def test_propose_takes_the_best_score_over_the_match_lengths():
    tree = SuffixTree(depth=6)
    tree.extend(0, [7, 1, 5, 8, 1, 2, 8, 1, 2, 8, 1, 2])
    # "7 1" was followed by 5 once (probability 1 from the longest match); "1" by 2 three times of four.
    score, tokens = tree.propose([7, 1], gamma=2, min_prob=0.1)
    assert tokens == [5, 8] and score == pytest.approx(2.0)
    assert tree.propose([9, 1], gamma=2, min_prob=0.1)[1] == [2, 8]
    assert tree.propose([4], gamma=2) == (0.0, [])


def test_memory_forgets_the_oldest_output_first():
    memory = SuffixMemory(depth=4, max_outputs=2)
    first = memory.new_run()
    memory.extend(first, [1, 2, 3])
    second = memory.new_run()
    memory.extend(second, [4, 5])
    assert memory.propose([1], 2, 1, 0.1)[1] == [2, 3]
    third = memory.new_run()  # the first output is forgotten
    memory.extend(first, [9])  # and a run forgotten while going adds nothing more
    memory.extend(third, [6])
    assert memory.propose([1], 2, 1, 0.1) == (0.0, [])
    assert set(memory.tree.docs) == {second, third}


def test_memory_keeps_at_most_its_tokens_forgetting_the_oldest_output_first():
    memory = SuffixMemory(depth=4, max_outputs=10, max_tokens=5)
    first, second = memory.new_run(), memory.new_run()
    memory.extend(first, [1, 2, 3])
    memory.extend(second, [4, 5])
    assert set(memory.tree.docs) == {first, second}  # 5 tokens: at the bound
    memory.extend(second, [6])  # 6 tokens: the oldest output goes
    assert set(memory.tree.docs) == {second} and memory.propose([1], 2, 1, 0.1) == (0.0, [])
    memory.extend(second, list(range(7, 20)))  # one output alone may pass the bound: it is the one going on
    assert set(memory.tree.docs) == {second}


def test_the_drafter_proposes_from_an_earlier_runs_output():
    memory = SuffixMemory()
    drafter = SuffixDrafter(min_match=2, memory=memory)
    drafter.start(SamplingConfig(0.0), torch.Generator(), vocab_size=12)
    drafter.propose(torch.tensor([0, 1]), 3)  # the prompt
    drafter.propose(torch.tensor([0, 1, 7, 8, 9, 10, 11]), 3)  # the output 7 8 9 10 11 is remembered
    drafter.start(SamplingConfig(0.0), torch.Generator(), vocab_size=12)
    tokens, q = drafter.propose(torch.tensor([2, 3, 8, 9]), 3)  # a new run, its prompt unseen before
    assert tokens.tolist() == [10, 11] and drafter.report.stop == "match_end"
    assert torch.equal(q, torch.nn.functional.one_hot(tokens, 12).float())
    assert drafter.propose(torch.tensor([2, 3, 8, 9, 4, 5]), 3)[0].numel() == 0
    assert drafter.report.stop == "no_match"


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_output_equals_the_target_alone(target, gamma):
    base = autoregressive_generate(REPEATING, target=target, options=DecodeOptions(temperature=0, max_new_tokens=30))
    memory = SuffixMemory()
    accepted = []
    for _ in range(2):  # the second run drafts from the first run's output too
        trace = speculative_generate(
            REPEATING,
            target=target,
            draft=SuffixDrafter(memory=memory),
            options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=30),
        )
        assert trace.output_token_ids == base.output_token_ids
        validate(trace.to_dict())
        accepted.append(sum(it["accepted_count"] for it in trace.iterations))
    assert 0 < accepted[0] <= accepted[1]


def test_greedy_hybrid_with_suffix_trees_equals_the_target_alone():
    tiny = toy.tiny_llama(vocab_size=24, seed=5, init_scale=20.0)
    base = autoregressive_generate(REPEATING, target=tiny, options=DecodeOptions(temperature=0, max_new_tokens=40))
    head = HeadDrafter(random_head(tiny, subset=TRAINED_SUBSET, scale=0.3), "head", branches=2)
    hybrid = HybridDrafter(head, "hybrid-suffix", lookup=SuffixDrafter(min_match=2, memory=SuffixMemory()))
    for gamma in (1, 4):
        trace = speculative_generate(
            REPEATING, target=tiny, draft=hybrid, options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=40)
        )
        assert trace.output_token_ids == base.output_token_ids, gamma
        validate(trace.to_dict())
        sources = {it["drafting"]["source"] for it in trace.iterations if it["drafts"]}
        assert "suffix" in sources, sources


@pytest.mark.parametrize("rule", ["exact", "resample_from_p"])
def test_sampled_first_tokens_follow_the_targets_distribution(target, rule):
    """Chi-square of the first three tokens at T=1 against the target's exact p, the suffix memory
    growing over the samples; the wrong rule resample_from_p fails it, so the test can fail."""
    exact = exact_distribution(target, REPEATING, k=3, sampling=SamplingConfig(1.0))
    drafter = SuffixDrafter(memory=SuffixMemory(max_outputs=64))
    result = run_lab(
        REPEATING, target=target, draft=drafter, rule=rule, k=3, n=400, gamma=2, seed=0, exact=exact, with_target=False
    )
    assert result.impossible_spec == 0
    if rule == "exact":
        assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test
    else:
        assert result.spec_test.p_value < ALPHA_LEVEL * 1e-6, result.spec_test


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_suffix_draft_that_ran_short_is_said_as_the_suffix_trees_not_the_n_gram(lang):
    from specviz.teaching.charts.drafting import why_fewer
    from specviz.teaching.charts.words import words

    said = words(lang)
    for stop, drafts in (("match_end", [{"token_id": 4}]), ("no_match", [])):
        it = {"index": 2, "drafts": drafts, "drafting": {"gamma": 3, "source": "suffix", "stop": stop}}
        assert why_fewer(it, lang=lang) == said[f"why_suffix_{stop}"]
        it["drafting"]["source"] = "ngram"
        assert why_fewer(it, lang=lang) == said[f"why_{stop}"]
