"""The roofline's arithmetic (specviz.labs.roofline): the bytes a step reads, counted from the model
as its kernels hold it, and the share of the bandwidth a decode streams."""

from __future__ import annotations

import pytest
from torch import nn

from specviz.engine.packing import PACKED, KernelLinear
from specviz.labs import roofline


def _tied_lm() -> nn.Module:
    lm = nn.Module()
    lm.embed = nn.Embedding(100, 8)  # 3200 bytes, a step reads one row of it...
    lm.body = nn.Linear(8, 16, bias=False)  # 512 bytes
    lm.norm = nn.LayerNorm(16)  # 2 x 64 bytes
    lm.head = nn.Linear(8, 100, bias=False)
    lm.head.weight = lm.embed.weight  # ...but the tied LM head reads all of it: 3200 bytes, counted once
    return lm


def test_a_step_reads_every_linear_and_norm_once_and_one_row_of_the_embedding():
    assert roofline.step_bytes(_tied_lm()) == 512 + 128 + 3200


def test_a_packed_linear_counts_the_weight_it_holds():
    lm = _tied_lm()
    lm.body = KernelLinear(lm.body)
    lm.body.use(PACKED, PACKED)  # the weight as loaded is freed: a meta tensor of the same shape
    assert lm.body.weight.is_meta
    assert roofline.step_bytes(lm) == 512 + 128 + 3200


def test_the_fraction_is_bytes_times_rate_over_bandwidth():
    assert roofline.roofline_fraction(10.0, 500_000_000, 25e9) == pytest.approx(0.2)
    line = roofline.describe("target alone", 10.0, 500_000_000, 25e9)
    assert "500 MB a step" in line and "5.0 GB/s" in line and "0.20 of the roofline" in line
    assert "at the roofline: 20.0 ms" in line and "measured: 100.0 ms" in line


def test_the_bandwidth_is_measured_on_a_real_sum():
    bandwidth = roofline.measured_bandwidth(nbytes=4 * 2**20, reps=3)
    assert bandwidth > 0


def test_a_draft_reads_the_weights_of_the_drafter_its_name_builds():
    from specviz.engine import toy

    target, draft = toy.toy_pair()
    assert roofline.draft_module(draft, target) is draft.model
    assert roofline.draft_module("self", target) is target.model
    assert roofline.draft_module("ngram", target) is None


def test_a_step_beside_a_sum_shares_its_moment(monkeypatch):
    from types import SimpleNamespace

    from specviz.engine import kernels, toy
    from specviz.engine.packing import kernel_linears

    target, _ = toy.toy_pair()
    passes = []
    monkeypatch.setattr(
        kernels, "context_passes", lambda model, lean: (lambda: passes.append("prepare"), passes.append)
    )
    ticks = iter(range(10**6))  # a clock that moves 1 ms a reading: every step and every sum take 1 ms
    monkeypatch.setattr(roofline, "time", SimpleNamespace(perf_counter=lambda: next(ticks) / 1e3))
    found = roofline.step_beside_sum(target, pairs=5, nbytes=8 * 2**20)
    assert passes == ["prepare"] + [1] * 6  # a warm-up, then one step a pair
    assert found["pairs"] == 5 and found["step_ms"] == 1.0
    # The sum read the very bytes the step reads, in the same time: a share of exactly 1.
    assert found["summed"] == "the step's own weights" and found["fraction"] == 1.0
    assert found["bandwidth_gb_s"] == round(roofline.step_bytes(target.model) / 1e-3 / 1e9, 2)
    # oneDNN's packed layouts are opaque: the sum then reads a fresh tensor of the bytes asked for.
    for linear in kernel_linears(target.model)[0]:
        linear.use(PACKED, PACKED)
    packed = roofline.step_beside_sum(target, pairs=3, nbytes=8 * 2**20)
    assert packed["summed"] == "a fresh 8 MiB tensor"
    assert packed["fraction"] == pytest.approx(roofline.step_bytes(target.model) / (8 * 2**20), abs=1e-3)  # rounded
