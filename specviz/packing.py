"""Pre-packed CPU linears: verification over gamma+1 tokens for about the price of one step.

In eager float32 on a CPU, a target pass over 5 tokens costs about 1.4 single-token steps,
because each linear re-lays-out its weight for every call. oneDNN can lay a weight out once in
its blocked format (what torch.compile's inductor does with weight prepacking); the same ops are
callable directly: `mkldnn._reorder_linear_weight` once per weight, then `mkldnn._linear_pointwise`
per call. Measured on this project's CPU: 21.8 ms for 1 token, 24.0 for 5, 25.9 for 9 (eager:
36.8, 50.0, 62.8), and a linear's row is bit-identical whether computed alone or among others
(eager float32 is not). Through the whole target, attention over different query counts still
leaves logits about 3e-5 apart, far below the gaps that decide an argmax in practice: greedy
speculative output equalled the target alone's in every decode measured (docs/benchmarks.md).

These ops are internal to torch, so every model is checked once after packing against its eager
self; on any failure the model stays eager and the reason is recorded (LoadedModel.kernels, the
trace's config). `SPECVIZ_KERNELS=eager` turns packing off.
"""

from __future__ import annotations

import os

import torch
from torch import nn

PACKED = "packed"
EAGER = "eager"


class PackedLinear(nn.Module):
    """An nn.Linear whose weight is kept in oneDNN's blocked layout (inference only)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # kept for shape queries and tied embeddings; not used to compute
        self.bias = linear.bias
        with torch.no_grad():
            # No batch-size hint: a hint of 1 lays the weight out for single rows and makes a
            # 5-row verification pass 1.7x slower than one row (measured); without it both are flat.
            self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def packing_unavailable(module: nn.Module) -> str | None:
    """Why `module` cannot be packed here, or None when it can."""
    if os.environ.get("SPECVIZ_KERNELS", "").lower() == EAGER:
        return "SPECVIZ_KERNELS=eager"
    params = list(module.parameters())
    if not params:
        return "no weights"
    if params[0].device.type != "cpu":
        return f"weights on {params[0].device.type} (packing is for the CPU)"
    if params[0].dtype != torch.float32:
        return f"{params[0].dtype} weights (packing is used for float32 only)"
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "this torch build has no oneDNN linear ops"
    return None


def pack_linears(module: nn.Module) -> str:
    """Swap every nn.Linear of `module` (in place) for a PackedLinear, checked against the eager
    result on one linear. Returns "packed", or "eager: <reason>" with the module left as it was."""
    reason = packing_unavailable(module)
    if reason is not None:
        return f"{EAGER}: {reason}"
    swaps = [
        (parent, name, child)
        for parent in module.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear
    ]
    if not swaps:
        return f"{EAGER}: no linear layers"
    try:
        _, _, probe = swaps[0]
        x = torch.randn(3, probe.in_features, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            if not torch.allclose(PackedLinear(probe)(x), probe(x), rtol=1e-4, atol=1e-4):
                return f"{EAGER}: packed result differs from eager"
        packed = [(parent, name, PackedLinear(child)) for parent, name, child in swaps]
    except Exception as exc:  # internal ops: any failure means "stay eager", never a crash
        return f"{EAGER}: {type(exc).__name__}: {exc}"
    for parent, name, new in packed:
        setattr(parent, name, new)
    return PACKED
