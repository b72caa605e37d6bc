"""CPU linears that can run each call with one of several kernels, picked by row count.

A target step multiplies one row by every weight; a verification pass multiplies a few rows. On
a CPU in float32 the fastest kernel for each differs by machine (docs/benchmarks.md): on AMD EPYC
specviz's native kernel wins one row and a verification pass (oneDNN's pre-packed weights won
every row count before it was measured); on an Intel Xeon with AMX torch's eager linear won one
row and the packed one five. So every nn.Linear becomes a KernelLinear
that keeps the eager weight and, on demand, pre-packed copies of it, and runs a call with the
kernel set for its shape: `one_row` for one row, `many_rows` for more. specviz.engine.kernels measures
which kernel to set; this module only provides them.

The kernels (names stored in traces):
    eager     torch.nn.functional.linear on the weight as loaded
    packed    oneDNN's blocked layout, laid out once (`mkldnn._reorder_linear_weight`), run with
              `mkldnn._linear_pointwise`; in float32 a row's numbers are the same whether it is
              computed alone or among others, so with packed everywhere greedy output is
              bit-identical (bfloat16 layouts, used where the CPU has native bfloat16, can differ)
    packed1   the same, laid out with a batch-size hint of 1: a candidate for one-row calls only
              (it makes a several-row pass much slower than one row: docs/benchmarks.md,
              "Figures once kept in code comments", "Kernels")
    native    specviz's own kernel (specviz.engine.native: its own layout, streamed once per call);
              float32 only, measured wherever it builds; like packed, a row's numbers do not depend
              on how many rows share the call, and linears that read one input can run as one
              product (FusedLinears)
    blocks    the same kernel over the GGUF file's Q4_1/Q8_0 blocks (specviz.engine.blocks: the weights
              as shipped), bit-identical to native on the float32 weights they expand to; never
              measured against the others: a linear holds it when the model loads with weights
              "shipped" (KernelLinear.hold_blocks), and then holds no float32 copy at all

These ops are internal to torch, so a module is checked once against its eager self before any
packed kernel is offered; on any failure it stays eager and the reason is recorded.
"""

from __future__ import annotations

import torch
from torch import nn

EAGER = "eager"
PACKED = "packed"
PACKED_ONE_ROW = "packed1"
NATIVE = "native"
BLOCKS = "blocks"
ONE_ROW_KERNELS = (EAGER, PACKED, PACKED_ONE_ROW, NATIVE)
MANY_ROWS_KERNELS = (EAGER, PACKED, NATIVE)


