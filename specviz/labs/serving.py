"""Serving: B requests decoding at once, with and without speculation, through the classroom's batcher.

Speculative decoding buys speed by filling a memory-bound target pass with more rows: one pass
over its drafts (γ + 1 rows for a chain, 1 + 2γ for the default draft's two-branch tree) costs about
what a pass over one costs, because streaming the weights dominates.
A server batching B requests fills the same pass another way, with B requests' rows. Once the pass
is full (compute-bound), speculation's extra rows are no longer free: its drafted-then-rejected
tokens cost real compute, and its gain over the target alone shrinks, then turns into a loss.
This module measures where that happens on this machine, with the real decoder and the batched
verification the app's sessions share (specviz.serving.batching: each request decodes in its own
thread, seated at the target's VerifyBatcher, its passes one `LeanLlama.forward_many` with the
others'). Per batch size B and mode ("target": the target alone, "speculative": the given draft):

    tokens_per_s        all B requests' new tokens ÷ the wall time from their common start to the last one's end
    latency_s           the median request's seconds from the common start to its end (latency_max_s the slowest)
    pass_ms, rows_per_pass, pass_ms_per_row
                        the batcher's own timing of each forward_many (VerifyBatcher.timed), prompts'
                        first passes left out (their rows are the prompts'): a pass's mean time, its
                        mean token rows, and its time per row
    identical           greedy only, on the speculative row: how many requests wrote the target
                        alone's tokens exactly (they must all: speculation never changes the output)

Why B ∈ {1, 2, 4, 8, 16} (BATCH_SIZES), measured (docs/benchmarks.md, Serving): on the 2-core CPU
this was built on, speculation stopped paying from B = 4, the target alone's total tokens/s still
grew up to B = 16, and at B = 16 the median speculative request already took about eight times its
solo latency: a larger B would only add seconds per request. The batcher itself seats at most
config.BATCH_MAX_SESSIONS, which bounds what a file may hold (MAX_BATCH).

Plain data in and out, no streamlit; torch only inside the functions that decode. `run_serving`
takes `on_progress(done, total, result)` (after every measured (B, mode), with the partial result)
and `should_stop()` (checked before each): a stopped run returns what it has, marked stopped. The
two modes of a B run back to back, alternating which goes first (speedup.order_of_pair), as the
app's timed pairs do. Results export as JSON and CSV and read back validated (from_json, from_csv).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import numbers
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from specviz.config import BATCH_MAX_SESSIONS, DEFAULT_GAMMA
from specviz.errors import SpecvizError
from specviz.labs.saved_results import check_cells, number
from specviz.labs.workloads import KINDS
from specviz.shipped import ASSETS
from specviz.traces.speedup import SPECULATIVE_FIRST, order_of_pair
from specviz.traces.trace import parse_json, uploaded_text

SCHEMA = "specviz.serving/1"
RECORDING = ASSETS / "serving.json"  # made by scripts/record_serving.py
BATCH_SIZES = (1, 2, 4, 8, 16)  # see the module docstring: why these
MAX_BATCH = BATCH_MAX_SESSIONS  # what the batcher seats, so what a run or a file may hold
MODES = ("target", "speculative")
MODE_LABELS = {"target": "target alone", "speculative": "speculative decoding"}
MAX_BYTES = 512 * 1024  # a full recording is a few kB
# Mixed requests, as a server gets them: the Workloads page's prompts, one kind after another.
PROMPTS = tuple(kind.prompts[i] for i in range(max(len(k.prompts) for k in KINDS)) for kind in KINDS
                if i < len(kind.prompts))  # fmt: skip

CSV_COLUMNS = (
    "batch", "mode", "requests", "new_tokens", "wall_s", "tokens_per_s", "latency_s", "latency_max_s", "passes",
    "rows_per_pass", "pass_ms", "pass_ms_per_row", "identical",
)  # fmt: skip
_WHOLE = ("batch", "requests", "new_tokens", "passes", "identical")
_REQUIRED = ("batch", "mode", "requests", "new_tokens", "wall_s", "tokens_per_s")


@dataclass
class ServingResult:
    """One cell per (B, mode), CSV_COLUMNS keys; `config` the settings and where it ran."""

    config: dict[str, Any]
    cells: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False  # a Stop (or an interrupted recording) left cells unmeasured
    cells_total: int = 0  # how many (B, mode) were asked for
    schema: str = SCHEMA

    def _by_key(self) -> dict[tuple[int, str], dict[str, Any]]:
        return {(c["batch"], c["mode"]): c for c in self.cells}

    def batches(self) -> list[int]:
        return sorted({c["batch"] for c in self.cells})

    def cell(self, batch: int, mode: str) -> dict[str, Any] | None:
        return self._by_key().get((batch, mode))

    def gain(self, batch: int) -> float | None:
        """Speculative tokens/s ÷ the target alone's at this B (None until both are measured)."""
        spec, alone = self.cell(batch, "speculative"), self.cell(batch, "target")
        if spec is None or alone is None or not alone["tokens_per_s"]:
            return None
        return spec["tokens_per_s"] / alone["tokens_per_s"]

    def crossover(self) -> int | None:
        """The smallest B at which speculation no longer beats the target alone (None: it never stopped
        paying, or nothing is measured)."""
        return next((b for b in self.batches() if (g := self.gain(b)) is not None and g <= 1.0), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False)

    def to_csv(self) -> str:
        """One row per cell, CSV_COLUMNS in order; None as an empty field (DictWriter's own rule)."""
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(self.cells)
        return out.getvalue()


