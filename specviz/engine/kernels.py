"""Which kernel runs each model's linears on this CPU, chosen by measuring them here.

No single choice is fastest on every CPU this project meets (specviz.engine.packing, docs/benchmarks.md),
so when a model loads on the CPU in float32 its linears are timed in place, in two groups and
for two shapes:

    groups  "head": the output projection (the LM head: the largest single weight, 49152 x 576 for
            the offline target); "body": every other linear
    shapes  "one_row": one new token (every step of the target alone, a chain's draft step);
            "many_rows": the verification passes of the default drafts (1 + 2 x gamma rows for the
            head's two-branch tree at the default gamma, 1 + gamma for the n-gram chain)

For each shape, each group's candidates (specviz.engine.packing: eager, packed, native where it
builds here and the weights are float32, and for one row packed1; `candidates`) are timed
through the whole model, one group at a time with the other on its best so far, the
candidates interleaved over MEASURE_REPS repetitions; the median wins. The choice and every timing
are recorded (LoadedModel.kernels, the trace's config.kernels) and cached per machine, torch
version, thread count and model in <cache>/kernels.json (specviz.engine.models.cache_dir), so a later
load takes no measurement. While measuring, every candidate's layout is held at once (timed
interleaved, so a change in the machine's speed falls on all of them): the one load that measures
peaks at about four copies of the weights (docs/benchmarks.md), and frees all but the chosen.

SPECVIZ_KERNELS forces one choice for every group: "eager", "packed", "native" (specviz's own
kernel, specviz.engine.native: built here first), or "ONE_ROW/MANY_ROWS" such as "eager/packed";
"measure" measures again and replaces the cached choice.

Exactness: with one kernel for every shape a row's numbers do not depend on how many rows share
the call (packed, native), so greedy output is bit-identical to the target alone. Where the two shapes
use different kernels, a verification pass and a one-token step round differently (about 1e-5
in a logit), so a greedy token may differ only where the target's two best logits are that close:
specviz.traces.sameness names such a near-tie with its gap.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from specviz.config import TREE_BRANCHES, default_verify_rows
from specviz.engine import native
from specviz.engine.packing import (
    BLOCKS,
    MANY_ROWS_KERNELS,
    NATIVE,
    ONE_ROW_KERNELS,
    PACKED,
    KernelLinear,
    kernel_linears,
)
from specviz.errors import ConfigError

MEASURE_REPS = 5  # per candidate and shape: a stable median in a few seconds (docs/benchmarks.md, "Load cost")
CONTEXT_TOKENS = 48  # the context a measured pass attends to (a short chat prompt)
GROUPS = ("body", "head")
SHAPES = ("one_row", "many_rows")
CACHE_SCHEMA = 4  # 4: the native kernel is a candidate again, rebuilt (choices made without it are measured again)
# A second copy of a group's weights (a one-row and a several-row kernel with layouts of their own)
# stays only when neither kernel comes within this share of the other on the other's shape
# (one_layout_unless_it_pays). Whole-step medians of the same kernel move between loads (by how
# much: docs/benchmarks.md, "The native kernel, measured at load"), so a smaller gain is not told
# apart from noise, while the copy costs the group's weight bytes for sure.
SECOND_LAYOUT_MIN_SAVING = 0.10


def candidates(shape: str, linears: list[KernelLinear]) -> tuple[str, ...]:
    """The kernels measured for `shape`: every kernel specviz.engine.packing offers for it, specviz's
    native one only where it builds here and the weights are float32 (its gains and costs by row
    count: docs/benchmarks.md, "The native kernel, measured at load")."""
    kernels = ONE_ROW_KERNELS if shape == "one_row" else MANY_ROWS_KERNELS
    if NATIVE in kernels and _native_unavailable(linears) is not None:
        kernels = tuple(k for k in kernels if k != NATIVE)
    return kernels


def forced_choice() -> dict[str, str] | None:
    """The choice SPECVIZ_KERNELS forces, {"one_row": k, "many_rows": k}, or None to measure."""
    value = os.environ.get("SPECVIZ_KERNELS", "").strip().lower()
    if value in ("", "measure"):
        return None
    one, _, many = value.partition("/")
    many = many or one
    if one not in ONE_ROW_KERNELS or many not in MANY_ROWS_KERNELS:
        raise ConfigError(
            f"SPECVIZ_KERNELS={value!r} is not a kernel choice: use eager, packed, ONE_ROW/MANY_ROWS "
            f"(one row: {', '.join(ONE_ROW_KERNELS)}; several rows: {', '.join(MANY_ROWS_KERNELS)}), or measure."
        )
    return {"one_row": one, "many_rows": many}


def describe(kernels) -> str:
    """A one-line name for a kernels record (or the plain string older traces stored)."""
    if isinstance(kernels, str):
        return kernels
    if not isinstance(kernels, dict):
        return "unknown"
    if kernels.get("reason"):
        return f"eager: {kernels['reason']}"
    chosen = {shape: kernels.get(shape, {}) for shape in SHAPES}
    kinds = {k for per_group in chosen.values() for k in per_group.values()}
    if len(kinds) == 1:
        return kinds.pop()
    parts = []
    for shape, words in (("one_row", "one row"), ("many_rows", "several rows")):
        per_group = chosen[shape]
        if len(set(per_group.values())) == 1:
            parts.append(f"{words} {next(iter(per_group.values()))}")
        else:
            parts.append(f"{words} " + ", ".join(f"{g} {k}" for g, k in per_group.items()))
    return "; ".join(parts)


def choose(
    key: str,
    cache_file: Path,
    module,
    output_projection,
    run: Callable[[int], None],
    many_rows: tuple[int, ...],
    prepare: Callable[[], None] | None = None,
) -> dict:
    """Set the kernels of `module`'s linears and return the record of the choice.

    output_projection(): the module's LM head (its own group), looked up once the linears are
    swapped. run(rows): one representative pass of `rows` new rows, leaving the module's state as
    it found it. many_rows: the row counts of the verification passes to time. prepare(): sets up
    the state run() needs (a prefilled cache)."""
    linears, reason = kernel_linears(module)
    if reason is not None:
        return {"reason": reason}
    head = output_projection()
    groups = {"head": [m for m in linears if m is head], "body": [m for m in linears if m is not head]}
    shared = shared_weights(module)
    forced = forced_choice()
    if forced is not None:
        choice = {shape: {g: forced[shape] for g in GROUPS} for shape in SHAPES}
        if NATIVE in forced.values() and (reason := _native_unavailable(linears)):
            raise ConfigError(f"SPECVIZ_KERNELS asks for the native kernel, but {reason}.")
        _apply(groups, choice, shared=shared)
        return {**choice, "source": f"forced (SPECVIZ_KERNELS={os.environ['SPECVIZ_KERNELS']})"}
    cached = _read_cache(cache_file).get(key)
    if cached is not None and not os.environ.get("SPECVIZ_KERNELS", "").strip().lower() == "measure":
        try:
            settled = one_layout_unless_it_pays(cached)
            _apply(groups, settled, shared=shared)
            return {**settled, "source": "cached (measured earlier on this machine)"}
        except (KeyError, ValueError):
            pass  # a stale or hand-edited entry, or a kernel gone: measure again
    record = _measure(groups, run, many_rows, prepare, linears)  # the fastest per shape, as measured
    _write_cache(cache_file, key, record)
    settled = one_layout_unless_it_pays(record)
    _apply(groups, settled, shared=shared)  # frees the layouts (and weights as loaded) it does not use
    return {**settled, "source": "measured at load"}


def _native_unavailable(linears: list[KernelLinear]) -> str | None:
    """Why SPECVIZ_KERNELS=native cannot run these linears, or None when it can."""
    dtype = str(linears[0].weight.dtype).removeprefix("torch.")
    if dtype != "float32":
        return f"the native kernel is for float32 weights, not {dtype}"
    return native.unavailable()


def _apply(groups: dict, choice: dict, free: bool = True, shared: frozenset = frozenset()) -> None:
    """Set every linear's kernels; shared: ids of weights another module holds too (kept as loaded).
    A choice of the native kernel first loads it (a cached choice meets a fresh process), and raises
    ValueError where it no longer builds, so a cached choice is measured again."""
    if any(NATIVE in choice[shape].values() for shape in SHAPES):
        linears = [linear for members in groups.values() for linear in members]
        if linears and (reason := _native_unavailable(linears)):
            raise ValueError(reason)
    for group, members in groups.items():
        for linear in members:
            linear.use(choice["one_row"][group], choice["many_rows"][group], free, id(linear.weight) in shared)


def shared_weights(module) -> frozenset:
    """ids of the parameters held by a module that is not a KernelLinear (a tied embedding)."""
    return frozenset(id(p) for m in module.modules() if not isinstance(m, KernelLinear) for p in m.parameters(False))


def one_layout_unless_it_pays(record: dict) -> dict:
    """The choice with one layout of each group's weights, unless a second one pays for its memory.

    A group whose one-row and several-row kernels differ holds two copies of its weights (the
    weight as loaded and a packed one, or two layouts). One kernel then serves both shapes if it
    costs at most SECOND_LAYOUT_MIN_SAVING more than the other on the other's shape (the measured
    step or pass): the several-row kernel on one row, or the one-row kernel on several rows,
    whichever costs less. Only where both cost more does the group keep two layouts."""
    timings = record.get("timings_ms", {})
    choice = {shape: dict(record[shape]) for shape in SHAPES}
    for group in GROUPS:
        one, many = choice["one_row"].get(group), choice["many_rows"].get(group)
        if one == many:
            continue
        losses = {  # the kernel for both shapes -> what it costs more on the shape it was not chosen for
            many: _loss(timings.get("one_row", {}), group, many, one),
            one: _loss(timings.get("many_rows", {}), group, one, many),
        }
        kernel = min(losses, key=losses.get)
        if losses[kernel] <= SECOND_LAYOUT_MIN_SAVING:
            choice["one_row"][group] = choice["many_rows"][group] = kernel
    return {**record, **choice}


def _loss(timings: dict, group: str, instead: str, best: str) -> float:
    """How much longer `instead` took than `best` for `group` (inf where either was not timed)."""
    took, fastest = timings.get(f"{group}={instead}"), timings.get(f"{group}={best}")
    return took / fastest - 1 if took is not None and fastest else float("inf")


def _measure(groups: dict, run, many_rows: tuple[int, ...], prepare, linears: list[KernelLinear]) -> dict:
    """Coordinate search: per shape, per group, the fastest candidate with the rest held fixed."""
    import torch

    choice = {shape: {g: PACKED for g in GROUPS} for shape in SHAPES}
    timings: dict[str, dict[str, float]] = {shape: {} for shape in SHAPES}
    rows_of = {"one_row": (1,), "many_rows": many_rows}
    with torch.inference_mode():
        _apply(groups, choice, free=False)
        if prepare is not None:
            prepare()
        for shape in SHAPES:
            for group in GROUPS:
                if not groups[group]:
                    continue
                samples: dict[str, list[float]] = {k: [] for k in candidates(shape, linears)}
                for rep in range(MEASURE_REPS + 1):  # the first round warms each layout up, untimed
                    order = list(samples)
                    order = order[rep % len(order) :] + order[: rep % len(order)]
                    for kernel in order:
                        choice[shape][group] = kernel
                        _apply(groups, choice, free=False)  # keep every layout until the choice is made
                        start = time.perf_counter()
                        for rows in rows_of[shape]:
                            run(rows)
                        if rep:
                            samples[kernel].append((time.perf_counter() - start) * 1e3)
                medians = {k: statistics.median(v) for k, v in samples.items()}
                choice[shape][group] = min(medians, key=medians.get)
                for kernel, ms in medians.items():
                    timings[shape][f"{group}={kernel}"] = round(ms, 3)
    return {**choice, "timings_ms": timings, "rows": {"one_row": [1], "many_rows": list(many_rows)}}


# ----- the choices of the models this machine has measured --------------------------------------


def machine_key(model_name: str) -> str:
    """What a choice depends on: the CPU, its cores, torch's threads and version, the native kernel's
    source (a new version is measured afresh) and the model."""
    import torch

    from specviz.engine.machine import cpu_name

    threads = torch.get_num_threads()
    versions = f"torch {torch.__version__} | native {native.source_digest()}"
    return f"{cpu_name()} | {os.cpu_count()} cores | {threads} threads | {versions} | {model_name}"


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA or not isinstance(data.get("choices"), dict):
        return {}
    return data["choices"]


def _write_cache(path: Path, key: str, record: dict) -> None:
    choices = {**_read_cache(path), key: record}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump({"schema": CACHE_SCHEMA, "choices": choices}, f, indent=1)
        os.replace(f.name, path)  # atomic: two processes never leave a half-written file
    except OSError:
        pass  # a read-only cache only costs a measurement next time


# ----- the two kinds of model specviz runs ------------------------------------------------------


def choose_for_target(model, name: str, cache_file: Path, lean=None) -> dict:
    """Kernels for a transformers causal LM: passes of `rows` new tokens over a cached context
    (logits of every new row, as a verification pass needs them), through the lean forward
    (specviz.engine.lean_llama) when it serves the model, else through transformers' own."""
    prepare, run = context_passes(model, lean)
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    key = machine_key(name if dtype == "float32" else f"{name} | {dtype}")  # float32's key as before
    return choose(key, cache_file, model, model.get_output_embeddings, run, default_verify_rows(), prepare)


