"""The draft-training recipe, run tiny: a random Llama target built here with the offline
target's tokenizer, a few steps, and a folder that loads and drafts exactly."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import tiny_target_folder
from specviz.config import DecodeOptions
from specviz.training.train_draft import distill_loss


def test_distill_loss_is_cross_entropy_and_smallest_at_p():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(5, 7), -1)  # [N, V]: top-k with k = V covers all the mass
    top_probs, top_ids = torch.topk(p, 7, dim=-1)
    logits = torch.randn(5, 7)
    expected = -(p * torch.log_softmax(logits, -1)).sum(-1).mean()
    assert torch.allclose(distill_loss(logits, top_ids, top_probs), expected, atol=1e-5)
    at_p = distill_loss(p.log(), top_ids, top_probs)  # q = p: the cross-entropy is p's entropy, its minimum
    assert at_p < distill_loss(logits, top_ids, top_probs)
    assert torch.allclose(at_p, -(p * p.log()).sum(-1).mean(), atol=1e-5)


def test_distill_loss_other_bucket():
    # Only the top 2 of 4 tokens kept: the rest is one bucket, matched by q's remaining mass.
    p = torch.tensor([[0.5, 0.3, 0.1, 0.1]])
    top_probs, top_ids = torch.topk(p, 2, dim=-1)
    q_logits = p.log()
    expected = -(
        0.5 * torch.log(torch.tensor(0.5)) + 0.3 * torch.log(torch.tensor(0.3)) + 0.2 * torch.log(torch.tensor(0.2))
    )
    assert torch.allclose(distill_loss(q_logits, top_ids, top_probs), expected, atol=1e-5)


def test_train_draft_tiny_end_to_end(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.engine.models import load_model
    from specviz.training.train_draft import main

    target_dir = tiny_target_folder(tmp_path / "target")
    out, history = tmp_path / "draft", tmp_path / "history.json"
    argv = ["--target", str(target_dir), "--out", str(out), "--history", str(history)]
    argv += ["--hidden", "32", "--layers", "1", "--intermediate", "64", "--sequences", "4", "--heldout", "2"]
    argv += ["--new-tokens", "6", "--gen-batch", "2", "--steps", "3", "--eval-every", "1", "--batch", "2"]
    argv += ["--top-k", "8", "--warmup", "1"]
    assert main(argv) == 0

    # A standard transformers folder: tied embeddings, half precision, the target's tokenizer.
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.tie_word_embeddings and model.config.hidden_size == 32
    assert model.dtype in (torch.float16, torch.bfloat16)
    assert AutoTokenizer.from_pretrained(out).get_vocab() == AutoTokenizer.from_pretrained(target_dir).get_vocab()

    record = json.loads(history.read_text())
    assert [h["step"] for h in record["history"]] == [0, 1, 2, 3]
    assert all(0.0 <= h["alpha"] <= 1.0 and 0.0 <= h["greedy_agreement"] <= 1.0 for h in record["history"])
    assert record["data"]["answers"] == 4 and record["training_seconds"] >= 0

    # The decoder takes it as a draft, and greedy output stays the target's own.
    target = load_model(str(target_dir))
    draft = load_model(str(out), dtype="float32")
    ids = list(range(5, 15))
    for gamma in (1, 3):
        spec = speculative_generate(
            ids, target=target, draft=draft, options=DecodeOptions(gamma=gamma, temperature=0, max_new_tokens=10)
        )
        base = autoregressive_generate(ids, target=target, options=DecodeOptions(temperature=0, max_new_tokens=10))
        assert spec.output_token_ids == base.output_token_ids


@pytest.mark.parametrize("n", [10, 984])
def test_prompts_are_distinct(n):
    from specviz.training.train_draft import build_prompts

    prompts = build_prompts(n, seed=0)
    assert len(prompts) == len(set(prompts)) == n
    assert build_prompts(n, seed=0) == prompts  # fixed seed, fixed set
