"""The device check's step measurements and its printed report (specviz.labs.bench_device).

time_steps times one pass of R new rows over a cached context through every forward the device has,
interleaved; step_exactness sets their logits side by side; time_head_steps and head_exactness do the
same for the draft head's step (eager, static, captured on CUDA); roofline is the floor a step cannot
beat (the bytes it must stream over the device's measured bandwidth); render prints it all.
"""

from __future__ import annotations

import statistics
import time

import torch

CONTEXT = 64  # cached tokens before each timed pass (a short chat prompt)
REPS = 7  # timed samples per forward and row count (median)
INNER = 10  # passes per sample: a GPU pass is too short to time alone


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: str) -> str:
    from specviz.engine.machine import cpu_name

    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_name()}, {torch.get_num_threads()} thread(s)"


def forwards(target, model) -> dict:
    """name -> (new cache(), pass(ids [R], cache) -> logits [R, V]) for each forward this target has."""
    from specviz.engine.lean_llama import LeanLlama
    from specviz.engine.static_llama import StaticLlama
    from specviz.engine.target import crop_cache, forward_logits

    def dynamic_cache():
        from transformers import DynamicCache

        return DynamicCache(config=model.config)

    def passes(forward):  # keep: the rows whose logits are made (all: a verification pass)
        return lambda ids, cache, keep=None: forward(ids, cache, keep or ids.shape[0])[0]

    def transformers_pass(ids, cache, keep=None):
        return forward_logits(model, ids, cache, keep or ids.shape[0])

    eager = StaticLlama(target.lean or LeanLlama(model, cpu_only=False))
    out = {}
    if target.lean is not None:
        out["lean forward"] = (target.lean.new_cache, passes(target.lean.forward))
    out["static step, eager"] = (lambda: eager.new_cache(CONTEXT + 64), passes(eager.forward))
    if target.static is not None:
        out["static step, CUDA graph"] = (lambda: target.static.new_cache(CONTEXT + 64), passes(target.static.forward))
    out["transformers eager"] = (dynamic_cache, transformers_pass)
    return {name: (new, run, crop_cache) for name, (new, run) in out.items()}


def time_steps(target, model, rows: list[int]) -> dict:
    """{forward: {R: ms per pass}}: passes of R new rows over CONTEXT cached tokens (each rolled back
    after), every forward's samples interleaved with the others' so drift hits them alike."""
    device = model.device
    vocab = model.config.vocab_size
    context = (torch.arange(CONTEXT, device=device) * 7919) % vocab  # [C] a fixed stand-in for a prompt
    runs = {}
    for name, (new, run, crop) in forwards(target, model).items():
        cache = new()
        run(context, cache, 1)
        runs[name] = (cache, run, crop)

    def inputs(r, rep):
        return ((torch.arange(r, device=device) * 31 + rep) % vocab,)  # ids [R]

    return interleaved(runs, inputs, rows, device)


def interleaved(runs: dict, inputs, rows: list[int], device) -> dict:
    """runs: name -> (cache holding CONTEXT entries, run(*inputs, cache), crop(cache, n)); inputs(R, rep)
    -> one pass's inputs -> {name: {R: ms per pass}}, the names' samples interleaved (the order
    rotating per sample) and each pass rolled back to CONTEXT after."""
    times: dict = {name: {r: [] for r in rows} for name in runs}
    for rep in range(REPS + 1):  # the first round is a warm-up (a graph is captured there)
        for r in rows:
            args = inputs(r, rep)
            names = list(runs)
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                cache, run, crop = runs[name]
                sync(device)
                start = time.perf_counter()
                for _ in range(INNER):
                    run(*args, cache)
                    crop(cache, CONTEXT)
                sync(device)
                if rep:
                    times[name][r].append((time.perf_counter() - start) / INNER * 1e3)
    return {name: {r: statistics.median(ms) for r, ms in per.items()} for name, per in times.items()}