def context_passes(model, lean=None) -> tuple[Callable[[], None], Callable[[int], None]]:
    """(prepare, run) for timing a causal LM's passes: prepare() fills a cache with a fixed stand-in
    for a short chat prompt (CONTEXT_TOKENS); run(rows) is one pass of `rows` new tokens over it
    (logits of every row), leaving the cache as it found it. Through the lean forward when given."""
    import torch
    from transformers import DynamicCache

    vocab = model.get_output_embeddings().weight.shape[0]
    context = (torch.arange(CONTEXT_TOKENS) * 7919) % vocab  # [C] a fixed stand-in for a prompt
    cache = lean.new_cache() if lean is not None else DynamicCache(config=model.config)

    def forward(ids: torch.Tensor) -> None:
        if lean is not None:
            lean.forward(ids, cache, keep=ids.shape[0])
        else:
            model(ids[None], past_key_values=cache, use_cache=True)

    def prepare() -> None:
        forward(context)

    def run(rows: int) -> None:
        forward(context[:rows])
        cache.crop(CONTEXT_TOKENS)

    return prepare, run


def choose_for_head(head, name: str, cache_file: Path) -> dict:
    """Kernels for a draft head (specviz.engine.draft_head): head steps of `rows` entries over a cached context:
    the tree's branches at once, and a catch-up on the accepted drafts."""
    import torch

    from specviz.engine.draft_head import HeadCache

    device = head.device
    cache = HeadCache()
    features = torch.randn(CONTEXT_TOKENS, head.cfg.hidden, generator=torch.Generator().manual_seed(0)).to(device)
    tokens = head.subset[:CONTEXT_TOKENS].to(device)

    def prepare() -> None:
        head.step(features, tokens, 1, cache)

    def run(rows: int) -> None:
        head.step(features[:rows], tokens[:rows], CONTEXT_TOKENS + 1, cache)
        cache.crop(CONTEXT_TOKENS)

    rows = (TREE_BRANCHES, default_verify_rows()[0])
    if getattr(head.lm_head, "one_row", None) != BLOCKS:
        return choose(machine_key(f"head {name}"), cache_file, head, lambda: head.lm_head, run, rows, prepare)
    # E_S holds the target's blocks (specviz.engine.blocks): only the head's own linears are chosen.
    key = machine_key(f"head {name} | E_S as shipped")
    record = choose(key, cache_file, head, lambda: head.lm_head, run, rows, prepare)
    if not record.get("reason"):
        record = {**record, **{shape: {**record[shape], "head": BLOCKS} for shape in SHAPES}}
    return record
