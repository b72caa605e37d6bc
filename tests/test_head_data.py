"""The draft head's training text (specviz.training.head_data): shards written once, whole, and read
back instead of written again, so a run of many hours resumes where it stopped; and the training's
checkpoint (specviz.training.train_head), replaced whole."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specviz.training.head_data import write_answers

pytestmark = pytest.mark.slow

PROMPTS = ["Name a colour.", "Count to three.", "Say hello in French."]


def test_text_written_without_keeping_it_is_read_back_whole_and_not_written_again(offline_target, tmp_path):
    quiet = {"log": lambda _m: None, "layer_ids": (1,)}
    assert write_answers(offline_target, PROMPTS, 0.0, 6, 2, 0, tmp_path, "greedy", keep=False, **quiet) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["greedy-0.pt", "greedy-1.pt"]  # no .partial left
    model = offline_target.model
    original = model.generate
    model.generate = lambda *a, **k: (_ for _ in ()).throw(AssertionError("a written shard was written again"))
    try:
        kept = write_answers(offline_target, PROMPTS, 0.0, 6, 2, 0, tmp_path, "greedy", **quiet)
    finally:
        model.generate = original
    assert len(kept) == 3 and all(s.layer_ids == (1,) for s in kept)
    for s in kept:
        assert s.features.shape == (s.ids.shape[0] - 1, model.config.hidden_size)  # [L - 1, D]
        assert s.layers.shape == (s.ids.shape[0] - 1, 1, model.config.hidden_size)  # [L - 1, 1, D]
    again = write_answers(offline_target, PROMPTS, 0.0, 6, 2, 0, tmp_path / "fresh", "greedy", **quiet)
    assert all(torch.equal(a.ids, b.ids) for a, b in zip(kept, again, strict=True))


def test_a_shard_is_read_back_mapped_from_its_file_not_copied_into_memory(offline_target, tmp_path):
    from specviz.training.head_data import load_shard

    write_answers(offline_target, PROMPTS[:2], 0.0, 4, 2, 0, tmp_path, "greedy", log=lambda _m: None, keep=False)
    shard = tmp_path / "greedy-0.pt"
    first, again = load_shard(shard), load_shard(shard)
    assert all(torch.equal(a.features, b.features) for a, b in zip(first, again, strict=True))
    maps = Path("/proc/self/maps")
    if maps.is_file():  # Linux: the shard's file is mapped into this process while its sequences live
        assert str(shard.resolve()) in maps.read_text()


def test_text_written_in_parts_is_the_text_written_whole_shard_for_shard(offline_target, tmp_path):
    """The recipe writes a group part by part (greedy, then sampled) so that a stopped run leaves text at
    both temperatures; sampled at T=1, each part must draw with the seed its shard has in the whole."""
    prompts = [*PROMPTS, "Name a fruit."]
    quiet = {"log": lambda _m: None}
    whole = write_answers(offline_target, prompts, 1.0, 6, 2, 3, tmp_path / "whole", "sampled-1", **quiet)
    parts = write_answers(offline_target, prompts[:2], 1.0, 6, 2, 3, tmp_path / "parts", "sampled-1", **quiet)
    parts += write_answers(offline_target, prompts[2:], 1.0, 6, 2, 3, tmp_path / "parts", "sampled-1", first=2, **quiet)
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["sampled-1-0.pt", "sampled-1-1.pt"]
    assert all(torch.equal(a.ids, b.ids) for a, b in zip(whole, parts, strict=True))
    with pytest.raises(ValueError, match="multiple of the batch"):
        write_answers(offline_target, prompts[1:], 1.0, 6, 2, 3, tmp_path / "odd", "sampled-1", first=1, **quiet)


def test_a_run_killed_while_saving_its_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    """The training's checkpoint is written beside and renamed over the old one: a save cut short
    (the session ended mid-write) leaves the last whole checkpoint to resume from."""
    import random
    from types import SimpleNamespace

    from specviz.training import train_head

    head = torch.nn.Linear(4, 4)
    optim = torch.optim.AdamW(head.parameters())
    run = SimpleNamespace(
        head=head, optim=optim, size=8, history=[{"step": 1}], order=[3, 1], step=1, train_seconds=1.0,
        order_rng=random.Random(0), generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    cfg = train_head.HeadTrainConfig()
    checkpoint = tmp_path / "head-checkpoint.pt"
    train_head.save_checkpoint(run, cfg, checkpoint)
    real_save = torch.save

    def killed_mid_write(obj, path):
        Path(path).write_bytes(b"PK\x03\x04 half a zip")  # what a kill leaves of a save in progress
        raise KeyboardInterrupt

    run.step, run.history = 2, [{"step": 1}, {"step": 2}]
    monkeypatch.setattr(train_head.torch, "save", killed_mid_write)
    with pytest.raises(KeyboardInterrupt):
        train_head.save_checkpoint(run, cfg, checkpoint)
    monkeypatch.setattr(train_head.torch, "save", real_save)
    state = torch.load(checkpoint, weights_only=True)
    assert state["step"] == 1 and state["history"] == [{"step": 1}]
    train_head.save_checkpoint(run, cfg, checkpoint)  # the next save replaces it whole
    assert torch.load(checkpoint, weights_only=True)["step"] == 2
    assert not checkpoint.with_suffix(".pt.partial").exists()
