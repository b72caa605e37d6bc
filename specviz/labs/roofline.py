"""How close a decode step runs to this machine's memory roofline.

A one-token step of a small target on a CPU is memory-bound: every weight of its linears is read
once per step, and little else is. So the fastest a step can be is the bytes it streams over the
bandwidth the machine sustains, and a target alone at `tok/s` streams `bytes x tok/s` per second:

    fraction of the roofline = (streamed bytes per step x tokens per second) / measured bandwidth

`measured_bandwidth` times what the bench calls the roofline: torch summing a tensor far larger
than the caches, on the threads the decode uses (a sum reads each byte once and computes almost
nothing). `step_bytes` counts what a step must read: the weights of every linear the step runs
(the layouts their kernels hold, specviz.engine.packing) and the norms; the embedding's one row
and the KV cache of a short context are left out (a small share here): a step cannot stream less than
this, so the fraction never flatters the engine.
"""

from __future__ import annotations

import statistics
import time

BANDWIDTH_BYTES = 512 * 2**20  # the tensor summed: far beyond any CPU's last-level cache
BANDWIDTH_REPS = 7  # median of these (after one untimed warm-up)
STEP_PAIRS = 15  # a one-token step and a sum, timed one after the other this many times (step_beside_sum)


def measured_bandwidth(nbytes: int = BANDWIDTH_BYTES, reps: int = BANDWIDTH_REPS) -> float:
    """Bytes per second torch reads while summing a float32 tensor of `nbytes` (median of `reps`)."""
    import torch

    data = torch.ones(nbytes // 4, dtype=torch.float32)  # [n] touched once, so its pages exist
    times = []
    for rep in range(reps + 1):
        start = time.perf_counter()
        data.sum()
        if rep:  # the first sum warms the threads up
            times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times)


