"""What a verification pass costs on this machine: v(rows), one target pass of `rows` new tokens over
a short cached context ÷ a one-row step, measured once per loaded target and cached per machine.

The dynamic draft tree (specviz.drafters.head_tree) chooses how many nodes to send from it: a node is
worth a row only while the tokens it is expected to add pay for what the row costs, and how flat
v(rows) is differs from machine to machine (docs/benchmarks.md, "A draft that pays"). The numbers are
kept in <cache>/verify_cost.json under the machine, the model and its kernels
(specviz.engine.kernels.machine_key, .describe), as kernels.json keeps the kernels, so a later load
measures nothing; `measure` is the one measurement, and the draft report prints it too.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

ROWS_MAX = 17  # a pass of 1 + the dynamic tree's most nodes (config.DYNAMIC_TREE_NODES)
REPS = 5  # interleaved repetitions per row count: a stable median in a few seconds
CONTEXT_TOKENS = 48  # the context a measured pass attends to (a short chat prompt), as kernels.py's

_measured: dict[int, tuple] = {}  # id(target model) -> (the model, v by rows, one-row seconds)


def pass_costs(target) -> tuple[list[float], float]:
    """(v [ROWS_MAX + 1], v[r] for a pass of r rows, v[0] = 0 and v[1] = 1; the one-row step in
    seconds) of a loaded target (specviz.engine.models.LoadedModel): measured on its first call here
    or on this machine, then read back."""
    from specviz.engine.kernels import describe, machine_key
    from specviz.engine.models import cache_dir

    held = _measured.get(id(target.model))
    if held is not None and held[0] is target.model:
        return held[1], held[2]
    key = f"{machine_key(target.name)} | {target.dtype} | {describe(target.kernels)} | {target.forward}"
    path = cache_dir() / "verify_cost.json"
    record = _read(path).get(key)
    if not isinstance(record, dict) or len(record.get("v") or []) != ROWS_MAX + 1:  # none yet, or damaged
        v, one = measure(target, tuple(range(1, ROWS_MAX + 1)))
        record = {"v": [0.0] + [v[r] for r in range(1, ROWS_MAX + 1)], "one_row_s": one}
        _write(path, key, record)
    v = rising(record["v"])
    _measured[id(target.model)] = (target.model, v, record["one_row_s"])
    return v, record["one_row_s"]


def rising(v: list[float]) -> list[float]:
    """The measured v(rows) as the budget reads it: each entry at least every one before it. A pass of
    more rows does all the work of a pass of fewer, so a dip (5 rows timed cheaper than 3) is timing
    noise, and a budget that believed it would send the rows of the dip and not the fewer ones."""
    out, top = [], 0.0
    for x in v:
        top = max(top, x)
        out.append(top)
    return out


def measure(target, rows: tuple[int, ...], reps: int = REPS) -> tuple[dict[int, float], float]:
    """({rows: the median pass of `rows` new tokens ÷ the median one-row step}, that step in seconds),
    every row count timed interleaved, so a drift of the machine falls on all of them alike."""
    from specviz.engine.kernels import context_passes

    if torch.device(target.device).type != "cpu":
        return _measure_on_device(target, rows, reps)
    prepare, run = context_passes(target.model, target.lean)
    with torch.inference_mode():
        prepare()
        times = _timed(run, (1, *rows), reps)
    one = statistics.median(times[1])
    return {r: statistics.median(times[r]) / one for r in rows}, one


def _measure_on_device(target, rows: tuple[int, ...], reps: int) -> tuple[dict[int, float], float]:
    """measure on an accelerator: transformers' forward over a cache, synchronised around each pass."""
    from transformers import DynamicCache

    vocab = target.model.get_output_embeddings().weight.shape[0]
    context = ((torch.arange(CONTEXT_TOKENS) * 7919) % vocab).to(target.device)
    cache = DynamicCache(config=target.model.config)

    def run(r: int) -> None:
        target.model(context[None, :r], past_key_values=cache, use_cache=True)
        cache.crop(CONTEXT_TOKENS)
        torch.cuda.synchronize(target.device)

    with torch.inference_mode():
        target.model(context[None], past_key_values=cache, use_cache=True)
        times = _timed(run, (1, *rows), reps)
    one = statistics.median(times[1])
    return {r: statistics.median(times[r]) / one for r in rows}, one


def _timed(run, rows: tuple[int, ...], reps: int) -> dict[int, list[float]]:
    times: dict[int, list[float]] = {r: [] for r in rows}
    run(rows[-1])  # a warm-up: first calls pay for allocations
    for _ in range(reps):
        for r in times:
            t0 = time.perf_counter()
            run(r)
            times[r].append(time.perf_counter() - t0)
    return times


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, key: str, record: dict) -> None:
    data = {**_read(path), key: record}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(f.name, path)  # atomic: two processes never leave a half-written file
    except OSError:
        pass  # a read-only cache only costs a measurement next time
