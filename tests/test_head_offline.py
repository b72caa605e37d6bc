"""The shipped draft head on the offline target: packed kernels, honest low precision, the recipe.

- packing: with packed kernels forced (the suite's choice), the float32 target's linears give
  each row the same bits alone or among others, and a verification pass agrees with one-token steps within 1e-4;
- bfloat16: greedy speculative output may differ from the bf16 target alone only at a numerical
  near-tie (float32 top-2 logit gap under specviz.traces.sameness.NEAR_TIE_TOLERANCE);
- the recipe: `python -m specviz train-head` runs end to end on a tiny setting and its head loads.
"""

from __future__ import annotations

import json

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.engine.models import HEAD_DRAFT, load_model
from specviz.traces.sameness import NEAR_TIE_TOLERANCE, compare_runs
from specviz.training.head_data import load_shard

pytestmark = pytest.mark.slow

PROMPTS = [
    "Write a short story about a fox who wants to fly.",
    "Explain how a refrigerator keeps food cold.",
    "What is the difference between weather and climate?",
]


def test_default_target_runs_blocks_and_verification_rows_match_single_steps(offline_target):
    """The default target's linears run the weights as shipped (the native kernel over the GGUF's
    blocks), which give each row the same bits alone or among others; through the whole target
    (attention over different query counts) a verification pass and one-token steps then agree
    within 1e-4 and pick the same argmax."""
    from transformers import DynamicCache

    assert offline_target.kernels_label == "blocks" and offline_target.weights == "shipped"  # the default
    model = offline_target.model
    linear = model.model.layers[0].mlp.up_proj
    x = torch.randn(4, linear.in_features, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        assert all(torch.equal(linear(x)[i], linear(x[i : i + 1])[0]) for i in range(4))
    ids = torch.tensor([[1, 9690, 198, 2683, 457, 253, 1789, 30, 2]])
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(ids[:, :5], past_key_values=cache, use_cache=True)
        together = model(ids[:, 5:], past_key_values=cache, use_cache=True).logits[0]  # [4, V]
        cache = DynamicCache(config=model.config)
        model(ids[:, :5], past_key_values=cache, use_cache=True)
        one = [model(ids[:, 5 + i : 6 + i], past_key_values=cache, use_cache=True).logits[0, 0] for i in range(4)]
    for i in range(4):
        torch.testing.assert_close(together[i], one[i], atol=1e-4, rtol=0)
        assert int(together[i].argmax()) == int(one[i].argmax())


def test_eager_fallback_is_recorded_and_still_exact(offline_target, monkeypatch):
    eager = load_model(dtype="float32", pack=False)
    assert eager.kernels_label.startswith("eager: ")
    spec = speculative_generate(
        PROMPTS[0], target=eager, draft="ngram", options=DecodeOptions(gamma=3, temperature=0, max_new_tokens=16)
    )
    base = autoregressive_generate(PROMPTS[0], target=eager, options=DecodeOptions(temperature=0, max_new_tokens=16))
    assert spec.config["kernels"] == eager.kernels
    assert spec.output_token_ids == base.output_token_ids


@pytest.fixture(scope="module")
def bfloat16_baselines():
    """The bfloat16 target alone on each prompt: what both gammas' speculative runs are compared with."""
    bf16 = load_model(dtype="bfloat16")
    return bf16, [
        autoregressive_generate(p, target=bf16, options=DecodeOptions(temperature=0, max_new_tokens=32))
        for p in PROMPTS
    ]


@pytest.mark.parametrize("gamma", [2, 4])
def test_bfloat16_greedy_differs_only_at_near_ties(offline_target, bfloat16_baselines, gamma):
    bf16, baselines = bfloat16_baselines
    verdicts = []
    for prompt, base in zip(PROMPTS, baselines, strict=True):
        spec = speculative_generate(
            prompt, target=bf16, draft=HEAD_DRAFT, options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=32)
        )
        same = compare_runs(spec, base, offline_target)
        assert same.verdict in ("identical", "near_tie"), same
        if same.verdict == "near_tie":
            assert same.logit_gap <= NEAR_TIE_TOLERANCE
        verdicts.append(same.verdict)
    assert spec.config["dtype"] == "bfloat16"


def test_a_real_greedy_mismatch_is_called_one(offline_target):
    """The sameness check itself: a corrupted output with a large logit gap is a mismatch."""
    base = autoregressive_generate(
        PROMPTS[1], target=offline_target, options=DecodeOptions(temperature=0, max_new_tokens=12)
    )
    spec = speculative_generate(
        PROMPTS[1], target=offline_target, draft="ngram", options=DecodeOptions(temperature=0, max_new_tokens=12)
    )
    assert compare_runs(spec, base, offline_target).verdict == "identical"
    spec.output_token_ids = spec.output_token_ids[:3] + [13] + spec.output_token_ids[4:]  # "." instead
    same = compare_runs(spec, base, offline_target)
    assert same.first_difference == 3 and same.verdict == "mismatch" and same.logit_gap > NEAR_TIE_TOLERANCE