def step_beside_sum(target, pairs: int = STEP_PAIRS, nbytes: int = BANDWIDTH_BYTES) -> dict:
    """The target's one-token step (a pass over a short cached context, as specviz.engine.kernels
    times it) and a sum, timed one after the other `pairs` times, in alternating order. Each pair
    gives a share: (the step's bytes / its time) / (the sum's bytes / its time); the figure is their
    median. What is summed: the very tensors the step reads, one after another as the step reads
    them, where they are plain tensors (native and eager kernels); else (oneDNN's opaque packed
    layouts) a fresh tensor of `nbytes`. A fresh tensor's speed can move from one allocation to the
    next while the step's own weights stay put (docs/benchmarks.md, "The native kernel, measured at
    load"), so the step's own bytes, timed beside it, are its roofline."""
    import torch

    from specviz.engine.kernels import context_passes

    prepare, run = context_passes(target.model, target.lean)
    own = _tensors_a_step_reads(target.model)
    tensors = own if own is not None else [torch.ones(nbytes // 4, dtype=torch.float32)]
    summed = sum(t.numel() * t.element_size() for t in tensors)
    bytes_per_step = step_bytes(target.model)

    def read_all() -> None:
        for t in tensors:
            t.sum()

    shares, steps, sums = [], [], []
    with torch.inference_mode():
        prepare()
        run(1)  # warm-up, untimed
        read_all()
        for pair in range(pairs):
            took = {}
            for what in ("step", "sum") if pair % 2 == 0 else ("sum", "step"):
                start = time.perf_counter()
                if what == "step":
                    run(1)
                else:
                    read_all()
                took[what] = time.perf_counter() - start
            steps.append(took["step"])
            sums.append(took["sum"])
            shares.append((bytes_per_step / took["step"]) / (summed / took["sum"]))
    return {
        "pairs": pairs,
        "summed": "the step's own weights" if own is not None else f"a fresh {nbytes >> 20} MiB tensor",
        "step_ms": round(statistics.median(steps) * 1e3, 2),
        "bandwidth_gb_s": round(summed / statistics.median(sums) / 1e9, 2),
        "fraction": round(statistics.median(shares), 3),
    }


def _tensors_a_step_reads(module) -> list | None:
    """The tensors a one-token step of `module` reads as step_bytes counts them (each linear's
    one-row kernel's layout, the other parameters but a token embedding), in the module's order, or
    None where one of them is not a plain tensor (oneDNN's packed layouts)."""
    import torch
    from torch import nn

    from specviz.engine.packing import EAGER, KernelLinear

    tensors, linear_weights = {}, set()
    for m in module.modules():
        if isinstance(m, KernelLinear):
            linear_weights.add(id(m.weight))
            t = m.weight if m.one_row == EAGER else m.layouts.get(m.one_row)
        elif isinstance(m, nn.Linear):
            linear_weights.add(id(m.weight))
            t = m.weight
        else:
            continue
        if t is None or t.is_meta or t.layout != torch.strided:
            return None
        tensors[(t.data_ptr(), t.numel())] = t
    for p in _other_parameters(module, linear_weights):
        tensors[(p.data_ptr(), p.numel())] = p
    return [t.detach() for t in tensors.values()]


def step_bytes(module) -> int:
    """Bytes one one-token step of `module` (a causal LM, or a draft head) reads: its linears'
    weights as their kernels hold them, and every other parameter but a token embedding (a step
    looks up one row of it). A weight two modules share (a tied LM head) counts once."""
    from specviz.engine.packing import BLOCKS

    linear_weights = {}
    for m in module.modules():
        weight = getattr(m, "weight", None)
        if weight is not None and hasattr(m, "in_features"):  # a linear, eager or packed
            blocks = getattr(m, "layouts", {}).get(BLOCKS)  # the weights as shipped: the blocks' bytes
            size = weight.numel() * weight.element_size()  # a meta weight keeps its shape
            linear_weights[id(weight)] = blocks.numel() if blocks is not None else size
    others = _other_parameters(module, set(linear_weights))
    return sum(linear_weights.values()) + sum(p.numel() * p.element_size() for p in others)


def _other_parameters(module, linear_weights: set[int]) -> list:
    """`module`'s parameters a step reads besides its linears' weights (ids in `linear_weights`):
    all but a token embedding's (a step looks up one row of it), each once."""
    from torch import nn

    embeddings = {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding)}
    return [p for p in module.parameters() if id(p) not in embeddings and id(p) not in linear_weights]


def roofline_fraction(tokens_per_s: float, bytes_per_step: int, bandwidth: float) -> float:
    """The share of the measured bandwidth a decode at `tokens_per_s` streams."""
    return tokens_per_s * bytes_per_step / bandwidth


def describe(name: str, tokens_per_s: float, bytes_per_step: int, bandwidth: float) -> str:
    """One line for the bench: what the step streams, how fast, and the share of the roofline."""
    fraction = roofline_fraction(tokens_per_s, bytes_per_step, bandwidth)
    floor_ms = bytes_per_step / bandwidth * 1e3
    return (
        f"{name}: {bytes_per_step / 1e6:.0f} MB a step x {tokens_per_s:.1f} tok/s = "
        f"{tokens_per_s * bytes_per_step / 1e9:.1f} GB/s = {fraction:.2f} of the roofline "
        f"(a step at the roofline: {floor_ms:.1f} ms; measured: {1e3 / tokens_per_s:.1f} ms)"
    )


def draft_module(draft, target):
    """The module whose weights a draft step reads, or None for a drafter with no weights (the n-gram):
    of the drafter the decoder builds from `draft` (specviz.drafters.resolve_drafter, the one place that
    knows the names): a draft model's, the draft head's (the hybrid's and the paper preset's too), the
    target's when it drafts itself."""
    from specviz.drafters import HybridDrafter, resolve_drafter

    drafter = resolve_drafter(draft, target)
    if isinstance(drafter, HybridDrafter):
        drafter = drafter.head_drafter
    if hasattr(drafter, "head"):  # a HeadDrafter
        return drafter.head
    loaded = getattr(drafter, "loaded", None)  # a ModelDrafter
    return loaded.model if loaded is not None else None


def report(bandwidths: list[float], target, runs: list[dict], drafts: dict, beside: dict | None = None) -> dict:
    """The bench's roofline section: the bandwidth, the fastest of `bandwidths` (sums measured before
    and after the sweeps: a virtual machine's bandwidth can move a lot between minutes, and the
    roofline is the most it showed, so a slow moment never flatters a share, docs/benchmarks.md);
    the target alone's bytes a step and, per
    temperature, its measured step and the share of the roofline; each draft's the same, its step
    being c x the target's step (the median over its rows at that temperature). drafts: name -> the
    draft as the bench ran it (a name or a loaded model)."""
    bandwidth = max(bandwidths)
    target_bytes = step_bytes(target.model)
    out = {
        "bandwidth_gb_s": round(bandwidth / 1e9, 2),
        "bandwidth_samples_gb_s": [round(b / 1e9, 2) for b in bandwidths],
        "target": {"bytes_per_step": target_bytes},
        "drafts": {},
    }
    if beside is not None:  # step_beside_sum's figures
        out["target"]["step_beside_sum"] = beside
    baseline = runs[0]["baseline"]
    out["target"]["by_temperature"] = {
        t: _share(target_bytes, b["target_step_ms"], bandwidth) for t, b in baseline.items()
    }
    for run in runs:
        module = draft_module(drafts[run["draft"]], target)
        if module is None:
            continue
        nbytes = step_bytes(module)
        by_t = {}
        for t, b in run["baseline"].items():
            cs = sorted(r["c"] for r in run["results"] if str(r["temperature"]) == str(t) and r.get("c"))
            if cs:
                by_t[t] = _share(nbytes, cs[len(cs) // 2] * b["target_step_ms"], bandwidth)
        out["drafts"][run["draft"]] = {"bytes_per_step": nbytes, "by_temperature": by_t}
    return out


def _share(nbytes: int, step_ms: float, bandwidth: float) -> dict:
    return {
        "step_ms": round(step_ms, 2),
        "roofline_ms": round(nbytes / bandwidth * 1e3, 2),
        "fraction": round(nbytes / (step_ms / 1e3) / bandwidth, 3),
    }


def markdown_lines(section: dict) -> list[str]:
    """The roofline section as the bench's markdown prints it."""
    bw = section["bandwidth_gb_s"]
    samples = ", ".join(f"{b:.1f}" for b in section.get("bandwidth_samples_gb_s", [bw]))
    lines = [f"- memory bandwidth (torch summing {BANDWIDTH_BYTES >> 20} MiB, the most of {samples}): {bw:.1f} GB/s"]
    beside = section["target"].get("step_beside_sum")
    if beside:
        lines.append(
            f"- target alone, a one-token step timed beside a sum of {beside.get('summed', 'a tensor')} "
            f"({beside['pairs']} pairs, alternating): "
            f"{beside['step_ms']:.1f} ms against {beside['bandwidth_gb_s']:.1f} GB/s: "
            f"**{beside['fraction']:.2f} of the roofline** (the median of the pairs' shares)"
        )
    entries = [("target alone", section["target"])] + [(f"draft `{n}`", d) for n, d in section["drafts"].items()]
    for name, entry in entries:
        for t, s in entry["by_temperature"].items():
            lines.append(
                f"- {name} at T={t}: {entry['bytes_per_step'] / 1e6:.0f} MB a step in {s['step_ms']:.1f} ms "
                f"(at the roofline {s['roofline_ms']:.1f} ms): {s['fraction']:.2f} of the roofline"
            )
    return lines
