"""Kernels chosen by measurement (specviz.engine.kernels, specviz.engine.packing).

- each kernel computes the linear, and a call runs the kernel set for its row count;
- the choice is the fastest candidate of each group and shape as measured (a fake pass whose
  time depends on the kernels in use makes any other choice fail), recorded with its timings,
  cached per machine and model, and forced by SPECVIZ_KERNELS;
- one copy of the weights: a second layout only where it saves 10% of a step, and the weight as
  loaded freed where no kernel reads it (a tied embedding kept);
- exactness with mixed kernels (one row eager, several rows packed) on the offline target: greedy
  output equals the target alone's except at a float32 near-tie (top-2 gap < 1e-3), counted.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from specviz.config import DecodeOptions
from specviz.engine import kernels
from specviz.engine.packing import EAGER, NATIVE, PACKED, PACKED_ONE_ROW, KernelLinear, kernel_linears


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8, bias=False))


@pytest.mark.parametrize("one_row", [EAGER, PACKED, PACKED_ONE_ROW])
@pytest.mark.parametrize("many_rows", [EAGER, PACKED])
def test_every_kernel_computes_the_linear(one_row, many_rows):
    reference = nn.Linear(16, 32)
    linear = KernelLinear(reference)
    linear.use(one_row, many_rows)
    x = torch.randn(5, 16)
    with torch.no_grad():
        torch.testing.assert_close(linear(x), reference(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(linear(x[:1]), reference(x[:1]), atol=1e-5, rtol=1e-5)
    assert set(linear.layouts) == {one_row, many_rows} - {EAGER}  # unused layouts are freed


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="this CPU has no native bfloat16")
def test_bfloat16_weights_pack_where_the_cpu_computes_bfloat16():
    model = _mlp().to(torch.bfloat16)
    model_weights = [model[0].weight.detach().clone()]
    linears, reason = kernel_linears(model)
    assert reason is None and len(linears) == 2
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    with torch.no_grad():
        expected = model(x).float()
        for linear in linears:
            linear.use(PACKED, PACKED)
        assert linears[0].weight.is_meta  # one copy: the packed bfloat16 layout
        assert torch.equal(linears[0].weight_as_loaded(), model_weights[0])  # given back exactly
        torch.testing.assert_close(model(x).float(), expected, atol=3e-2, rtol=3e-2)  # bfloat16's own rounding


def test_a_call_runs_the_kernel_of_its_row_count():
    linear = KernelLinear(nn.Linear(16, 32))
    linear.use(EAGER, PACKED)
    linear.layouts[PACKED] = torch.ops.mkldnn._reorder_linear_weight(torch.zeros(32, 16))  # packed: all zeros
    x = torch.randn(3, 16)
    with torch.no_grad():
        assert linear(x[:1]).abs().sum() > 0  # one row: eager, the real weight
        assert torch.equal(linear(x), linear.bias.expand(3, -1))  # three rows: the (zeroed) packed layout


def test_a_linear_keeps_only_what_its_kernels_read():
    """One copy of the weights: packed for both shapes frees the weight as loaded (a meta tensor of its
    shape), a kernel pair that reads it keeps it, and so does a weight another module holds (tied)."""
    packed = KernelLinear(nn.Linear(16, 32))
    packed.use(PACKED, PACKED)
    assert packed.weight.is_meta and packed.weight.shape == (32, 16) and set(packed.layouts) == {PACKED}
    with torch.no_grad():
        assert packed(torch.randn(3, 16)).shape == (3, 32)  # still computes, from its packed layout
    with pytest.raises(RuntimeError, match="load the model again"):
        packed.use(EAGER, PACKED)
    with pytest.raises(RuntimeError, match="load the model again"):
        packed.use(PACKED_ONE_ROW, PACKED)
    loaded = nn.Linear(16, 32)
    back = KernelLinear(loaded)
    back.use(PACKED, PACKED)
    assert back.weight.is_meta and torch.equal(back.weight_as_loaded(), loaded.weight.detach())  # exactly
    mixed = KernelLinear(nn.Linear(16, 32))
    mixed.use(EAGER, PACKED)
    assert not mixed.weight.is_meta
    tied = KernelLinear(nn.Linear(16, 32))
    tied.use(PACKED, PACKED, shared=True)
    assert not tied.weight.is_meta


def test_choosing_frees_the_weights_as_loaded_but_not_a_tied_embedding(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_KERNELS", "packed")
    embed = nn.Embedding(8, 16)
    model = nn.Sequential(embed, nn.Linear(16, 16), nn.Linear(16, 8, bias=False))
    model[2].weight = embed.weight  # the LM head tied to the embedding, as SmolLM2's
    kernels.choose("m", tmp_path / "kernels.json", model, lambda: model[2], lambda rows: None, (3,))
    assert model[1].weight.is_meta  # body: its packed layout is its one copy
    assert model[2].weight is embed.weight and not embed.weight.is_meta  # the embedding still looks tokens up


def test_a_second_layout_is_kept_only_when_it_pays_for_its_memory():
    timings = {"one_row": {"body=eager": 50.0, "body=packed": 80.0, "head=packed1": 45.4, "head=packed": 48.0}}
    record = {
        "one_row": {"body": EAGER, "head": PACKED_ONE_ROW},
        "many_rows": {"body": PACKED, "head": PACKED},
        "timings_ms": timings,
    }
    settled = kernels.one_layout_unless_it_pays(record)
    assert settled["one_row"] == {"body": EAGER, "head": PACKED}  # body saves 38% with eager; head only 5%
    assert settled["many_rows"] == record["many_rows"] and record["one_row"]["head"] == PACKED_ONE_ROW
    assert kernels.SECOND_LAYOUT_MIN_SAVING == 0.10


def test_one_layout_serves_both_shapes_when_the_one_row_kernel_is_close_on_several_rows():
    timings = {  # one thread, AMD EPYC: native wins one row by far, packed several rows by 3%
        "one_row": {"body=native": 39.9, "body=packed": 61.9},
        "many_rows": {"body=native": 121.0, "body=packed": 117.6, "head=packed": 100.0, "head=native": 130.0},
    }
    record = {
        "one_row": {"body": NATIVE, "head": NATIVE},
        "many_rows": {"body": PACKED, "head": PACKED},
        "timings_ms": timings,
    }
    settled = kernels.one_layout_unless_it_pays(record)
    assert settled["one_row"]["body"] == settled["many_rows"]["body"] == NATIVE  # 3% more on several rows
    # head: native costs 30% more on several rows and packed's one row was not timed: two layouts stay
    assert settled["one_row"]["head"] == NATIVE and settled["many_rows"]["head"] == PACKED


def test_packing_refuses_what_it_cannot_pack():
    assert kernel_linears(_mlp().to(torch.float16))[1] == "torch.float16 weights (packing is for float32 and bfloat16)"
    assert kernel_linears(nn.Sequential(nn.ReLU())) == ([], "no weights")


def _fake_pass(model: nn.Module, cost_ms: dict, clock):
    """A pass that moves the measuring clock on by what its kernels cost: cost_ms[(shape, linear
    index, kernel)] milliseconds."""

    def run(rows: int) -> None:
        linears = [m for m in model.modules() if isinstance(m, KernelLinear)]  # swapped in by choose()
        shape = "one_row" if rows == 1 else "many_rows"
        kernel = [lin.one_row if rows == 1 else lin.many_rows for lin in linears]
        clock.advance(sum(cost_ms[(shape, i, k)] for i, k in enumerate(kernel)) / 1e3)

    return run


@pytest.fixture
def measuring(tmp_path, monkeypatch, fake_clock):
    """The measuring clock is fake: a fake pass costs what the test says, whatever the machine's speed."""
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_KERNELS", "measure")
    monkeypatch.setattr(kernels, "MEASURE_REPS", 3)
    monkeypatch.setattr(kernels, "time", fake_clock)
    return tmp_path