def test_train_head_recipe_smoke(tmp_path):
    """The recipe end to end on a tiny random target of three layers with the offline target's
    tokenizer (its logic, not its scale: the shipped head's run is recorded in
    assets/head_training.json): the text in shards, the subset measured, the steps evaluated, a head
    that loads and drafts."""
    from conftest import tiny_target_folder
    from specviz.drafters import HeadDrafter
    from specviz.engine.draft_head import load_head
    from specviz.training.self_prompts import SCHEMA
    from specviz.training.train_head import main

    target_dir = str(tiny_target_folder(tmp_path / "target", layers=3))
    # A random target writes no whole user turns: its own prompts are given, as a run that wrote them
    # before would have cached them (writing them is tests/test_self_prompts.py's).
    own = ["Tell me about the moon tonight.", "Write a poem about rain.", "How do bees make honey?", "Say hi."]
    cache = {"schema": SCHEMA, "target": target_dir, "seed": 0, "max_tokens": 64, "batch": 8, "batches": 1}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "self-prompts-0.json").write_text(json.dumps({**cache, "prompts": own}))
    argv = ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "head"), "--history", str(tmp_path / "h.json")]
    # Small everywhere: 4 pool and 4 own prompts answered in 8 tokens, two training steps, evaluated after each.
    argv += ["--prompts", "4", "--heldout", "4", "--new-tokens", "8", "--gen-batch", "8", "--steps", "2"]
    argv += ["--batch", "4", "--eval-every", "1", "--subset", "2048", "--unroll", "2", "--self-prompts", "4"]
    argv += ["--target", target_dir, "--feature-layers", "0,1", "--gen-dtype", "float32"]
    assert main(argv) == 0
    history = json.loads((tmp_path / "h.json").read_text())
    assert history["schema"] == "specviz.head_training/1"
    assert history["data"]["answers"] == (4 + 4) * 2  # pool and own prompts, each greedy and sampled
    shards = sorted(p.name for p in (tmp_path / "data").glob("*-0.pt"))
    assert "self-greedy-0.pt" in shards and "self-sampled-1-0.pt" in shards
    assert "bench-greedy-0.pt" in shards and "bench-sampled-0.pt" in shards
    answered = load_shard(tmp_path / "data" / "self-greedy-0.pt")
    target = load_model(target_dir)
    assert [own[i] in target.tokenizer.decode(s.ids[: s.start]) for i, s in enumerate(answered)] == [True] * 4
    written = load_shard(tmp_path / "data" / "heldout-greedy-0.pt")[0]
    assert written.layer_ids == (0, 1) and written.layers.shape == (written.features.shape[0], 2, 64)
    bench = history["history"][-1]["bench_prompts"]
    assert len(bench["alpha_by_position"]) == 4 and 0 <= bench["alpha_by_position"][0] <= 1
    assert [p["step"] for p in history["history"]] == [0, 1, 2]
    assert len(history["history"][-1]["alpha_by_position"]) == 4
    subset = history["subset"]
    assert subset["chosen"] == 2048 and subset["chosen_by"] == "the recipe's setting"
    assert [c["size"] for c in subset["candidates"]] == [4096, 8192, 16384, 2048]  # all measured, one kept
    assert all(0 < c["coverage"] < 1 for c in subset["candidates"])
    head = load_head(tmp_path / "head", target.model)
    assert head.cfg.feature_layers == (0, 1) and history["recipe"]["feature_layers"] == [0, 1]
    trace = speculative_generate(
        PROMPTS[0],
        target=target,
        draft=HeadDrafter(head, "smoke"),
        options=DecodeOptions(gamma=2, temperature=1.0, max_new_tokens=8),
    )
    assert trace.summary["new_tokens"] == 8


def test_recipe_refuses_data_written_for_other_prompts(tmp_path, capsys):
    """Shards are reused only for the prompts they answer: held-out text must never turn into
    training text because a later run asked for another number of prompts."""
    from conftest import tiny_target_folder
    from specviz.cli import main

    target_dir = str(tiny_target_folder(tmp_path / "target", layers=3))
    argv = ["train-head", "--data", str(tmp_path), "--new-tokens", "2", "--gen-batch", "8", "--heldout", "2"]
    argv += ["--target", target_dir, "--feature-layers", "0"]
    argv += ["--out", str(tmp_path / "head"), "--history", str(tmp_path / "h.json"), "--steps", "0"]
    argv += ["--subset", "2048", "--self-prompts", "0", "--gen-dtype", "float32"]
    assert main(argv + ["--prompts", "8"]) == 0
    capsys.readouterr()
    assert main(argv + ["--prompts", "6"]) == 2  # the same folder, a batch of other prompts
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "greedy-0.pt holds answers to other prompts" in err
    assert "Traceback" not in err
    assert main(argv + ["--prompts", "8", "--feature-layers", "1"]) == 2  # text written for a head reading layer 0
    err = capsys.readouterr().err
    assert "does not hold the outputs of decoder layers [1]" in err and "Traceback" not in err
