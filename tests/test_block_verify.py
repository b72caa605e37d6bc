"""Block verification's maths, checked exactly (specviz.decoding.block).

On a vocabulary of V = 4 and chains of gamma = 2 and 3 drafts, p and q depend on the whole prefix (a
random table per prefix). Enumerating every chain the draft can propose, with the chance of each
stop point and each correction computed from the module's own functions, gives the exact
distribution of the text's first gamma + 1 tokens (what the iteration emits, then p for the rest):
it must equal p's. Two negative controls (a weight that does not carry along the chain, and the
token rule's residual instead of the block residual) run through the same enumeration and must
NOT give p, so these tests fail when the maths is wrong. The expected number of drafts kept is
never below token-by-token verification's, and is the paper's 11/9 against 10/9 on its own example.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from specviz.decoding import block
from specviz.decoding.block import BlockNumbers, block_numbers, block_residual, stop_probabilities, verify_block
from specviz.decoding.verify import residual_distribution

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

V = 4


def _dist(gen: torch.Generator, zeros: int = 0, peaky: float = 1.0) -> torch.Tensor:
    x = torch.rand(V, generator=gen, dtype=torch.float64) ** (1 + 3 * peaky)
    if zeros:
        x[torch.randperm(V, generator=gen)[:zeros]] = 0.0
    return x / x.sum()


def random_tables(seed: int, gamma: int) -> tuple[dict, dict]:
    """p(.|prefix) for prefixes of 0..gamma tokens, q(.|prefix) for 0..gamma-1: each its own random
    distribution, some with zeros (p = 0 where q > 0 and the other way round)."""
    gen = torch.Generator().manual_seed(seed)
    p, q = {}, {}
    for length in range(gamma + 1):
        for prefix in itertools.product(range(V), repeat=length):
            p[prefix] = _dist(gen, zeros=int(torch.randint(0, 2, (1,), generator=gen)), peaky=seed % 3)
            if length < gamma:
                q[prefix] = _dist(gen, zeros=int(torch.randint(0, 2, (1,), generator=gen)), peaky=(seed + 1) % 3)
    return p, q


def _rows(chain: tuple, p: dict, q: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The p [g + 1, V] and q [g, V] the decoder would hand over for this chain."""
    return (
        torch.stack([p[chain[:i]] for i in range(len(chain) + 1)]),
        torch.stack([q[chain[:i]] for i in range(len(chain))]),
    )


def chains(q: dict, gamma: int):
    """Every chain the draft can propose, with its probability Q."""
    for chain in itertools.product(range(V), repeat=gamma):
        prob = 1.0
        for i in range(gamma):
            prob *= float(q[chain[:i]][chain[i]])
        if prob > 0:
            yield chain, prob


def text_distribution(p: dict, q: dict, gamma: int, numbers=block_numbers, residual=None) -> dict:
    """The exact distribution of the first gamma + 1 tokens of the text: one block-verified
    iteration, then p for the tokens after what it emitted."""
    out: dict[tuple, float] = {}
    for chain, prob in chains(q, gamma):
        p_rows, q_rows = _rows(chain, p, q)
        n = numbers(torch.tensor(chain), q_rows, p_rows)
        stops = stop_probabilities(n.h)
        for tau in range(gamma + 1):
            if tau == gamma:
                last = p_rows[gamma]
            elif residual is None:
                last = block_residual(p_rows[tau], q_rows[tau], n.weights[tau])
            else:
                last = residual(p_rows[tau], q_rows[tau])
            for y in range(V):
                mass = prob * float(stops[tau]) * float(last[y])
                if mass > 0:
                    _continue_with_p(out, chain[:tau] + (y,), mass, p, gamma + 1)
    return out


def _continue_with_p(out: dict, text: tuple, mass: float, p: dict, length: int) -> None:
    if len(text) == length:
        out[text] = out.get(text, 0.0) + mass
        return
    for y in range(V):
        if float(p[text][y]) > 0:
            _continue_with_p(out, text + (y,), mass * float(p[text][y]), p, length)


def target_distribution(p: dict, length: int) -> dict:
    out: dict[tuple, float] = {}
    _continue_with_p(out, (), 1.0, p, length)
    return out


def largest_gap(a: dict, b: dict) -> float:
    return max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def expected_kept(p: dict, q: dict, gamma: int) -> tuple[float, float]:
    """(block verification's, token-by-token verification's) expected number of drafts kept."""
    blockwise = 0.0
    for chain, prob in chains(q, gamma):
        p_rows, q_rows = _rows(chain, p, q)
        stops = stop_probabilities(block_numbers(torch.tensor(chain), q_rows, p_rows).h)
        blockwise += prob * sum(i * float(stops[i]) for i in range(gamma + 1))
    tokenwise = 0.0  # sum over i of P(the first i drafts pass) = sum over x^i of prod min(p, q)
    for length in range(1, gamma + 1):
        for prefix in itertools.product(range(V), repeat=length):
            passed = 1.0
            for i in range(length):
                passed *= min(float(p[prefix[:i]][prefix[i]]), float(q[prefix[:i]][prefix[i]]))
            tokenwise += passed
    return blockwise, tokenwise


