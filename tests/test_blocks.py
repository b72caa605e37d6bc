"""The weights as shipped (specviz.engine.blocks and csrc/gemv.cpp's gemv_blocks), on the offline target's
real GGUF blocks: they expand to exactly the float32 weights the float32 path loads, and the kernel's
product over the blocks is bit-identical to its product over those float32 weights, for both formats
(Q4_1: the linears; Q8_0: the tied embedding), alone and among other rows."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from specviz.engine import blocks, native
from specviz.engine.models import gguf_location, prepare_offline_target

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shipped():
    """{module: (raw GGUF rows, format)} and the float32 tensors the float32 path loads."""
    found = blocks.read_blocks(gguf_location(), heads=9, kv_heads=3)
    return found, load_file(str(prepare_offline_target() / "model.safetensors"))


@pytest.fixture(scope="module")
def built():
    reason = native.unavailable()
    if reason is not None:
        pytest.skip(reason)


def test_every_block_expands_to_the_float32_weight_loaded(shipped):
    found, float32 = shipped
    assert len(found) == 211  # 210 linears in Q4_1 and the tied embedding in Q8_0
    assert {fmt.name for _, fmt in found.values()} == {"Q4_1", "Q8_0"}
    for name, (raw, fmt) in found.items():
        loaded = float32["model.embed_tokens.weight" if name == "lm_head" else f"{name}.weight"]
        assert torch.equal(blocks.dequantize(raw, fmt), loaded), name  # q and k rows put back in transformers' order


def test_the_layout_gives_back_every_row(shipped):
    """The embedding and the head's E_S read rows back from the Q8_0 layout: exactly the GGUF's."""
    found, _ = shipped
    raw, fmt = found["lm_head"]
    layout = blocks.lay_out(raw, fmt)
    ids = torch.tensor([raw.shape[0] - 1, 0, 1, 2, 3, 4, 7, 4])
    assert torch.equal(blocks.rows_of(layout, fmt, ids), raw[ids])


@pytest.mark.parametrize("name", ["model.layers.0.self_attn.k_proj", "model.layers.0.mlp.down_proj", "lm_head"])
def test_the_layout_holds_the_blocks_and_scales_widened_to_float32(shipped, name):
    """A few bytes more than the GGUF's (float32 scales), and padding only to whole chunks of rows."""
    found, _ = shipped
    raw, fmt = found[name]
    layout = blocks.lay_out(raw, fmt)
    per_block = 4 * fmt.scales + fmt.quants  # bytes of 32 weights: float32 scales and the quants
    assert layout.shape == (-(-raw.shape[0] // 4), -(-raw.shape[1] // fmt.block * 32 // fmt.inputs), fmt.chunk)
    assert layout.numel() == raw.shape[0] * raw.shape[1] // fmt.block * per_block


@pytest.mark.parametrize("name", ["model.layers.0.self_attn.q_proj", "model.layers.29.mlp.down_proj", "lm_head"])
def test_the_kernel_over_blocks_is_bit_identical_to_float32(built, shipped, name):
    found, _ = shipped
    raw, fmt = found[name]
    if name == "lm_head":
        raw = raw[:4098]  # a slice of the 49152 rows (4098: a last block of 2 real rows); every format path
    weight = blocks.dequantize(raw, fmt)  # [N, K]
    packed, layout = torch.ops.specviz.pack_rows(weight), blocks.lay_out(raw, fmt)
    if name.endswith("q_proj"):  # K = 576 is 9 chunks of 64; a K of 544 pads its last chunk with zero blocks
        raw544 = raw[:, : 17 * fmt.block]
        weight544 = blocks.dequantize(raw544, fmt)
        x = torch.randn(5, 544, generator=torch.Generator().manual_seed(1))
        got = blocks.product(x, blocks.lay_out(raw544, fmt), weight.shape[0], fmt)
        assert torch.equal(got, torch.ops.specviz.gemv(x, torch.ops.specviz.pack_rows(weight544), weight.shape[0]))
    x = torch.randn(40, weight.shape[1], generator=torch.Generator().manual_seed(0))
    together = blocks.product(x, layout, weight.shape[0], fmt)  # [40, N]: the expanded sweeps
    for rows in (1, 2, 3, 4, 6, 7, 9, 13, 40):
        alone = blocks.product(x[:rows], layout, weight.shape[0], fmt)
        assert torch.equal(alone, torch.ops.specviz.gemv(x[:rows], packed, weight.shape[0])), rows
        assert torch.equal(alone, together[:rows]), rows


def test_the_block_embedding_reads_the_float32_rows(shipped):
    found, float32 = shipped
    raw, fmt = found["lm_head"]
    embedding = blocks.BlockEmbedding(blocks.lay_out(raw, fmt), fmt, *float32["model.embed_tokens.weight"].shape)
    ids = torch.tensor([[0, 17, 49151], [3, 3, 2]])
    assert torch.equal(embedding(ids), float32["model.embed_tokens.weight"][ids])
    assert embedding.weight.shape == (49152, 576) and embedding.weight.is_meta  # its shape, never a copy


def test_the_layouts_kept_on_disk_come_back_whole_and_a_damaged_file_is_made_again(tmp_path, shipped):
    from specviz.engine.shipped_weights import layouts

    kept = tmp_path / "blocks.safetensors"
    kept.write_bytes(b"not a safetensors file")  # damaged: laid out again, never an error
    first = layouts(gguf_location(), kept, heads=9, kv_heads=3)
    again = layouts(gguf_location(), kept, heads=9, kv_heads=3)  # read back from the file now written
    assert set(first) == set(again) == set(shipped[0])
    for name, (layout, fmt) in first.items():
        assert again[name][1] is fmt and torch.equal(again[name][0], layout), name
    assert list(tmp_path.iterdir()) == [kept]  # no temporary file left
