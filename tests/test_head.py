"""The draft head on tiny random Llamas: training sees what drafting sees, features are the
target's own, greedy output is unchanged and sampling keeps the target's distribution."""

from __future__ import annotations

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter
from specviz.engine.draft_head import DraftHead, HeadCache, head_config_for, init_from_target, load_head
from specviz.engine.toy import tiny_llama
from specviz.labs.lab import run_lab
from specviz.training.head_unroll import unrolled

ALPHA_LEVEL = 0.001  # see tests/test_lab.py

VOCAB = 24
SUBSET = torch.tensor([0, 1, 2, 3, 5, 7, 8, 11, 13, 17, 19, 23])  # half the vocabulary: q is 0 elsewhere
PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]
TRAINED_SUBSET = torch.tensor([t for t in range(VOCAB) if t not in (21, 22)])  # q is 0 for two tokens


def random_head(target, subset=SUBSET, seed: int = 0, scale: float = 0.3, feature_layers=(), depth=1) -> DraftHead:
    """A head initialised as the recipe does, then moved randomly so it drafts varied tokens."""
    torch.manual_seed(seed)
    head = DraftHead(head_config_for(target.model, len(subset), target.name, feature_layers, depth), subset)
    init_from_target(head, target.model)
    with torch.no_grad():
        for p in head.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * scale * p.std().clamp(min=0.05))
    return head.attach(target.model).eval()


@pytest.fixture(scope="module")
def target():
    return tiny_llama(vocab_size=VOCAB, seed=5, init_scale=20.0)


@pytest.fixture(scope="module")
def trained_head(target):
    """A head trained for 150 steps with the recipe's own loss on text the tiny target wrote.
    Training must raise alpha well above the untrained head's, or the loss is wrong."""
    from specviz.training.head_data import Sequence
    from specviz.training.head_eval import HeldOutText
    from specviz.training.head_unroll import head_loss, pad_batch
    from specviz.training.train_head import HeadTrainConfig

    def written(seed: int) -> Sequence:
        prompt = torch.randint(0, VOCAB, (6,), generator=torch.Generator().manual_seed(seed)).tolist()
        out = autoregressive_generate(
            prompt, target=target, options=DecodeOptions(temperature=1.0, max_new_tokens=30, seed=seed)
        )
        ids = torch.tensor(prompt + out.output_token_ids)
        with torch.inference_mode():
            feats = target.model.model(input_ids=ids[None]).last_hidden_state[0, :-1].clone()
        return Sequence(ids=ids, start=len(prompt), features=feats, temperature=1.0)

    train_seqs = [written(s) for s in range(48)]
    # Measured on training text: a tiny random target is too chaotic to generalise from 48 answers,
    # but fitting them proves the loss and its gradient drive q towards p at both depths.
    held = HeldOutText(train_seqs[:8], "cpu", positions=2)
    head = random_head(target, subset=TRAINED_SUBSET, scale=0.0).train()
    before = held.measure(head)["alpha_by_position"]
    cfg = HeadTrainConfig(unroll=2, noise=0.0)
    optim = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=5e-3)
    gen = torch.Generator().manual_seed(0)
    for step in range(300):
        batch = [train_seqs[(step * 8 + i) % len(train_seqs)] for i in range(8)]
        loss, _ = head_loss(head, *pad_batch(batch, "cpu"), cfg, gen)
        optim.zero_grad()
        loss.backward()
        optim.step()
    after = held.measure(head)["alpha_by_position"]
    return head.eval(), before, after


def test_training_raises_alpha(trained_head):
    _, before, after = trained_head
    assert after[0] > before[0] + 0.15, (before, after)
    assert after[1] > before[1] + 0.1, (before, after)


class RecordingHeadDrafter(HeadDrafter):
    """Keeps a copy of every feature the decoder hands over, and where each hand-over starts."""

    def start(self, *args):
        super().start(*args)
        self.handed, self.starts = [], []

    def observe(self, features, first_position):
        self.handed.append(features.clone())
        self.starts.append(first_position)
        super().observe(features, first_position)
        self.seen_features = self.features.clone()


