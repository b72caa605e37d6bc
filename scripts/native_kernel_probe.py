"""The native kernel beside oneDNN's packed one, side by side in one process, interleaved
(docs/benchmarks.md, "The native kernel"):

    PYTHONPATH=. HF_HUB_OFFLINE=1 .venv/bin/python scripts/native_kernel_probe.py

1. The offline target's whole pass (the lean forward over a 48-token context) for 1 and 5 new rows,
   loaded once with SPECVIZ_KERNELS=packed and once with native; milliseconds and the share of the
   memory roofline (the bandwidth a torch sum reaches, measured in the same process).
2. One linear of the MLP's shape (1536 x 576) for 1 to 128 rows: where a verification pass and a
   class's batched pass fall.
Run it on a quiet machine; figures move by tens of percent between processes here.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz.engine import native  # noqa: E402
from specviz.engine.models import load_model  # noqa: E402
from specviz.labs.roofline import measured_bandwidth, step_bytes  # noqa: E402

REPS = 25


def whole_pass() -> None:
    models = {}
    for kernel in ("packed", "native"):
        os.environ["SPECVIZ_KERNELS"] = kernel
        models[kernel] = load_model()
    bandwidth, nbytes = measured_bandwidth(), step_bytes(models["packed"].model)
    at_roofline = nbytes / bandwidth * 1e3
    print(f"bandwidth {bandwidth / 1e9:.1f} GB/s; {nbytes / 1e6:.0f} MB a step: {at_roofline:.1f} ms at the roofline")
    context = torch.arange(48) * 7919 % models["packed"].logits_width  # [48] a fixed stand-in for a prompt
    caches, ms = {}, {(k, rows): [] for k in models for rows in (1, 5)}
    with torch.inference_mode():
        for kernel, model in models.items():
            caches[kernel] = model.lean.new_cache()
            model.lean.forward(context, caches[kernel], keep=1)
        for rep in range(REPS):
            for kernel in list(models)[:: 1 if rep % 2 else -1]:  # alternate which goes first
                for rows in (1, 5):
                    start = time.perf_counter()
                    models[kernel].lean.forward(context[:rows], caches[kernel], keep=rows)
                    ms[(kernel, rows)].append((time.perf_counter() - start) * 1e3)
                    caches[kernel].crop(48)
    for (kernel, rows), times in ms.items():
        median = statistics.median(times[3:])
        print(f"{kernel:6s} {rows} row(s): {median:5.1f} ms, {nbytes / (median / 1e3) / bandwidth:.2f} of the roofline")


def one_linear(out_features: int = 1536, in_features: int = 576, copies: int = 20) -> None:
    weights = [torch.randn(out_features, in_features) for _ in range(copies)]  # more than the caches hold
    kernels = {
        "native": (
            lambda x, w: torch.ops.specviz.gemv(x, w, out_features),
            [torch.ops.specviz.pack_rows(w) for w in weights],
        ),
        "packed": (
            lambda x, w: torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], ""),
            [torch.ops.mkldnn._reorder_linear_weight(w) for w in weights],
        ),
    }
    for rows in (1, 4, 7, 16, 32, 64, 128):
        x, times = torch.randn(rows, in_features), {k: [] for k in kernels}
        for _ in range(9):
            for name, (run, layouts) in kernels.items():
                start = time.perf_counter()
                for layout in layouts:
                    run(x, layout)
                times[name].append((time.perf_counter() - start) / copies * 1e3)
        print(f"{rows:3d} rows: " + ", ".join(f"{k} {statistics.median(v):.2f} ms" for k, v in times.items()))


def main() -> int:
    reason = native.unavailable()
    if reason:
        print(reason)
        return 1
    whole_pass()
    one_linear()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