class ServingError(SpecvizError, ValueError):
    """A serving file cannot be read back, or the settings of a serving run are unusable."""


# ----- measuring ------------------------------------------------------------------------------


def _check(target: Any, batch_sizes: Sequence[int], max_new_tokens: int) -> None:
    from specviz.serving.batching import batcher_for

    if batcher_for(target) is None:
        raise ServingError(
            f"{getattr(target, 'name', target)} cannot batch its passes: only a Llama-family target on the CPU "
            "(the lean forward) shares them across requests."
        )
    if not batch_sizes:
        raise ServingError("Choose at least one batch size.")
    for n, what, hi in [
        *((b, "a batch size", MAX_BATCH) for b in batch_sizes),
        (max_new_tokens, "max new tokens", 4096),
    ]:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= hi:
            raise ServingError(f"{what} must be a whole number from 1 to {hi}; got {n!r}.")
    if len(set(batch_sizes)) != len(batch_sizes):
        raise ServingError(f"Each batch size once, please; got {list(batch_sizes)}.")


def run_serving(
    *,
    target: Any, draft: Any = None, batch_sizes: Sequence[int] = BATCH_SIZES,
    prompts: Sequence[str | Sequence[int]] | None = None,
    gamma: int = DEFAULT_GAMMA, temperature: float = 0.0, seed: int = 0, max_new_tokens: int = 16,
    on_progress: Callable[[int, int, ServingResult], None] | None = None, should_stop: Callable[[], bool] | None = None,
) -> ServingResult:  # fmt: skip
    """Measure B requests decoding at once for every B in `batch_sizes`, the target alone and with
    `draft` (what the decoder takes: a name, a LoadedModel, None for the target's default draft).
    Request i decodes prompts[i % len(prompts)] (PROMPTS unless told) with seed + i, the same in both modes."""
    _check(target, batch_sizes, max_new_tokens)
    prompts = PROMPTS if prompts is None else prompts
    if not prompts:
        raise ServingError("Give at least one prompt.")
    from specviz.drafters import resolve_drafter
    from specviz.engine.machine import cpu_name, load_average

    drafter = resolve_drafter(draft, target)  # a named draft model loads once, here, not in B threads at once
    result = ServingResult(
        config={
            "target": getattr(target, "name", str(target)), "draft": drafter.name,
            "batch_sizes": sorted(batch_sizes), "gamma": gamma, "temperature": temperature, "seed": seed,
            "max_new_tokens": max_new_tokens, "prompts": len(prompts), "cpu": cpu_name(), "cores": os.cpu_count(),
            "load_before": load_average(),
        },
        cells_total=len(batch_sizes) * len(MODES),
    )  # fmt: skip
    decode = _decoder(target, draft, prompts, gamma, temperature, seed, max_new_tokens)
    decode("target", [0], 4)  # warm-up: the first passes of a process are slow, keep them out
    decode("speculative", [0], 4)
    for index, batch in enumerate(sorted(batch_sizes)):
        first = MODES[1] if order_of_pair(index) == SPECULATIVE_FIRST else MODES[0]
        tokens: dict[str, list[list[int]]] = {}
        for mode in (first, *(m for m in MODES if m != first)):
            if should_stop is not None and should_stop():
                result.stopped = True
                break
            cell, tokens[mode] = _measure(target, decode, batch, mode)
            result.cells.append(cell)
            _mark_identical(result, batch, tokens, temperature)
            if on_progress is not None:
                on_progress(len(result.cells), result.cells_total, result)
        if result.stopped:
            break
    result.config["load_after"] = load_average()
    return result


