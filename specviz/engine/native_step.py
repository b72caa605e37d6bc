"""The lean forward's decoder layers in one native call (csrc/step.cpp, `torch.ops.specviz.decoder_layers`).

specviz.engine.lean_llama runs a step as a plain Python loop of torch calls, about twenty a layer. Once
the linears read the weights as shipped, those calls cost about as much as the linears
(docs/benchmarks.md, "The weights as shipped"). Where every linear runs specviz's native kernel (the weights
as shipped, or the float32 native layouts), the whole stack of layers runs as one call instead, the KV
caches written in place; the final norm and the LM head stay LeanLlama's. It serves every pass: one run's
(a draft tree's included) and a batched one over several runs' caches (LeanLlama.forward_many), whose
linears stream their weights once for all the runs' rows, so a run's numbers are the same solo or batched.
"""

from __future__ import annotations

import torch

from specviz.engine.packing import BLOCKS, NATIVE, FusedLinears, KernelLinear


class NativeStep:
    """The weights of every layer as decoder_layers takes them (views of the linears' own layouts: no copy)."""

    def __init__(self, lean, weights: list[torch.Tensor], formats: list[int], outs: list[int]):
        self.lean, self.weights, self.formats, self.outs = lean, weights, formats, outs

    @staticmethod
    def of(lean) -> NativeStep | None:
        """The native step of a LeanLlama whose projections are fused (LeanLlama.fuse_projections), or None
        where any linear runs another kernel, the weights are not float32, or a head or the hidden size is
        not a whole number of 16-float vectors (the step's sums run 16 lanes wide)."""
        if lean.dtype != torch.float32 or lean.head_dim % 16 or lean.model.config.hidden_size % 16:
            return None
        stacked = stacked_weights(
            ((layer.input_layernorm.weight.detach(), layer.post_attention_layernorm.weight.detach()),
             qkv, layer.self_attn.o_proj, gate_up, layer.mlp.down_proj)
            for layer, (qkv, gate_up) in zip(lean.layers, lean.fused, strict=True)
        )  # fmt: skip
        return None if stacked is None else NativeStep(lean, *stacked)

    def layers(self, x: torch.Tensor, spans: list, feature_layers: list[int]) -> tuple[torch.Tensor, dict]:
        """x [sum T, D] the runs' new rows' embeddings, one run after another -> (x after every layer
        [sum T, D], {layer: its output [sum T, D]} for feature_layers). spans: each run's lean_llama._Span
        (its cache with room reserved, its position, rotary and mask); the caches are written here."""
        wanted = sorted(set(feature_layers))  # decoder_layers returns them in layer order
        masks = [None if not s.tree else s.mask.float().contiguous() for s in spans]  # None: causal
        out = torch.ops.specviz.decoder_layers(
            x.contiguous(), self.weights, self.formats, self.outs,
            [s.cache.keys for s in spans], [s.cache.values for s in spans],
            [s.end - s.past for s in spans], [s.past for s in spans],
            [s.cos.contiguous() for s in spans], [s.sin.contiguous() for s in spans], masks,
            self.lean.heads, self.lean.eps, wanted,
        )  # fmt: skip
        return out[0], dict(zip(wanted, out[1:], strict=True))


def stacked_weights(layers) -> tuple[list, list[int], list[int]] | None:
    """decoder_layers' weights, formats and outputs for every layer, given each as (norms, qkv, o,
    gate_up, down), one after another; None where any layer's linears are not native."""
    weights, formats, outs = [], [], []
    for norms, qkv, o, gate_up, down in layers:
        got = layer_weights(norms, qkv, o, gate_up, down)
        if got is None:
            return None
        weights += got[0]
        formats += got[1]
        outs += got[2]
    return weights, formats, outs


def layer_weights(norms, qkv, o, gate_up, down) -> tuple[list, list[int], list[int]] | None:
    """One decoder layer's share of decoder_layers' arguments: (weights: norm_in, qkv, o, norm_post,
    gate_up, down; formats and outputs of its 4 linears), or None where a linear is not native."""
    parts = [_product(qkv), _product(o), _product(gate_up), _product(down)]
    if any(part is None for part in parts):
        return None
    (qkv_w, qkv_f, qkv_n), (o_w, o_f, o_n), (gu_w, gu_f, gu_n), (d_w, d_f, d_n) = parts
    return [norms[0], qkv_w, o_w, norms[1], gu_w, d_w], [qkv_f, o_f, gu_f, d_f], [qkv_n, o_n, gu_n, d_n]


def _product(linear) -> tuple[torch.Tensor, int, int] | None:
    """(layout, format: 0 for float32 or ggml's number, outputs) of a fused or single native linear."""
    if isinstance(linear, FusedLinears):
        kernel, layout, fmt, out = linear.kernel, linear.layout, linear.block_format, sum(linear.sizes)
    elif isinstance(linear, KernelLinear) and linear.one_row == linear.many_rows and linear.bias is None:
        kernel, fmt, out = linear.one_row, linear.block_format, linear.out_features
        layout = linear.layouts.get(kernel)
    else:
        return None
    if kernel == NATIVE:
        return layout, 0, out
    if kernel == BLOCKS:
        return layout, fmt.ggml, out
    return None
