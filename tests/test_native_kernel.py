"""specviz's native kernel (specviz.engine.native, csrc/gemv.cpp): it builds on this machine, computes
the linear, gives a row the same numbers alone or among others, and a target running it everywhere
decodes greedily exactly as its own target alone does."""

from __future__ import annotations

import shutil

import pytest
import torch
from torch import nn

from specviz.config import DecodeOptions
from specviz.engine import native
from specviz.engine.packing import EAGER, NATIVE, PACKED, PACKED_ONE_ROW, KernelLinear


@pytest.fixture(scope="module")
def built():
    """The kernel, built here. A machine with no C++ compiler or no ninja skips these tests with the
    reason (specviz runs there with torch's own kernels: tests/test_kernels.py); where both exist,
    a kernel that does not build or check is a failure."""
    missing = [
        tool for tool in ("c++", "ninja") if shutil.which(tool) is None and shutil.which(f"{tool}-build") is None
    ]
    if missing and native.unavailable() is not None:
        pytest.skip(f"no {' and no '.join(missing)} on this machine: the native kernel cannot be built here")
    reason = native.unavailable()
    assert reason is None, reason


@pytest.mark.parametrize(
    ("one_row", "many_rows"), [(NATIVE, NATIVE), (NATIVE, PACKED), (EAGER, NATIVE), (PACKED_ONE_ROW, NATIVE)]
)
@pytest.mark.parametrize("bias", [True, False])
def test_native_computes_the_linear(built, one_row, many_rows, bias):
    torch.manual_seed(0)
    reference = nn.Linear(37, 21, bias=bias)
    linear = KernelLinear(reference)
    linear.use(one_row, many_rows)
    x = torch.randn(2, 5, 37)  # [batch, rows, in]: any leading shape
    with torch.no_grad():
        torch.testing.assert_close(linear(x), reference(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(linear(x[0, :1]), reference(x[0, :1]), atol=1e-5, rtol=1e-5)
    assert set(linear.layouts) == {one_row, many_rows} - {EAGER}
    assert linear.weight.is_meta == (EAGER not in (one_row, many_rows))  # one copy: the kernels' own layouts
    torch.testing.assert_close(linear.weight_as_loaded(), reference.weight.detach(), atol=0, rtol=0)


@pytest.mark.parametrize(("out_features", "in_features"), [(960, 576), (576, 1536), (49152, 576), (3, 10), (7, 37)])
def test_a_rows_numbers_do_not_depend_on_the_rows_beside_it(built, out_features, in_features):
    generator = torch.Generator().manual_seed(1)
    w = torch.randn(out_features, in_features, generator=generator)
    x = torch.randn(130, in_features, generator=generator)
    packed = torch.ops.specviz.pack_rows(w)
    together = torch.ops.specviz.gemv(x, packed, out_features)  # [130, out]: past 12 rows, sweeps over L2 tiles
    for rows in (1, 2, 4, 5, 7, 9, 13, 32, 128):
        assert torch.equal(torch.ops.specviz.gemv(x[:rows], packed, out_features), together[:rows])
    exact = (x.double() @ w.double().T).float()
    torch.testing.assert_close(together, exact, atol=1e-4, rtol=1e-4)


def test_a_build_lock_left_by_a_killed_build_is_cleared(tmp_path, monkeypatch):
    import os
    import time

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    lock = tmp_path / "specviz_gemv_test" / "lock"
    lock.parent.mkdir()
    lock.touch()
    native._clear_stale_lock("specviz_gemv_test")
    assert lock.exists()  # a build in progress elsewhere: its lock stays
    old = time.time() - native.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    native._clear_stale_lock("specviz_gemv_test")
    assert not lock.exists()  # torch's builder would otherwise wait for it forever


def test_native_refuses_what_it_is_not_for(built):
    linear = KernelLinear(nn.Linear(8, 4).to(torch.bfloat16))
    with pytest.raises(ValueError, match="native kernel is for float32"):
        linear.use(NATIVE, NATIVE)
    with pytest.raises(RuntimeError, match="differ in K"):
        torch.ops.specviz.gemv(torch.randn(2, 8), torch.ops.specviz.pack_rows(torch.randn(4, 17)), 4)


def test_fused_projections_equal_the_separate_ones_bit_for_bit_in_one_copy(built):
    from specviz.engine.lean_llama import LeanLlama
    from specviz.engine.packing import FusedLinears, kernel_linears
    from specviz.engine.toy import tiny_llama

    model = tiny_llama(vocab_size=64, seed=3, layers=2, init_scale=10.0, hidden=32).model
    linears, reason = kernel_linears(model)
    assert reason is None
    lean = LeanLlama(model)
    for linear in linears:
        linear.use(PACKED, PACKED, free=False)
    assert lean.fuse_projections() == 0  # packed layouts cannot be laid end to end
    for linear in linears:
        linear.use(NATIVE, NATIVE)
    ids = torch.randint(0, 64, (12,), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        separate = [
            lean.forward(chunk, cache, chunk.shape[0])[0]
            for cache in [lean.new_cache()]
            for chunk in ids.split([8, 1, 3])
        ]
        assert lean.fuse_projections() == 2
        fused = [
            lean.forward(chunk, cache, chunk.shape[0])[0]
            for cache in [lean.new_cache()]
            for chunk in ids.split([8, 1, 3])
        ]
    for a, b in zip(separate, fused, strict=True):
        assert torch.equal(a, b)  # each output is summed on its own: fusing changes no bit
    attn = model.model.layers[0].self_attn
    qkv = lean.fused[0][0]
    assert isinstance(qkv, FusedLinears) and qkv.sizes == [32, 16, 16]
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):  # each linear's layout is a view of the fused one
        assert proj.layouts[NATIVE].untyped_storage().data_ptr() == qkv.layout.untyped_storage().data_ptr()
    assert FusedLinears.of([attn.q_proj, model.model.layers[0].mlp.down_proj]) is None  # other inputs


@pytest.mark.slow
def test_the_offline_target_on_native_decodes_greedily_as_its_target_alone(built, monkeypatch):
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.engine.models import load_model

    monkeypatch.setenv("SPECVIZ_KERNELS", NATIVE)
    target = load_model(weights="float32")  # SPECVIZ_KERNELS forces the float32 weights' kernels
    assert target.kernels["one_row"]["body"] == NATIVE and target.kernels["many_rows"]["head"] == NATIVE
    for prompt in ("List three fruits and one fact about each.", "Write a Python function that reverses a string."):
        spec = speculative_generate(prompt, target=target, options=DecodeOptions(temperature=0, max_new_tokens=24))
        alone = autoregressive_generate(prompt, target=target, options=DecodeOptions(temperature=0, max_new_tokens=24))
        assert spec.config["kernels"] == target.kernels
        assert spec.output_token_ids == alone.output_token_ids  # one kernel for every row count: bit-identical