def test_the_measured_fastest_kernel_is_chosen_per_group_and_shape(measuring, monkeypatch, fake_clock):
    model = _mlp()
    head = model[2]  # the output projection: its own group
    # body (layer 0): eager wins one row, packed several; head (layer 2): packed1 wins one row, eager several
    cost = {
        ("one_row", 0, EAGER): 1, ("one_row", 0, PACKED): 6, ("one_row", 0, PACKED_ONE_ROW): 6,
        ("one_row", 1, EAGER): 8, ("one_row", 1, PACKED): 8, ("one_row", 1, PACKED_ONE_ROW): 1,
        ("many_rows", 0, EAGER): 8, ("many_rows", 0, PACKED): 1,
        ("many_rows", 1, EAGER): 1, ("many_rows", 1, PACKED): 8,
        ("one_row", 0, NATIVE): 7, ("one_row", 1, NATIVE): 7, ("many_rows", 0, NATIVE): 7, ("many_rows", 1, NATIVE): 7,
    }  # fmt: skip
    cache = measuring / "kernels.json"
    record = kernels.choose("test-model", cache, model, lambda: model[2], _fake_pass(model, cost, fake_clock), (3, 5))
    assert record["one_row"] == {"body": EAGER, "head": PACKED_ONE_ROW}
    assert record["many_rows"] == {"body": PACKED, "head": EAGER}
    assert record["source"] == "measured at load"
    timings = record["timings_ms"]
    candidates = (EAGER, PACKED, PACKED_ONE_ROW, NATIVE)  # native too: it builds on this project's machines
    assert set(timings["one_row"]) == {f"{g}={k}" for g in ("body", "head") for k in candidates}
    assert set(timings["many_rows"]) == {f"{g}={k}" for g in ("body", "head") for k in (EAGER, PACKED, NATIVE)}
    # Each the time of its passes: two (3 and 5 rows) of the body's candidate beside the head held packed.
    assert timings["many_rows"]["body=eager"] == 2 * (8 + 8) and timings["many_rows"]["body=packed"] == 2 * (1 + 8)
    assert model[0].one_row == EAGER and model[0].many_rows == PACKED and head is not model[2]
    assert model[2].one_row == PACKED_ONE_ROW and model[2].many_rows == EAGER
    assert kernels.describe(record) == "one row body eager, head packed1; several rows body packed, head eager"

    # Cached per machine and model: a second load takes the choice without measuring.
    saved = json.loads((measuring / "kernels.json").read_text())
    assert list(saved["choices"]) == ["test-model"]
    monkeypatch.setenv("SPECVIZ_KERNELS", "")
    again = _mlp()
    never = lambda rows: pytest.fail("a cached choice must not be measured again")  # noqa: E731
    cached = kernels.choose("test-model", cache, again, lambda: again[2], never, (3, 5))
    assert cached["source"].startswith("cached") and cached["one_row"] == record["one_row"]
    assert again[0].one_row == EAGER and again[2].many_rows == EAGER