class KernelLinear(nn.Module):
    """An nn.Linear (inference only) that runs one-row calls with `one_row` and others with `many_rows`."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # [out, in] the eager kernel's weight (and a tied embedding's)
        self.bias = linear.bias
        self.one_row, self.many_rows = EAGER, EAGER
        self.layouts: dict[str, torch.Tensor] = {}  # packed kernel name -> its laid-out weight
        self.block_format = None  # specviz.engine.blocks.Format of the layout BLOCKS runs, when held

    def hold_blocks(self, layout: torch.Tensor, fmt) -> None:
        """Run every call with the native kernel over the weights as shipped: layout [ceil(out/4), chunks,
        chunk bytes] uint8 (specviz.engine.blocks.lay_out; a chunk is fmt.inputs inputs). The weight as
        loaded is dropped: `weight` becomes a plain meta tensor of its shape (not a parameter, so the
        model's device is still its other parameters'), and the blocks are the only copy."""
        if -(-self.in_features // fmt.inputs) != layout.shape[1] or layout.shape[0] != (self.out_features + 3) // 4:
            shape = f"[{self.out_features}, {self.in_features}]"
            raise ValueError(f"blocks {tuple(layout.shape)} do not hold a {shape} weight")
        self.layouts = {BLOCKS: layout}
        self.block_format = fmt
        self._parameters.pop("weight", None)
        self.weight = torch.empty(self.out_features, self.in_features, device="meta")
        self.one_row = self.many_rows = BLOCKS

    def use(self, one_row: str, many_rows: str, free: bool = True, shared: bool = False) -> None:
        """Run one-row calls with `one_row` and the others with `many_rows`; lay out what they need
        and (unless free=False, while measuring) free the layouts neither uses, the weight as loaded
        too when neither kernel is eager and no other module holds it (shared=False: a tied
        embedding's weight stays, and costs nothing extra). The weight then becomes a meta tensor of
        its shape: one copy of the weights in memory, the kernels' own."""
        if self.one_row == BLOCKS:
            raise RuntimeError(
                "this linear holds only the weights as shipped; load with weights 'float32' for another kernel"
            )
        if one_row not in ONE_ROW_KERNELS or many_rows not in MANY_ROWS_KERNELS:
            raise ValueError(f"unknown kernels {one_row!r} / {many_rows!r}")
        if NATIVE in (one_row, many_rows) and self.weight.dtype != torch.float32:
            raise ValueError(f"the native kernel is for float32 weights, not {self.weight.dtype}")
        for kernel in {one_row, many_rows} - {EAGER} - set(self.layouts):
            if self.weight.is_meta:
                raise RuntimeError(
                    f"this linear's weights are held only in the {', '.join(self.layouts)} layout; load the "
                    "model again (or with pack=False) to run it with another kernel"
                )
            with torch.no_grad():
                self.layouts[kernel] = _lay_out(self.weight.detach(), kernel)
        if EAGER in (one_row, many_rows) and self.weight.is_meta:
            raise RuntimeError("this linear's weight as loaded was freed; load the model again to run it eager")
        for kernel in set(self.layouts) - {one_row, many_rows} if free else ():
            del self.layouts[kernel]
        if free and not shared and EAGER not in (one_row, many_rows):
            self.weight = nn.Parameter(torch.empty_like(self.weight, device="meta"), requires_grad=False)
        self.one_row, self.many_rows = one_row, many_rows

    def weight_as_loaded(self) -> torch.Tensor:
        """The weight [out, in] as loaded, also once only a packed layout holds it: the packed kernel
        applied to the identity gives it back exactly (each output is one weight times 1 plus zeros)."""
        if not self.weight.is_meta:
            return self.weight.detach()
        kernel = PACKED if PACKED in self.layouts else next(iter(self.layouts))
        eye = torch.eye(self.in_features, dtype=self.weight.dtype)  # [in, in], in the layout's dtype
        with torch.no_grad():
            return self._run(kernel, eye, bias=None).T.contiguous()  # [out, in]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [..., in] -> [..., out]
        return self._run(self.one_row if x.numel() == self.in_features else self.many_rows, x, self.bias)

    def _run(self, kernel: str, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if kernel == EAGER:
            return nn.functional.linear(x, self.weight, bias)
        if kernel == NATIVE:
            rows = x.reshape(-1, self.in_features)  # [rows, in]
            y = torch.ops.specviz.gemv(rows, self.layouts[NATIVE], self.out_features).reshape(*x.shape[:-1], -1)
            return y if bias is None else y + bias
        if kernel == BLOCKS:
            rows = x.reshape(-1, self.in_features)  # [rows, in]
            y = torch.ops.specviz.gemv_blocks(rows, self.layouts[BLOCKS], self.out_features, self.block_format.ggml)
            y = y.reshape(*x.shape[:-1], -1)
            return y if bias is None else y + bias
        return torch.ops.mkldnn._linear_pointwise(x, self.layouts[kernel], bias, "none", [], "")


def _lay_out(weight: torch.Tensor, kernel: str) -> torch.Tensor:
    """`weight` [out, in] in the layout `kernel` runs on."""
    if kernel == NATIVE:
        return torch.ops.specviz.pack_rows(weight)  # [ceil(out/4), ceil(in/16), 4, 16]
    hint = [1] if kernel == PACKED_ONE_ROW else []
    return torch.ops.mkldnn._reorder_linear_weight(weight, *hint)


def packing_unavailable(module: nn.Module) -> str | None:
    """Why `module`'s linears cannot be packed here, or None when they can."""
    params = list(module.parameters())
    if not params:
        return "no weights"
    if params[0].device.type != "cpu":
        return f"weights on {params[0].device.type} (packing is for the CPU)"
    if params[0].dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "bfloat16 weights on a CPU without native bfloat16 (packing them would be slower)"
    if params[0].dtype not in (torch.float32, torch.bfloat16):
        return f"{params[0].dtype} weights (packing is for float32 and bfloat16)"
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "this torch build has no oneDNN linear ops"
    return None


def kernel_linears(module: nn.Module) -> tuple[list[KernelLinear], str | None]:
    """Swap every nn.Linear of `module` (in place) for a KernelLinear running eager, once the
    packed kernels are checked against eager on one of them. Returns the KernelLinears (those
    already swapped included) and None, or ([], the reason) with the module left as it was."""
    # A linear holding the weights as shipped (a head's E_S) is not one of them: it never changes kernel.
    existing = [m for m in module.modules() if isinstance(m, KernelLinear) and m.one_row != BLOCKS]
    if existing:
        return existing, None
    reason = packing_unavailable(module)
    if reason is not None:
        return [], reason
    swaps = [
        (parent, name, child)
        for parent in module.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear
    ]
    if not swaps:
        return [], "no linear layers"
    try:
        probe = KernelLinear(swaps[0][2])
        dtype = probe.weight.dtype
        x = torch.randn(3, probe.in_features, generator=torch.Generator().manual_seed(0)).to(dtype)
        # bfloat16 keeps 8 bits of mantissa: two kernels summing in other orders part at its own rounding.
        tol = 1e-4 if dtype == torch.float32 else 2e-2
        with torch.no_grad():
            expected = swaps[0][2](x).float()
            for kernel in (PACKED, PACKED_ONE_ROW):
                probe.use(kernel, PACKED, free=False)
                if not torch.allclose(probe(x[:1]).float(), expected[:1], rtol=tol, atol=tol) or not torch.allclose(
                    probe(x).float(), expected, rtol=tol, atol=tol
                ):
                    return [], f"the {kernel} result differs from eager"
    except Exception as exc:  # internal ops: any failure means "stay eager", never a crash
        return [], f"{type(exc).__name__}: {exc}"
    swapped = []
    for parent, name, child in swaps:
        new = KernelLinear(child)
        setattr(parent, name, new)
        swapped.append(new)
    return swapped, None


class FusedLinears:
    """Linears that read the same input (a layer's q, k and v; its gate and up) run as one native
    product: one call streaming all their weights instead of one call each.

    A step of the offline target is 211 linear calls; each costs a fixed few microseconds beyond its
    bytes (the call, the threads' start); three fewer a layer is what this saves (within the
    machine's noise when measured, docs/benchmarks.md, but free). The native layout is blocks of 4
    output rows, so laying the linears' layouts one after another is their fused layout, and each
    linear's own layout becomes a view of it: one copy of the weights, and each linear alone
    (transformers' forward) still runs. Every output of the native kernel is summed on its own in
    one fixed order, so the fused outputs are bit-identical to the separate ones. Fused once the
    kernels are set (LeanLlama.fuse_projections): a later `KernelLinear.use` would leave this
    product running the layouts as they were."""

    def __init__(self, linears: list[KernelLinear]):
        self.kernel = linears[0].one_row  # NATIVE, or BLOCKS (the weights as shipped, one format)
        self.block_format = linears[0].block_format
        layouts = [linear.layouts[self.kernel] for linear in linears]  # [out_i / 4, ...] each
        self.layout = torch.cat(layouts)  # [sum out_i / 4, ...]
        self.sizes = [linear.out_features for linear in linears]
        start = 0
        for linear, layout in zip(linears, layouts, strict=True):
            linear.layouts[self.kernel] = self.layout[start : start + layout.shape[0]]  # a view: one copy
            start += layout.shape[0]

    @staticmethod
    def of(linears: list) -> FusedLinears | None:
        """The fused product of `linears`, or None where they cannot share one: not all KernelLinears
        running native for every row count, a bias, different inputs, or an output count that is not
        a whole number of the layout's 4-row blocks (blocks: all of one format)."""
        if not all(isinstance(m, KernelLinear) for m in linears):
            return None
        if len({m.in_features for m in linears}) != 1 or len({(m.one_row, m.block_format) for m in linears}) != 1:
            return None
        if not all(
            m.one_row == m.many_rows and m.one_row in (NATIVE, BLOCKS) and m.bias is None and m.out_features % 4 == 0
            for m in linears
        ):
            return None
        return FusedLinears(linears)

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:  # x [rows, in] -> ([rows, out_i], ...)
        if self.kernel == BLOCKS:
            y = torch.ops.specviz.gemv_blocks(x, self.layout, sum(self.sizes), self.block_format.ggml)
        else:
            y = torch.ops.specviz.gemv(x, self.layout, sum(self.sizes))
        return y.split(self.sizes, dim=-1)