@pytest.mark.parametrize(("feature_layers", "depth"), [((), 1), ((0,), 1), ((), 2)])
def test_unrolled_training_equals_chained_drafting(target, feature_layers, depth):
    """Step k of training at index j must be what drafting computes at draft position k + 1 of a
    chain that started from true features at j - k: otherwise the head learns the wrong task.
    With feature_layers, both read the fused true features and then the head's own f^; with two
    layers, each keeps its own keys."""
    head = random_head(target, feature_layers=feature_layers, depth=depth)
    # float32 rounding grows through two layers and chained steps (up to 3e-4 here); in float64
    # the two paths agree to 1e-13, and a wrong key or mask moves them by far more than 1e-3.
    tol = {"atol": 1e-4 * depth**3, "rtol": 1e-4 * depth**3}
    length = 20
    ids = torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(1))
    feats = torch.randn(1, length - 1, (1 + len(feature_layers)) * target.model.config.hidden_size)
    with torch.no_grad():
        outs = unrolled(head, ids, feats, 3)
        for start in (0, 4, 12):
            cache = HeadCache()
            f, logits = head.step(head.fused(feats[0, : start + 1]), ids[0, 1 : start + 2], 1, cache)
            torch.testing.assert_close(logits[-1], head.lm_head(outs[0][0, start]), **tol)
            for k in (1, 2):
                j = start + k
                f, logits = head.step(f[-1:], ids[0, j + 1 : j + 2], j + 1, cache)
                torch.testing.assert_close(f[-1], outs[k][0, j], **tol)
                torch.testing.assert_close(logits[-1], head.lm_head(outs[k][0, j]), **tol)


# A cached pass and a full pass add the same float32 numbers in another order: 1.2e-5 apart on an
# Intel Xeon (MKL), under 1e-5 on AMD EPYC. A feature of the wrong position or a missed rollback is
# off by the size of the features themselves (about 1 to 10 in this tiny target).
CACHED_VS_FULL = {"atol": 1e-4, "rtol": 1e-4}


def test_features_handed_to_the_head_equal_a_cache_free_full_pass(target):
    drafter = RecordingHeadDrafter(random_head(target), "head")
    trace = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=3, temperature=1.0, max_new_tokens=30)
    )
    assert trace.summary["drafted"] > 0 and trace.summary["accepted"] < trace.summary["drafted"]  # rollbacks ran
    seq = torch.tensor(trace.prompt_token_ids + trace.output_token_ids)
    with torch.inference_mode():
        full = target.model.model(input_ids=seq[None]).last_hidden_state[0]  # [L, D]
    got = drafter.seen_features
    assert got.shape[0] == seq.shape[0] - 1  # every position but the newest, which was never fed
    torch.testing.assert_close(got, full[:-1], **CACHED_VS_FULL)


def test_features_of_earlier_layers_equal_a_cache_free_full_pass(target):
    """A head fusing layer 0 gets that layer's output and the final feature of every position
    still on the text, across rollbacks, as a full pass without a cache computes them."""
    drafter = RecordingHeadDrafter(random_head(target, feature_layers=(0,)), "head")
    trace = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=3, temperature=1.0, max_new_tokens=30)
    )
    assert trace.summary["accepted"] < trace.summary["drafted"]  # rollbacks ran
    seq = torch.tensor(trace.prompt_token_ids + trace.output_token_ids)
    with torch.inference_mode():
        out = target.model.model(input_ids=seq[None], output_hidden_states=True)
    # hidden_states[1] is the output of decoder layer 0; the last is the final-norm feature
    expected = torch.cat([out.hidden_states[1][0], out.last_hidden_state[0]], dim=-1)[:-1]  # [L - 1, 2D]
    assert drafter.handed[0].shape[-1] == 2 * target.model.config.hidden_size
    # Replay the hand-overs as the drafter keeps them: each starts where the kept text ends.
    kept = torch.empty(0, expected.shape[1])
    for features, start in zip(drafter.handed, drafter.starts, strict=True):
        kept = torch.cat([kept[:start], features])
    torch.testing.assert_close(kept, expected, **CACHED_VS_FULL)


def test_a_fused_head_starts_as_the_single_feature_head(target):
    """fuse begins as [0 I]: before training, the earlier layer changes nothing."""
    plain, fused = random_head(target, seed=3), random_head(target, seed=3, feature_layers=(0,))
    fused.fc.load_state_dict(plain.fc.state_dict())
    fused.layers.load_state_dict(plain.layers.state_dict())
    fused.norm.load_state_dict(plain.norm.state_dict())
    with torch.no_grad():
        fused.fuse.weight.zero_()
        fused.fuse.weight[:, -plain.cfg.hidden :] = torch.eye(plain.cfg.hidden)
        f = torch.randn(5, plain.cfg.hidden)
        earlier = 50 * torch.randn(5, plain.cfg.hidden)
        a = plain.step(plain.fused(f), torch.arange(5), 1, HeadCache())[1]
        b = fused.step(fused.fused(torch.cat([earlier, f], -1)), torch.arange(5), 1, HeadCache())[1]
    torch.testing.assert_close(a, b)


