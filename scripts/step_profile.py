"""Where a one-token target step's time goes, beside this machine's memory roofline.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/step_profile.py [--target NAME] [--steps 40]

Run it with nothing else on the machine. It loads the target as the app does (kernels chosen here,
the lean forward), prefills a short chat prompt, and times one-token steps three ways, interleaved:

- the whole step (the lean forward's one new token, logits of the last row);
- the same step's linears alone: each linear called on one row as the step calls it, in order;
- every weight read once: a sum over a plain tensor of each linear's size, one by one.

It prints each as ms per step and GB/s over the step's bytes (specviz.labs.roofline.step_bytes),
the measured bandwidth, and the split by operator from torch.profiler (linears, attention, norms
and rotary, the rest), so the gap to the roofline is named before anything is changed. Then two
probes of what could close it: the step's linears as loaded (seven products a layer) against q, k, v
and gate, up fused (four), and one-row products of each shape with every kernel torch offers
(eager, torch.mv, oneDNN packed, and bfloat16 packed, which reads half the bytes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz.engine.machine import cpu_name  # noqa: E402
from specviz.engine.models import DEFAULT_TARGET, load_model  # noqa: E402
from specviz.labs import roofline  # noqa: E402


def linears_in_step_order(model) -> list:
    """The step's linears as the lean forward calls them: per layer q, k, v, o, gate, up, down; the LM head."""
    order = []
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        order += [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj]
    return [*order, model.lm_head]


def timed(fn, steps: int) -> list[float]:
    out = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e3)
    return out


