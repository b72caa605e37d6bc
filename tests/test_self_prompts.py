"""Prompts the target writes itself (specviz.training.self_prompts): whole user turns, distinct, never a
benchmark prompt, the same for the same seed, and cached so a resumed recipe reuses them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from specviz.errors import SpecvizError
from specviz.training.self_prompts import user_turn_prefix, write_self_prompts

pytestmark = pytest.mark.slow


class WordWriter:
    """A stand-in writer for the tests of the cache, the seeds and the resume: its `generate` draws
    each message's words from torch's global generator, as transformers' sampling does (the recipe
    seeds it per batch), over the offline tokenizer; some messages run past max_tokens (no
    end-of-turn: not a whole turn) or are too short. The real target writes whole turns in the first test."""

    WORDS = " apple river stone cloud lamp garden music window paper bridge candle forest".split()

    def __init__(self, target):
        self.name, self.tokenizer, self.eos_token_id = "word-writer", target.tokenizer, target.eos_token_id
        self.words = [target.tokenizer.encode(" " + w, add_special_tokens=False)[0] for w in self.WORDS]
        self.model = self

    def generate(self, input_ids, attention_mask, generation_config):
        rows = []
        for _ in range(input_ids.shape[0]):
            n = int(torch.randint(3, generation_config.max_new_tokens + 8, (1,)))  # > max_new_tokens: cut off
            words = torch.tensor(self.words)[torch.randint(len(self.words), (generation_config.max_new_tokens,))]
            words[n:] = self.eos_token_id  # the turn ends after n words (never, when n is past the end)
            rows.append(words)
        return torch.cat([input_ids, torch.stack(rows)], dim=1)  # [B, P + G]

    @property
    def device(self):
        return torch.device("cpu")


def test_prompts_are_whole_distinct_turns_and_cached(offline_target, tmp_path):
    prompts = write_self_prompts(offline_target, 6, 0, tmp_path, exclude=set(), batch=8, log=lambda _m: None)
    assert len(prompts) == 6 and len({p.lower() for p in prompts}) == 6
    assert all(len(p.split()) >= 4 and p == p.strip() for p in prompts)
    assert all("<|im_end|>" not in p and "<|im_start|>" not in p for p in prompts)
    record = json.loads((tmp_path / "self-prompts-0.json").read_text(encoding="utf-8"))
    assert record["prompts"] == prompts and record["target"] == offline_target.name

    def refuse(*_a, **_k):
        raise AssertionError("cached prompts must not be written again")

    model = offline_target.model
    original, model.generate = model.generate, refuse
    try:
        assert write_self_prompts(offline_target, 4, 0, tmp_path, exclude=set(), batch=8) == prompts[:4]
    finally:
        model.generate = original


def test_same_seed_same_prompts_and_excluded_ones_never_come_back(offline_target, tmp_path):
    writer = WordWriter(offline_target)
    first = write_self_prompts(writer, 3, 1, tmp_path / "a", exclude=set(), batch=8, log=lambda _m: None)
    again = write_self_prompts(writer, 3, 1, tmp_path / "b", exclude=set(), batch=8, log=lambda _m: None)
    assert again == first
    assert write_self_prompts(writer, 3, 2, tmp_path / "d", exclude=set(), batch=8, log=lambda _m: None) != first
    banned = {first[0].upper()}  # case does not hide a duplicate
    other = write_self_prompts(writer, 3, 1, tmp_path / "c", exclude=banned, batch=8, log=lambda _m: None)
    assert first[0] not in other and other[:2] == first[1:3]


def test_a_tokenizer_without_chat_template_gets_a_clear_error():
    with pytest.raises(SpecvizError, match="--self-prompts 0"):
        user_turn_prefix(SimpleNamespace(chat_template=None))


def test_prefix_ends_where_the_user_message_begins(offline_target):
    tokenizer = offline_target.tokenizer
    text = tokenizer.decode(user_turn_prefix(tokenizer))
    assert text.endswith("<|im_start|>user\n") and "<|im_start|>system" in text


def test_an_interrupted_run_resumes_at_its_next_batch_with_the_same_prompts(offline_target, tmp_path):
    writer = WordWriter(offline_target)
    quiet = {"exclude": set(), "batch": 4, "log": lambda _m: None, "max_tokens": 8}
    whole = write_self_prompts(writer, 5, 2, tmp_path / "whole", **quiet)
    model = writer.model
    original, calls = model.generate, []

    def one_batch_then_stop(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt  # the session ends mid-run
        return original(*args, **kwargs)

    model.generate = one_batch_then_stop
    try:
        with pytest.raises(KeyboardInterrupt):
            write_self_prompts(writer, 5, 2, tmp_path / "cut", **quiet)
    finally:
        model.generate = original
    saved = json.loads((tmp_path / "cut" / "self-prompts-2.json").read_text(encoding="utf-8"))
    assert saved["batches"] == 1 and whole[: len(saved["prompts"])] == saved["prompts"]
    calls.clear()
    model.generate = lambda *a, **k: (calls.append(1), original(*a, **k))[1]
    try:
        resumed = write_self_prompts(writer, 5, 2, tmp_path / "cut", **quiet)
    finally:
        model.generate = original
    assert resumed == whole
    assert len(calls) == json.loads((tmp_path / "whole" / "self-prompts-2.json").read_text())["batches"] - 1
