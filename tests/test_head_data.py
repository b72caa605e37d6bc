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


def test_a_resumed_training_run_ends_with_the_head_of_an_uninterrupted_one(tmp_path, monkeypatch):
    """A run stopped after its first checkpoint and started again with the same settings resumes from
    it (the head, the optimiser, the shuffled order and both random generators) and ends with the
    very head a run that was never stopped ends with: a run of many hours may span sessions."""
    from conftest import tiny_target_folder
    from specviz.engine.models import load_model
    from specviz.training import train_head
    from specviz.training.head_data import Sequence

    torch.set_num_threads(1)
    target = load_model(str(tiny_target_folder(tmp_path / "target", layers=1)))
    generator = torch.Generator().manual_seed(0)
    texts = []
    for i in range(6):  # answers of various lengths, with the target's feature width
        n = 10 + 3 * i
        ids = torch.randint(0, 500, (n,), generator=generator)
        texts.append(Sequence(ids, 4, torch.randn(n - 1, 64, generator=generator).bfloat16(), 1.0))
    cfg = train_head.HeadTrainConfig(
        steps=4, batch=2, eval_every=2, warmup=1, unroll=2, feature_layers=(), train_dtype="float32"
    )
    one_step, stepped = train_head.one_step, []

    def counted(run, cfg, batch, step):
        if step == stop_at[0]:
            raise KeyboardInterrupt  # the session ends in the middle of this step
        stepped.append(step)
        return one_step(run, cfg, batch, step)

    monkeypatch.setattr(train_head, "one_step", counted)
    stop_at = [None]

    def trained(checkpoint: Path):
        run = train_head.start_run(cfg, target, torch.arange(512))
        train_head.resume(run, cfg, checkpoint, log=lambda *_: None)
        train_head.train_steps(run, cfg, texts, lambda _head: {}, checkpoint, log=lambda *_: None)
        return run

    whole = trained(tmp_path / "whole.pt")
    stop_at[0], stepped[:] = 3, []
    with pytest.raises(KeyboardInterrupt):  # stopped after step 2's checkpoint, during step 3
        trained(tmp_path / "parts.pt")
    assert stepped == [1, 2]
    stop_at[0], stepped[:] = None, []
    rest = trained(tmp_path / "parts.pt")  # the same command again
    assert stepped == [3, 4]  # it resumed: steps 1 and 2 were not run again
    assert rest.step == whole.step == 4 and [p["step"] for p in rest.history] == [2, 4]
    for name, value in whole.head.state_dict().items():
        assert torch.equal(value, rest.head.state_dict()[name]), name