def head_steps(head) -> dict:
    """name -> (new cache(), step(features [R, D], tokens [R], first_index, cache) -> (f^, logits)) for
    each way this device runs the draft head's chain step: eager (a growing HeadCache), the static
    step (specviz.engine.static_head) eager and, where the loaded head has it, captured (CUDA)."""
    from specviz.engine.draft_head import HeadCache
    from specviz.engine.static_head import StaticHead

    eager = StaticHead(head)
    out = {
        "head step, eager": (HeadCache, head.step),
        "head static step, eager": (lambda: eager.new_cache(CONTEXT + 64), eager.step),
    }
    if head.static is not None and head.static.capture is not None:
        out["head static step, CUDA graph"] = (lambda: head.static.new_cache(CONTEXT + 64), head.static.step)
    return out


def head_inputs(head, rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stand-in features [R, D] (random, unit scale) and tokens [R] (from the head's vocabulary)."""
    device = head.device
    features = torch.randn(rows, head.cfg.hidden, generator=torch.Generator().manual_seed(seed)).to(device)
    tokens = head.subset[(torch.arange(rows) * 31 + seed) % head.subset.shape[0]].to(device)
    return features, tokens


def time_head_steps(head, rows: list[int]) -> dict:
    """{head step: {R: ms per step}}: the head's chain step of R rows over CONTEXT cached entries (a
    catch-up of R - 1 accepted tokens, or R = 1 a drafting step), interleaved as time_steps does."""
    runs = {}
    for name, (new, step) in head_steps(head).items():
        cache = new()
        step(*head_inputs(head, CONTEXT, 0), 1, cache)
        runs[name] = (cache, lambda f, x, c, step=step: step(f, x, CONTEXT + 1, c), lambda c, n: c.crop(n))
    return interleaved(runs, lambda r, rep: head_inputs(head, r, rep + 1), rows, head.device)


def head_exactness(head, rows: int) -> dict:
    """One chain step of `rows` rows after CONTEXT entries through each head step: the static step
    against the eager head step, the captured one against the static step run eagerly (the same
    arithmetic): the largest difference in the subset logits, bit-identical or not, the same argmax."""
    logits = {}
    for name, (new, step) in head_steps(head).items():
        cache = new()
        step(*head_inputs(head, CONTEXT, 0), 1, cache)
        logits[name] = step(*head_inputs(head, rows, 1), CONTEXT + 1, cache)[1].float()  # [R, S]
    names = list(logits)
    return {
        name: {
            "against": base,
            "max_abs_diff": float((logits[name] - logits[base]).abs().max()),
            "bit_identical": bool(torch.equal(logits[name], logits[base])),
            "same_argmax": bool(torch.equal(logits[name].argmax(-1), logits[base].argmax(-1))),
        }
        for base, name in zip(names, names[1:], strict=False)
    }


def step_exactness(target, model, rows: int) -> dict:
    """One pass of `rows` rows after CONTEXT tokens through every forward, each against the static
    step's eager logits: the largest difference, bit-identical or not, the same argmax per row."""
    device = model.device
    vocab = model.config.vocab_size
    context = (torch.arange(CONTEXT, device=device) * 7919) % vocab
    ids = (torch.arange(rows, device=device) * 31) % vocab
    logits = {}
    for name, (new, run, _) in forwards(target, model).items():
        cache = new()
        run(context, cache, 1)
        logits[name] = run(ids, cache).float()  # [R, V]
    base = logits["static step, eager"]
    return {
        name: {
            "max_abs_diff": float((lg - base).abs().max()),
            "bit_identical": bool(torch.equal(lg, base)),
            "same_argmax": bool(torch.equal(lg.argmax(-1), base.argmax(-1))),
        }
        for name, lg in logits.items()
        if name != "static step, eager"
    }


def logit_gap(model, ids: list[int], a: int, b: int) -> float:
    """|logit(a) - logit(b)| after `ids`, from transformers' eager forward: a near-tie when small."""
    with torch.inference_mode():
        last = model(torch.tensor([ids], device=model.device)).logits[0, -1].float()  # [V]
    return float((last[a] - last[b]).abs())


def roofline(model, device: str) -> dict:
    """The bytes a one-row step streams (specviz.labs.roofline.step_bytes), the device's measured
    bandwidth (a sum over a tensor far beyond its caches) and the floor: bytes over bandwidth."""
    from specviz.labs.roofline import measured_bandwidth, step_bytes

    nbytes = step_bytes(model)
    if torch.device(device).type == "cuda":
        data = torch.ones(2**30 // 4, device=device)  # [n] 1 GiB
        seconds = []
        for rep in range(8):
            sync(device)
            start = time.perf_counter()
            data.sum()
            sync(device)
            if rep:
                seconds.append(time.perf_counter() - start)
        bandwidth = 2**30 / statistics.median(seconds)
    else:
        bandwidth = measured_bandwidth()
    return {"step_bytes": nbytes, "bandwidth": bandwidth, "floor_ms": nbytes / bandwidth * 1e3}


def render_steps(head: str, steps: dict, roof: dict, exact: dict) -> str:
    """The steps against the roofline and their logits against the eager static step's."""
    rows = ", ".join(str(r) for r in next(iter(steps.values())))
    floor = (
        f"roofline: {roof['step_bytes'] / 1e6:.1f} MB per step at {roof['bandwidth'] / 1e9:.1f} GB/s "
        f"-> {roof['floor_ms']:.3f} ms per step at the least"
    )
    lines = [head, "", floor, "", f"step, ms per pass (rows: {rows})"]
    for name, per in steps.items():
        cells = ", ".join(f"{ms:.3f}" for ms in per.values())
        lines.append(
            f"  {name:28s} {cells}   ({roof['floor_ms'] / per[min(per)]:.0%} of the roofline at {min(per)} row)"
        )
    for name, e in exact.items():
        lines.append(f"  {name} against the eager static step: max |Δlogit| {e['max_abs_diff']:.3g}, "
                     f"bit-identical {e['bit_identical']}, same argmax {e['same_argmax']}")  # fmt: skip
    return "\n".join(lines)


def render_head_steps(steps: dict, exact: dict) -> str:
    """The draft head's steps and their logits against the eager head step's."""
    rows = ", ".join(str(r) for r in next(iter(steps.values())))
    lines = ["", f"draft head step, ms per step (rows: {rows})"]
    for name, per in steps.items():
        lines.append(f"  {name:30s} " + ", ".join(f"{ms:.3f}" for ms in per.values()))
    for name, e in exact.items():
        lines.append(f"  {name} against the {e['against']}: max |Δlogit| {e['max_abs_diff']:.3g}, "
                     f"bit-identical {e['bit_identical']}, same argmax {e['same_argmax']}")  # fmt: skip
    return "\n".join(lines)


def render_decodes(speeds: dict, costs: dict, taus: list[float]) -> str:
    """Decode speeds side by side, an iteration's costs and the tokens/s predicted at a CPU run's τ."""
    lines = ["", "decode, greedy, tokens/s"]
    alone = speeds["specviz target alone"]
    for name, tps in speeds.items():
        lines.append(f"  {name:28s} {tps:9.1f}   ({tps / alone:.2f}x specviz's target alone)")
    iteration = costs["draft_ms"] + costs["verify_ms"]
    lines += [
        "",
        f"an iteration of the default: draft {costs['draft_ms']:.3f} ms + verify {costs['verify_ms']:.3f} ms; "
        f"one target step {costs['step_ms']:.3f} ms (traced runs); τ with the random draft {costs['tau_random']:.2f}",
    ]
    for tau in taus:
        lines.append(
            f"  at τ {tau:.2f} (a CPU run, real weights): {tau / iteration * 1e3:.1f} tokens/s predicted, "
            f"{tau * costs['step_ms'] / iteration:.2f}x the target alone"
        )
    return "\n".join(lines)


def render_agreement(agree: dict) -> str:
    lines = [""]
    for kind, a in agree.items():
        lines.append(f"greedy tokens equal to transformers' generate ({kind} cache): {a['equal']} of {a['prompts']} "
                     f"prompts; first differences (index, logit gap): {a['differences']}")  # fmt: skip
    return "\n".join(lines)