def test_native_is_measured_only_where_it_runs(monkeypatch):
    float32 = [KernelLinear(nn.Linear(8, 4))]
    assert NATIVE in kernels.candidates("one_row", float32) and NATIVE in kernels.candidates("many_rows", float32)
    bfloat16 = [KernelLinear(nn.Linear(8, 4).to(torch.bfloat16))]
    assert NATIVE not in kernels.candidates("many_rows", bfloat16)
    monkeypatch.setattr(kernels.native, "unavailable", lambda: "no compiler here")
    assert kernels.candidates("one_row", float32) == (EAGER, PACKED, PACKED_ONE_ROW)
    assert kernels.candidates("many_rows", float32) == (EAGER, PACKED)


def test_a_cached_native_choice_is_measured_again_where_native_no_longer_builds(measuring, monkeypatch, fake_clock):
    cache = measuring / "kernels.json"
    model = _mlp()
    native_everywhere = {shape: {"body": NATIVE, "head": NATIVE} for shape in kernels.SHAPES}
    kernels._write_cache(cache, "m", native_everywhere)
    monkeypatch.setenv("SPECVIZ_KERNELS", "")
    monkeypatch.setattr(kernels.native, "unavailable", lambda: "no compiler here")
    cost = {(shape, i, k): 1 for shape in kernels.SHAPES for i in (0, 1) for k in (EAGER, PACKED, PACKED_ONE_ROW)}
    record = kernels.choose("m", cache, model, lambda: model[2], _fake_pass(model, cost, fake_clock), (3,))
    assert record["source"] == "measured at load"
    assert NATIVE not in {k for shape in kernels.SHAPES for k in record[shape].values()}