def _decoder(target, draft, prompts, gamma: int, temperature: float, seed: int, max_new: int) -> Callable:
    """decode(mode, requests, max_new) -> each request's Trace (summary only), decoding them batched in
    threads of their own, released together; each trace carries its seconds from the release
    (extra["serving_s"]) and the wall time of all (extra["serving_wall_s"] on the first)."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.serving.hooks import ServingHooks

    BATCHED = ServingHooks(batched=True)

    def one(mode: str, i: int, n: int):
        prompt = prompts[i % len(prompts)]
        prompt = prompt if isinstance(prompt, str) else list(prompt)
        options = DecodeOptions(gamma=gamma, temperature=temperature, seed=seed + i, max_new_tokens=n)
        common = {"target": target, "options": options, "trace": False, "hooks": BATCHED}
        if mode == "target":
            return autoregressive_generate(prompt, **common)
        return speculative_generate(prompt, draft=draft, **common)

    def decode(mode: str, requests: list[int], n: int = max_new) -> list:
        release = threading.Barrier(len(requests) + 1)

        def timed(i: int):
            release.wait(60)  # bounds a hang only
            run = one(mode, i, n)
            run.extra["serving_end"] = time.perf_counter()
            return run

        with ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="specviz-serving") as pool:
            futures = [pool.submit(timed, i) for i in requests]
            release.wait(60)
            start = time.perf_counter()
            runs = [f.result() for f in futures]
        for run in runs:
            run.extra["serving_s"] = run.extra.pop("serving_end") - start
        return runs

    return decode


def _measure(target, decode: Callable, batch: int, mode: str) -> tuple[dict[str, Any], list[list[int]]]:
    """One (B, mode) cell: B requests decoded together, the batcher's passes timed meanwhile."""
    from specviz.serving.batching import batcher_for

    with batcher_for(target).timed() as passes:
        runs = decode(mode, list(range(batch)))
    latencies = [run.extra["serving_s"] for run in runs]
    wall = max(latencies)
    decoding = [p for p in passes if not p.prefill]  # a prompt's first pass carries the prompt's rows
    rows, seconds = sum(p.rows for p in decoding), sum(p.seconds for p in decoding)
    new_tokens = sum(run.summary["new_tokens"] for run in runs)
    cell = {
        "batch": batch,
        "mode": mode,
        "requests": len(runs),
        "new_tokens": new_tokens,
        "wall_s": wall,
        "tokens_per_s": new_tokens / wall if wall > 0 else None,
        "latency_s": statistics.median(latencies),
        "latency_max_s": wall,
        "passes": len(decoding),
        "rows_per_pass": rows / len(decoding) if decoding else None,
        "pass_ms": 1e3 * seconds / len(decoding) if decoding else None,
        "pass_ms_per_row": 1e3 * seconds / rows if rows else None,
        "identical": None,
    }
    return cell, [run.output_token_ids for run in runs]


def _mark_identical(result: ServingResult, batch: int, tokens: dict[str, list[list[int]]], temperature: float) -> None:
    """Once both modes of a B are in, at T = 0: how many requests speculation left token for token as
    the target alone wrote them (all of them, or exactness is broken)."""
    if temperature == 0 and len(tokens) == len(MODES):
        same = sum(a == b for a, b in zip(tokens["speculative"], tokens["target"], strict=True))
        result.cell(batch, "speculative")["identical"] = same


