"""The offline target loaded on its weights as shipped: every linear holds its GGUF blocks
(specviz.engine.blocks) and runs them with the native kernel; the embedding reads the tied LM head's
blocks. Called by specviz.engine.models.ready_model when a load asks for weights "shipped".

Reading the GGUF and laying its blocks out takes seconds of CPU (docs/benchmarks.md, "The weights as
shipped"), so the layouts are kept once per machine beside the converted model (`layouts`): a later
load reads them back as one file. The layout depends on the GGUF file and LAYOUT_VERSION, not on the CPU.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch

from specviz.engine.blocks import FORMATS, BlockEmbedding, lay_out, read_blocks
from specviz.engine.packing import BLOCKS, KernelLinear, kernel_linears

# Raise it with any change to what the kept file holds (blocks.lay_out, read_blocks, its row order): layouts
# kept by an older version are made again.
LAYOUT_VERSION = 1


def layouts(gguf_path: Path, cache_file: Path, heads: int, kv_heads: int) -> dict[str, tuple[torch.Tensor, object]]:
    """{module name: (its layout, its blocks.Format)}: read back from cache_file, or laid out from the
    GGUF and kept there (written whole or not at all, so two processes loading at once leave one file)."""
    from safetensors import SafetensorError, safe_open

    stamp = f"{LAYOUT_VERSION} {gguf_path.stat().st_size} {gguf_path.stat().st_mtime_ns}"
    try:
        with safe_open(str(cache_file), framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("stamp") == stamp:
                formats = json.loads(meta["formats"])
                return {name: (f.get_tensor(name), FORMATS[formats[name]]) for name in f.keys()}  # noqa: SIM118
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError):
        pass  # none yet, another version's, or damaged: lay them out again
    laid = {name: (lay_out(raw, fmt), fmt) for name, (raw, fmt) in read_blocks(gguf_path, heads, kv_heads).items()}
    _keep(laid, cache_file, stamp)
    return laid


def _keep(laid: dict, cache_file: Path, stamp: str) -> None:
    """Write the layouts to cache_file whole (a temporary file renamed), or leave no file at all."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    tmp = None
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_file.parent, delete=False, suffix=".tmp") as handle:
            tmp = handle.name
        formats = json.dumps({name: fmt.name for name, (_, fmt) in laid.items()})
        save_file({name: layout for name, (layout, _) in laid.items()}, tmp, {"stamp": stamp, "formats": formats})
        os.replace(tmp, cache_file)
        tmp = None
    except (OSError, SafetensorError):
        pass  # a read-only or full disk only costs the layout next time
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def hold_shipped_blocks(model, gguf_path: Path, cache_file: Path) -> dict:
    """Give every linear of `model` (a LlamaForCausalLM loaded from `gguf_path`'s float32 conversion) its
    blocks from the GGUF file (laid out once per machine into cache_file), and its embedding the LM
    head's blocks (BlockEmbedding); the float32 weights are dropped. Returns the kernels record
    (specviz.engine.kernels.describe reads it)."""
    linears, reason = kernel_linears(model)
    if reason is not None:
        raise ValueError(reason)
    cfg = model.config
    found = layouts(gguf_path, cache_file, cfg.num_attention_heads, cfg.num_key_value_heads)
    modules = dict(model.named_modules())
    missing = [name for name, m in modules.items() if isinstance(m, KernelLinear) and name not in found]
    if missing or any(name not in modules for name in found):
        example = (missing or list(found))[0]
        raise ValueError(f"the GGUF file's tensors do not match the model's linears (e.g. {example})")
    counts: dict[str, int] = {}
    for name, (layout, fmt) in found.items():
        modules[name].hold_blocks(layout, fmt)
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
