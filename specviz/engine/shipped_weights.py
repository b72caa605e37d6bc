"""The offline target loaded on its weights as shipped: every linear holds its GGUF blocks
(specviz.engine.blocks) and runs them with the native kernel; the embedding reads the tied LM head's
blocks. Called by specviz.engine.models.ready_model when a load asks for weights "shipped"."""

from __future__ import annotations

from pathlib import Path

from specviz.engine.blocks import BlockEmbedding, lay_out, read_blocks
from specviz.engine.packing import BLOCKS, KernelLinear, kernel_linears


def hold_shipped_blocks(model, gguf_path: Path) -> dict:
    """Give every linear of `model` (a LlamaForCausalLM loaded from `gguf_path`'s float32 conversion) its
    blocks from the GGUF file, and its embedding the LM head's blocks (BlockEmbedding); the float32
    weights are dropped. Returns the kernels record (specviz.engine.kernels.describe reads it)."""
    linears, reason = kernel_linears(model)
    if reason is not None:
        raise ValueError(reason)
    cfg = model.config
    found = read_blocks(gguf_path, cfg.num_attention_heads, cfg.num_key_value_heads)
    modules = dict(model.named_modules())
    missing = [name for name, m in modules.items() if isinstance(m, KernelLinear) and name not in found]
    if missing or any(name not in modules for name in found):
        example = (missing or list(found))[0]
        raise ValueError(f"the GGUF file's tensors do not match the model's linears (e.g. {example})")
    counts: dict[str, int] = {}
    for name, (raw, fmt) in found.items():
        modules[name].hold_blocks(lay_out(raw, fmt), fmt)
        counts[fmt.name] = counts.get(fmt.name, 0) + 1
    head = model.get_output_embeddings()
    vocab, hidden = head.out_features, head.in_features
    model.model.embed_tokens = BlockEmbedding(head.layouts[BLOCKS], head.block_format, vocab, hidden)
    nbytes = sum(m.layouts[BLOCKS].numel() for m in modules.values() if isinstance(m, KernelLinear))
    choice = {"body": BLOCKS, "head": BLOCKS}
    return {
        "one_row": dict(choice),
        "many_rows": dict(choice),
        "source": "the weights as shipped (GGUF blocks, not measured against float32 kernels)",
        "formats": counts,  # {"Q4_1": 210, "Q8_0": 1}
        "weight_bytes": nbytes,
    }