@pytest.mark.parametrize("gamma", [2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_the_text_is_distributed_as_p(seed, gamma):
    p, q = random_tables(seed, gamma)
    got = text_distribution(p, q, gamma)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-12)
    assert largest_gap(got, target_distribution(p, gamma + 1)) < 1e-12


def test_the_first_token_is_distributed_as_p():
    p, q = random_tables(11, 2)
    got = text_distribution(p, q, 2)
    first = [sum(m for text, m in got.items() if text[0] == x) for x in range(V)]
    assert first == pytest.approx(p[()].tolist(), abs=1e-12)


def _uncarried_weights(draft_tokens, q_rows, p_rows) -> BlockNumbers:
    """WRONG: each draft's own min(1, p/q) as its weight, not carried along the chain."""
    right = block_numbers(draft_tokens, q_rows, p_rows)
    g = draft_tokens.shape[0]
    own = torch.clamp(p_rows[torch.arange(g), draft_tokens] / q_rows[torch.arange(g), draft_tokens], max=1.0)
    weights = torch.cat([right.weights[:1], own])
    masses = torch.clamp(weights[:g, None] * p_rows[:g] - q_rows, min=0.0).sum(-1)
    denominator = masses + 1 - weights[:g]
    inner = torch.where(denominator > 0, masses / denominator.clamp(min=1e-30), torch.ones_like(masses))
    return BlockNumbers(weights, masses, torch.cat([inner, weights[g:]]))


def test_negative_control_a_weight_that_does_not_carry_is_caught(monkeypatch):
    p, q = random_tables(3, 2)
    want = target_distribution(p, 3)
    assert largest_gap(text_distribution(p, q, 2, numbers=_uncarried_weights), want) > 1e-3
    # The same wrong weight inside the module's own pipeline is caught the same way.
    monkeypatch.setattr(block, "block_numbers", _uncarried_weights)
    assert largest_gap(text_distribution(p, q, 2, numbers=block.block_numbers), want) > 1e-3


def test_negative_control_the_token_residual_after_a_kept_draft_is_caught():
    """After tau > 0 drafts the correction must come from max(0, w p - q), not norm(max(0, p - q))."""
    p, q = random_tables(4, 2)
    got = text_distribution(p, q, 2, residual=residual_distribution)
    assert largest_gap(got, target_distribution(p, 3)) > 1e-3


@pytest.mark.parametrize("gamma", [2, 3])
def test_block_never_keeps_fewer_than_token_by_token(gamma):
    gains = []
    for seed in range(20):
        p, q = random_tables(100 + seed, gamma)
        blockwise, tokenwise = expected_kept(p, q, gamma)
        assert blockwise >= tokenwise - 1e-12, (seed, blockwise, tokenwise)
        gains.append(blockwise - tokenwise)
    assert max(gains) > 1e-3  # and it is not the same rule under another name


def test_the_papers_example_keeps_11_ninths_against_10_ninths():
    """Sun et al. 2024, section 1: p(a) = 1/3, q(a) = 2/3 at every position, gamma = 2."""
    p_row = torch.tensor([1 / 3, 2 / 3, 0.0, 0.0], dtype=torch.float64)
    q_row = torch.tensor([2 / 3, 1 / 3, 0.0, 0.0], dtype=torch.float64)
    p = {k: p_row for n in range(3) for k in itertools.product(range(V), repeat=n)}
    q = {k: q_row for n in range(2) for k in itertools.product(range(V), repeat=n)}
    blockwise, tokenwise = expected_kept(p, q, 2)
    assert blockwise == pytest.approx(11 / 9, abs=1e-12)
    assert tokenwise == pytest.approx(10 / 9, abs=1e-12)


def test_verify_block_keeps_what_its_draws_say():
    """The sampled rule: tau is the last stop whose draw fell under h, the correction has mass."""
    p, q = random_tables(5, 3)
    gen = torch.Generator().manual_seed(0)
    taus = set()
    for chain, _ in itertools.islice(chains(q, 3), 40):
        p_rows, q_rows = _rows(chain, p, q)
        for _ in range(5):
            v = verify_block(torch.tensor(chain), q_rows, p_rows, gen, greedy=False)
            h = v.block.h
            stops = [i + 1 for i in range(3) if float(v.r[i]) < float(h[i + 1])]
            assert v.accepted_count == max(stops, default=0)
            taus.add(v.accepted_count)
            if v.accepted_count < 3:
                assert v.correction_kind == "block_resample"
                assert float(v.residual[v.correction_token]) > 0
            else:
                assert v.correction_kind == "bonus" and float(p_rows[3][v.correction_token]) > 0
    assert taus == {0, 1, 2, 3}


def _one_hot(i: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(i), V).to(torch.float32)


@pytest.mark.parametrize("mismatch", [0, 1, 2, None])
def test_greedy_keeps_the_drafts_up_to_the_first_that_is_not_the_targets_choice(mismatch):
    targets = [1, 2, 3, 0]  # the target's argmax at each position
    drafts = [t if i != mismatch else (t + 1) % V for i, t in enumerate(targets[:3])]
    p = torch.stack([_one_hot(t) for t in targets])
    q = torch.stack([_one_hot(d) for d in drafts])
    v = verify_block(torch.tensor(drafts), q, p, torch.Generator().manual_seed(0), greedy=True)
    kept = 3 if mismatch is None else mismatch
    assert v.accepted_count == kept and v.r is None
    assert v.correction_token == targets[kept]
    assert v.correction_kind == ("bonus" if mismatch is None else "block_resample")