# ----- reading back ---------------------------------------------------------------------------


def _value(raw: Any, col: str, where: str) -> int | float | None:
    """One numeric column, checked: finite, not negative, whole where it counts something."""
    value = number(raw, f"{where}, {col}", ServingError)
    if value is None or col not in _WHOLE:
        return value
    if value != int(value):
        raise ServingError(f"{where}, {col}: expected a whole number, got {value}.")
    return int(value)


def clean_cell(raw: Any, where: str) -> dict[str, Any]:
    """A cell read from a file, checked column by column (ServingError names the first problem)."""
    if not isinstance(raw, dict):
        raise ServingError(f"{where}: expected an object with the columns {', '.join(_REQUIRED)}.")
    if missing := [col for col in _REQUIRED if raw.get(col) in (None, "")]:
        raise ServingError(f"{where}: missing {', '.join(missing)}.")
    if raw["mode"] not in MODES:
        raise ServingError(f"{where}: mode must be one of {', '.join(MODES)}; got {str(raw['mode'])[:40]!r}.")
    cell = {col: _value(raw.get(col), col, where) for col in CSV_COLUMNS if col != "mode"}
    cell["mode"] = raw["mode"]
    if not 1 <= cell["batch"] <= MAX_BATCH:
        raise ServingError(f"{where}: batch {cell['batch']} is outside 1 to {MAX_BATCH}.")
    if cell["identical"] is not None and cell["identical"] > cell["requests"]:
        raise ServingError(f"{where}: {cell['identical']} identical of {cell['requests']} requests.")
    return {col: cell[col] for col in CSV_COLUMNS}


def from_dict(data: Any) -> ServingResult:
    """A result from its to_dict() form, validated."""
    schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
    if schema != SCHEMA:
        raise ServingError(f"This is not a serving file: its schema is {str(schema)[:60]!r}, not {SCHEMA!r}.")
    if not isinstance(raw := data.get("cells"), list):
        raise ServingError("'cells' must be a list of results.")
    config = data["config"] if isinstance(data.get("config"), dict) else {}
    return _finish([clean_cell(c, f"cell {i + 1}") for i, c in enumerate(raw)], config, data.get("stopped"), "file")


def _finish(cells: list[dict], config: dict, stopped: Any, source: str) -> ServingResult:
    check_cells(cells, source, MAX_BATCH * len(MODES), lambda c: (c["batch"], c["mode"]),
                lambda k: f"batch {k[0]} with mode {k[1]!r}", ServingError)  # fmt: skip
    return ServingResult(config=config, cells=cells, stopped=bool(stopped), cells_total=len(cells))


def from_json(text: str | bytes) -> ServingResult:
    """Read a file saved with ServingResult.to_json."""
    too_big = "A serving file is a few kB: is this one a serving file?"
    return from_dict(parse_json(text, what="serving", max_bytes=MAX_BYTES, error=ServingError, too_big=too_big))


def from_csv(text: str | bytes) -> ServingResult:
    """Read a file saved with ServingResult.to_csv (the header names the columns, in any order)."""
    too_big = "A serving file is a few kB: is this one a serving file?"
    text = uploaded_text(text, what="serving", max_bytes=MAX_BYTES, error=ServingError, encoding="utf-8-sig",
                         too_big=too_big)  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and (missing := [col for col in _REQUIRED if col not in rows[0]]):
        raise ServingError(f"The CSV has no column {', '.join(missing)}.")
    return _finish([clean_cell(row, f"CSV row {i + 2}") for i, row in enumerate(rows)], {}, False, "CSV")


def read(name: str, data: bytes) -> ServingResult:
    """An uploaded file by its name: .csv as CSV, anything else as JSON."""
    return (from_csv if name.lower().endswith(".csv") else from_json)(data)


def shipped() -> ServingResult | None:
    """The recording that ships (scripts/record_serving.py), or None when this copy has none (or a
    broken one: the page then says there is nothing to show and offers a live run)."""
    if RECORDING.is_file():
        with contextlib.suppress(OSError, ServingError):
            return from_json(RECORDING.read_bytes())
    return None