def interleaved(candidates: dict, steps: int, rounds: int = 5) -> dict[str, float]:
    """Median ms of each candidate, timed in alternating rounds so drifts of the machine fall on all."""
    samples = {name: [] for name in candidates}
    for fn in candidates.values():  # warm-up, untimed
        timed(fn, 2)
    for _ in range(rounds):
        for name, fn in candidates.items():
            samples[name] += timed(fn, max(1, steps // rounds))
    return {name: statistics.median(v) for name, v in samples.items()}


def operator_split(step, steps: int) -> dict[str, float]:
    """ms per step by kind of operator, from torch.profiler's self CPU times."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    kinds = {"linears": 0.0, "attention": 0.0, "norms, rotary, adds": 0.0, "cache writes, copies": 0.0, "other": 0.0}
    for event in prof.key_averages():
        name, ms = event.key, event.self_cpu_time_total / 1e3 / steps
        if "linear" in name or "mkldnn" in name or name in ("aten::addmm", "aten::mm", "aten::matmul"):
            kinds["linears"] += ms
        elif "attention" in name or "softmax" in name or "bmm" in name:
            kinds["attention"] += ms
        elif name in ("aten::mul", "aten::add", "aten::pow", "aten::mean", "aten::rsqrt", "aten::neg", "aten::cat",
                      "aten::cos", "aten::sin", "aten::silu", "aten::to", "aten::_to_copy"):  # fmt: skip
            kinds["norms, rotary, adds"] += ms
        elif name in ("aten::copy_", "aten::index", "aten::slice", "aten::select", "aten::view", "aten::transpose"):
            kinds["cache writes, copies"] += ms
        else:
            kinds["other"] += ms
    return kinds


def packed(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous())


def packed_product(x: torch.Tensor, layout: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, layout, None, "none", [], "")


def fused_probe(model, steps: int) -> dict[str, float]:
    """ms of one step's linears: seven products a layer as loaded, or four with q|k|v and gate|up fused."""
    layers, fused = model.model.layers, []
    for layer in layers:
        a, m = layer.self_attn, layer.mlp
        qkv = torch.cat([a.q_proj.weight_as_loaded(), a.k_proj.weight_as_loaded(), a.v_proj.weight_as_loaded()])
        gate_up = torch.cat([m.gate_proj.weight_as_loaded(), m.up_proj.weight_as_loaded()])
        fused.append(
            (packed(qkv), packed(a.o_proj.weight_as_loaded()), packed(gate_up), packed(m.down_proj.weight_as_loaded()))
        )
    head = packed(model.lm_head.weight_as_loaded())
    x, wide = torch.randn(1, model.config.hidden_size), torch.randn(1, model.config.intermediate_size)

    def seven() -> None:
        for layer in layers:
            a, m = layer.self_attn, layer.mlp
            for lin in (a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj):
                lin(x)
            m.down_proj(wide)
        model.lm_head(x)

    def four() -> None:
        for qkv, o, gate_up, down in fused:
            packed_product(x, qkv), packed_product(x, o), packed_product(x, gate_up), packed_product(wide, down)
        packed_product(x, head)

    return interleaved({"seven products a layer": seven, "four, fused": four}, steps)


def shape_rates(rows: int, cols: int, copies: int) -> dict[str, float]:
    """GB/s of one-row products with a [rows, cols] weight, per kernel (bfloat16's over its own, halved,
    bytes); `copies` weights in turn, so none is served from a cache."""
    weights = [torch.randn(rows, cols) for _ in range(copies)]
    layouts, halves = [packed(w) for w in weights], [packed(w.bfloat16()) for w in weights]
    x = torch.randn(1, cols)
    kernels = {
        "eager": lambda: [torch.nn.functional.linear(x, w) for w in weights],
        "torch.mv": lambda: [torch.mv(w, x[0]) for w in weights],
        "packed": lambda: [packed_product(x, p) for p in layouts],
        "bf16 packed": lambda: [packed_product(x.bfloat16(), p) for p in halves],
    }
    ms = interleaved(kernels, 10, rounds=5)
    full = rows * cols * 4 * copies
    return {k: full / (2 if k.startswith("bf16") else 1) / (v / 1e3) / 1e9 for k, v in ms.items()}


def step_shapes(config) -> dict[str, tuple[int, int]]:
    """The weight shapes of one layer's products, q|k|v and gate|up fused, and the LM head's."""
    d, ff = config.hidden_size, config.intermediate_size
    kv = config.num_key_value_heads * d // config.num_attention_heads
    return {
        "q|k|v": (d + 2 * kv, d),
        "o": (d, d),
        "gate|up": (2 * ff, d),
        "down": (d, ff),
        "LM head": (config.vocab_size, d),
    }


def print_probes(model, steps: int) -> None:
    """What could close the gap: fused products, and every kernel torch offers per shape."""
    with torch.inference_mode():
        fusion = fused_probe(model, steps)
        shapes = step_shapes(model.config)
        copies = {name: max(2, min(30, (256 << 20) // (r * c * 4))) for name, (r, c) in shapes.items()}
        kernels = {name: shape_rates(r, c, copies[name]) for name, (r, c) in shapes.items()}
    print("the step's linears, fused or not (ms):", ", ".join(f"{k} {v:.1f}" for k, v in fusion.items()))
    print("one-row products, GB/s (bfloat16 over its own bytes):")
    for name, rates in kernels.items():
        print(f"  {name:8s} {shapes[name]}: " + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=DEFAULT_TARGET)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args(argv)
    loaded = load_model(args.target)
    lean = loaded.lean
    if lean is None:
        print(f"{args.target} has no lean forward here ({loaded.forward}); nothing to profile", file=sys.stderr)
        return 1
    prompt = loaded.tokenizer("Explain why the sky is blue to a curious child.", return_tensors="pt").input_ids[0]
    cache = lean.new_cache()
    token = torch.tensor([int(prompt[-1])])

    with torch.inference_mode():
        lean.forward(prompt, cache, keep=1)
        context = cache.length

        def step() -> None:
            lean.forward(token, cache, keep=1)
            cache.length = context  # the same position every time: a steady step

        linears = linears_in_step_order(loaded.model)
        row = torch.randn(1, linears[0].in_features)
        wide = torch.randn(1, loaded.model.config.intermediate_size)

        def linears_alone() -> None:
            for lin in linears:
                lin(wide if lin.in_features == wide.shape[1] else row)

        # A packed layout is an opaque oneDNN tensor torch cannot sum: plain tensors of the same sizes
        # stand in for it (the bytes are what matter, one tensor per linear as the step reads them).
        plain = [torch.ones(lin.out_features, lin.in_features) for lin in linears]

        def read_once() -> None:
            for w in plain:
                w.sum()

        ms = interleaved({"whole step": step, "its linears alone": linears_alone, "each weight read once": read_once},
                         args.steps)  # fmt: skip
        split = operator_split(step, max(5, args.steps // 4))
    nbytes = roofline.step_bytes(loaded.model)
    bandwidth = roofline.measured_bandwidth()
    print(f"{cpu_name()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")
    print(f"{args.target}: {nbytes / 1e6:.0f} MB a step; kernels {loaded.kernels.get('one_row', loaded.kernels)}")
    print(f"bandwidth (a {roofline.BANDWIDTH_BYTES >> 20} MiB sum): {bandwidth / 1e9:.1f} GB/s "
          f"-> a step at the roofline: {nbytes / bandwidth * 1e3:.1f} ms")  # fmt: skip
    for name, value in ms.items():
        rate = nbytes / (value / 1e3)  # bytes per second
        print(f"  {name:24s} {value:6.1f} ms  = {rate / 1e9:5.1f} GB/s  = {rate / bandwidth:.2f} of it")
    print("by operator (torch.profiler, ms per step; the profiler's own cost included):")
    for kind, value in split.items():
        print(f"  {kind:24s} {value:6.1f} ms")
    print_probes(loaded.model, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