def test_specviz_kernels_native_needs_the_kernel_built(tmp_path, monkeypatch):
    monkeypatch.setattr(kernels.native, "unavailable", lambda: "no compiler here")
    monkeypatch.setenv("SPECVIZ_KERNELS", "native")
    with pytest.raises(ValueError, match="asks for the native kernel, but no compiler here"):
        kernels.choose("m", tmp_path / "kernels.json", _mlp(), lambda: None, lambda rows: None, (3,))


def test_specviz_kernels_forces_one_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_KERNELS", "eager/packed")
    model = _mlp()
    record = kernels.choose(
        "m", tmp_path / "kernels.json", model, lambda: model[2], lambda rows: pytest.fail("forced: no measuring"), (3,)
    )
    assert record["one_row"] == {"body": EAGER, "head": EAGER} and record["many_rows"]["head"] == PACKED
    assert record["source"] == "forced (SPECVIZ_KERNELS=eager/packed)"
    assert not (tmp_path / "kernels.json").exists()
    monkeypatch.setenv("SPECVIZ_KERNELS", "fast")
    with pytest.raises(ValueError, match="SPECVIZ_KERNELS='fast' is not a kernel choice"):
        kernels.choose("m", tmp_path / "kernels.json", _mlp(), lambda: None, lambda rows: None, (3,))


def test_describe_reads_old_and_new_records():
    assert kernels.describe("packed") == "packed"  # traces recorded before the choice was measured
    assert kernels.describe({"reason": "pack=False"}) == "eager: pack=False"
    same = {"one_row": {"body": PACKED, "head": PACKED}, "many_rows": {"body": PACKED, "head": PACKED}}
    assert kernels.describe(same) == "packed"


@pytest.mark.slow
def test_mixed_kernels_differ_from_the_target_alone_only_at_float32_near_ties(monkeypatch):
    """One row eager (the target alone's steps) and several rows packed (verification): the two round
    differently, so greedy output may differ only where the target's top-2 logits are < 1e-3 apart."""
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.engine.models import load_model
    from specviz.labs.bench import PROMPTS
    from specviz.traces.sameness import FLOAT32_NEAR_TIE_TOLERANCE, compare_runs

    monkeypatch.setenv("SPECVIZ_KERNELS", "eager/packed")
    mixed = load_model(weights="float32")  # the kernels SPECVIZ_KERNELS forces run the float32 weights
    assert mixed.kernels["one_row"]["body"] == EAGER and mixed.kernels["many_rows"]["body"] == PACKED
    verdicts = []
    for prompt in PROMPTS[:4]:
        spec = speculative_generate(prompt, target=mixed, options=DecodeOptions(temperature=0, max_new_tokens=24))
        base = autoregressive_generate(prompt, target=mixed, options=DecodeOptions(temperature=0, max_new_tokens=24))
        assert spec.config["kernels"] == mixed.kernels  # the choice is in the trace
        same = compare_runs(spec, base, mixed)
        assert same.verdict in ("identical", "near_tie"), same
        if same.verdict == "near_tie":
            assert same.logit_gap < FLOAT32_NEAR_TIE_TOLERANCE == same.tolerance
        verdicts.append(same.verdict)
    assert verdicts.count("identical") >= 3, verdicts  # near-ties are rare: most decodes are identical


def test_a_changed_native_kernel_is_measured_afresh(monkeypatch):
    """The kernel choice (and v(rows), under the same key) is cached per machine: a choice measured with
    one version of the native kernel's source must not be read back for another."""
    first = kernels.machine_key("m")
    assert kernels.native.source_digest() in first
    monkeypatch.setattr(kernels.native, "source_digest", lambda: "0123456789")
    assert kernels.machine_key("m") != first