def test_greedy_fused_two_layer_head_output_equals_the_target_alone(target):
    base = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=40))
    head = random_head(target, subset=TRAINED_SUBSET, feature_layers=(0,), depth=2, scale=0.05)
    drafter = HeadDrafter(head, "head")
    spec = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=3, temperature=0, max_new_tokens=40)
    )
    assert spec.output_token_ids == base.output_token_ids
    assert spec.summary["drafted"] > 0


def test_greedy_head_output_equals_the_target_alone(target, trained_head):
    base = autoregressive_generate(PROMPT, target=target, options=DecodeOptions(temperature=0, max_new_tokens=40))
    accepted = rejected = 0
    for gamma in (1, 3, 6):
        spec = speculative_generate(
            PROMPT,
            target=target,
            draft=HeadDrafter(trained_head[0], "head"),
            options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=40),
        )
        assert spec.output_token_ids == base.output_token_ids, gamma
        accepted += spec.summary["accepted"]
        rejected += spec.summary["drafted"] - spec.summary["accepted"]
    assert accepted > 0 and rejected > 0  # both paths of the rule ran


def test_head_q_is_zero_outside_its_vocabulary(target):
    trace = speculative_generate(
        PROMPT,
        target=target,
        draft=HeadDrafter(random_head(target), "head"),
        options=DecodeOptions(gamma=4, temperature=1.0, max_new_tokens=30, seed=2),
    )
    allowed = set(SUBSET.tolist())
    drafted = [d for it in trace.iterations for d in it["drafts"]]
    assert drafted and all(d["token_id"] in allowed for d in drafted)
    assert all(tid in allowed for d in drafted for tid, _ in d["q_top"])
    # Tokens outside the subset still appear: the residual max(0, p - q) holds them.
    assert set(trace.output_token_ids) - allowed


def test_head_keeps_the_target_distribution_over_three_tokens(target, trained_head):
    """chi-square over the first three tokens: the first comes from the prefill pass, the next two
    from the head's drafts, accepted or resampled (and the bonus when both pass)."""
    drafter = HeadDrafter(trained_head[0], "head")
    result = run_lab(PROMPT, target=target, draft=drafter, k=3, n=700, gamma=2, temperature=1.0, seed=0)
    assert result.impossible_spec == 0
    assert result.spec_test.p_value > ALPHA_LEVEL, result.spec_test
    spec = speculative_generate(
        PROMPT, target=target, draft=drafter, options=DecodeOptions(gamma=2, temperature=1.0, max_new_tokens=40)
    )
    assert 0 < spec.summary["accepted"] < spec.summary["drafted"]  # accept and reject both ran


@pytest.mark.parametrize(("feature_layers", "depth"), [((), 1), ((0,), 2)])
def test_saved_head_loads_with_the_same_weights(target, tmp_path, feature_layers, depth):
    head = random_head(target, feature_layers=feature_layers, depth=depth)
    head.save(tmp_path / "h")
    loaded = load_head(tmp_path / "h", target.model)
    assert torch.equal(loaded.subset, head.subset)
    assert loaded.cfg == head.cfg
    x = torch.randn(2, (1 + len(feature_layers)) * target.model.config.hidden_size)
    with torch.no_grad():
        a = head.step(head.fused(x), torch.tensor([1, 2]), 1, HeadCache())[1]
        b = loaded.step(loaded.fused(x), torch.tensor([1, 2]), 1, HeadCache())[1]
    torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)  # fp16 on disk


def test_a_feature_layer_the_target_lacks_is_refused(target):
    with pytest.raises(ValueError, match="choose indices from 0 to 0"):
        head_config_for(target.model, 8, "tiny", feature_layers=(1,))


def test_a_head_for_another_target_is_refused(target, tmp_path):
    from specviz.errors import ModelError

    random_head(target).save(tmp_path / "h")
    other = tiny_llama(vocab_size=VOCAB, seed=6, hidden=48)
    with pytest.raises(ModelError, match="only reads the features of its own target"):
        load_head(tmp_path / "h", other.model)
