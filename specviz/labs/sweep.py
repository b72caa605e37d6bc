"""The sweep: speculative decoding over a grid of gamma x temperature, against the target alone.

For each temperature the target alone decodes the prompt once (the baseline), then speculative
decoding runs once per gamma with the same prompt, seed and sampling. Every cell keeps the
measured tokens/s, the speedup over that temperature's baseline, the mean tokens per iteration,
alpha, c and v of that run (specviz.traces.speedup: one timed pair per cell, the run and its baseline),
and what the formulas predict from them:

    predicted tokens per iteration   (1 - alpha^(gamma+1)) / (1 - alpha)              (Eq. 1)
    predicted speedup                (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + v)) (Thm 3.8 at v = 1)

Plain data in and out (no streamlit): the app's sweep page and the tests call `run_sweep`, and
results round-trip through JSON and CSV with validation on the way back in (a bad file raises
SweepError, a SpecvizError with a message for the person who uploaded it).

`should_stop()` is checked before every run (the warm-up included): a stopped sweep returns what
it has, marked `stopped`. `on_progress(done, total, result)` is called after every run with the
partial result, so a page can keep it even if its script is interrupted.

The toy pair the app offers for quick sweeps lives in specviz.engine.toy.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from specviz.errors import SpecvizError
from specviz.labs.saved_results import check_cells, number
from specviz.labs.theory import expected_tokens_per_iteration, walltime_improvement
from specviz.traces.trace import parse_json, uploaded_text

SCHEMA = "specviz.sweep/1"
DEFAULT_GAMMAS = (1, 2, 3, 4, 5, 6, 7, 8)
DEFAULT_TEMPERATURES = (0.0, 0.5, 1.0)
MAX_SWEEP_BYTES = 2 * 1024 * 1024  # a full grid is a few kB; anything bigger is not a sweep file
MAX_CELLS = 16 * 21  # gamma 1..16 x 21 temperatures is already far more than anyone runs

CSV_COLUMNS = (
    "gamma",
    "temperature",
    "tokens_per_s",
    "baseline_tokens_per_s",
    "speedup",
    "mean_accepted_length",
    "predicted_tokens_per_iteration",
    "alpha",
    "c",
    "verify_cost",
    "predicted_speedup",
    "acceptance_rate",
    "iterations",
    "new_tokens",
    "wall_ms",
    "draft_ms",
    "verify_ms",
)
# Columns that must be numbers (the others may be empty: alpha and c are undefined when nothing was drafted).
_REQUIRED = ("gamma", "temperature", "tokens_per_s", "baseline_tokens_per_s", "mean_accepted_length")


class SweepError(SpecvizError, ValueError):
    """A sweep file cannot be read back, or sweep settings are unusable."""


@dataclass
class SweepResult:
    """The grid, as plain data. `cells` holds one dict per (gamma, temperature) run, CSV_COLUMNS keys."""

    config: dict[str, Any]  # target, draft, prompt, gammas, temperatures, max_new_tokens, seed, top_k, top_p
    baselines: dict[str, float] = field(default_factory=dict)  # str(temperature) -> baseline tokens/s
    cells: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False
    runs_done: int = 0
    runs_total: int = 0
    schema: str = SCHEMA

    # ----- derived numbers ----------------------------------------------------------------------
    def measured_c(self) -> float | None:
        """The median of the cells' c: one number for 'how expensive is the draft here'."""
        cs = [cell["c"] for cell in self.cells if cell.get("c") is not None]
        return statistics.median(cs) if cs else None

    def temperatures(self) -> list[float]:
        return sorted({float(cell["temperature"]) for cell in self.cells})

    def gammas(self) -> list[int]:
        return sorted({int(cell["gamma"]) for cell in self.cells})

    def cell(self, gamma: int, temperature: float) -> dict[str, Any] | None:
        for c in self.cells:
            if c["gamma"] == gamma and math.isclose(c["temperature"], temperature):
                return c
        return None

    def best(self) -> dict[str, Any] | None:
        """The cell with the highest measured speedup."""
        return max(self.cells, key=lambda c: c["speedup"], default=None)

    # ----- I/O -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for cell in self.cells:
            writer.writerow(["" if cell.get(col) is None else cell[col] for col in CSV_COLUMNS])
        return out.getvalue()


# ----- running --------------------------------------------------------------------------------


def _cell(gamma: int, temperature: float, run: Any, base: Any) -> dict[str, Any]:
    from specviz.labs.theory import estimate_alpha
    from specviz.traces.speedup import measured_costs, speedup_spread

    summary = run.summary
    alpha = estimate_alpha(run)
    baseline_tps = float(base.summary["tokens_per_s"])
    # The run and its temperature's baseline are one timed pair; c, v and the speedup come from the
    # one home for them, so a cell reads the same as the Theory page would for the same two runs.
    costs, spread = measured_costs(run, base), speedup_spread(run, base)
    c, v = (None, None) if costs is None else (costs.c, costs.v)
    return {
        "gamma": gamma,
        "temperature": temperature,
        "tokens_per_s": float(summary["tokens_per_s"]),
        "baseline_tokens_per_s": baseline_tps,
        "speedup": 0.0 if spread is None else spread.median,
        "mean_accepted_length": float(summary["mean_accepted_length"]),
        "predicted_tokens_per_iteration": None if alpha is None else expected_tokens_per_iteration(alpha, gamma),
        "alpha": alpha,
        "c": c,
        "verify_cost": v,
        "predicted_speedup": None if None in (alpha, c, v) else walltime_improvement(alpha, gamma, c, v),
        "acceptance_rate": summary.get("acceptance_rate"),
        "iterations": int(summary["iterations"]),
        "new_tokens": int(summary["new_tokens"]),
        "wall_ms": float(summary["wall_ms"]),
        "draft_ms": float(summary.get("draft_ms") or 0.0),
        "verify_ms": float(summary.get("verify_ms") or 0.0),
    }


def _check_grid(gammas: Sequence[int], temperatures: Sequence[float], max_new_tokens: int) -> None:
    from specviz.config import GAMMA_MAX, GAMMA_MIN

    if not gammas or not temperatures:
        raise SweepError("Choose at least one γ and one temperature.")
    for g in gammas:
        if isinstance(g, bool) or not isinstance(g, numbers.Integral) or not GAMMA_MIN <= g <= GAMMA_MAX:
            raise SweepError(f"γ must be a whole number from {GAMMA_MIN} to {GAMMA_MAX}; got {g!r}.")
    for t in temperatures:
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or not 0 <= t <= 2:
            raise SweepError(f"Temperatures must be numbers from 0 to 2; got {t!r}.")
    if len(gammas) * len(temperatures) > MAX_CELLS:
        raise SweepError(f"That grid has {len(gammas) * len(temperatures)} cells; the limit is {MAX_CELLS}.")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 1:
        raise SweepError(f"max new tokens must be a whole number >= 1; got {max_new_tokens!r}.")


def run_sweep(
    prompt: str | Sequence[int],
    *,
    target: Any,
    draft: Any = None,
    gammas: Sequence[int] = DEFAULT_GAMMAS,
    temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
    max_new_tokens: int = 32,
    seed: int = 0,
    top_k: int | None = None,
    top_p: float | None = None,
    warmup: bool = True,
    on_progress: Callable[[int, int, SweepResult], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SweepResult:
    """Decode the prompt at every (gamma, temperature) and with the target alone at every temperature.

    `target` and `draft` are what specviz.decoding.decoder accepts (LoadedModel objects, names, "ngram",
    "self", a Drafter). Runs are traced (alpha needs the per-token betas). Why a warm-up: the first
    decode of a process pays for lazy initialisation, which would make gamma = 1 look slow.
    Duplicate gammas or temperatures are dropped; both are swept in increasing order.
    """
    gammas = sorted(set(gammas))
    temperatures = sorted({float(t) for t in temperatures})
    _check_grid(gammas, temperatures, max_new_tokens)
    if not isinstance(prompt, str):
        prompt = list(prompt)
    result = SweepResult(
        config={
            "target": getattr(target, "name", target),
            "draft": getattr(draft, "name", draft),
            "prompt": prompt,
            "gammas": gammas,
            "temperatures": temperatures,
            "max_new_tokens": max_new_tokens,
            "seed": seed,
            "top_k": top_k,
            "top_p": top_p,
        },
        runs_total=len(temperatures) * (len(gammas) + 1),
    )
    common = {"target": target, "seed": seed, "top_k": top_k, "top_p": top_p, "max_new_tokens": max_new_tokens}
    _run_grid(result, prompt, draft, common, warmup, on_progress, should_stop)
    return result


def _run_grid(
    result: SweepResult,
    prompt: str | list[int],
    draft: Any,
    common: dict[str, Any],
    warmup: bool,
    on_progress: Callable[[int, int, SweepResult], None] | None,
    should_stop: Callable[[], bool] | None,
) -> None:
    """Decode `result`'s grid into it: the warm-up, then per temperature the target alone and every
    gamma, with `common` settings. Returns early, `result` marked stopped, when should_stop() asks."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate

    gammas, temperatures = result.config["gammas"], result.config["temperatures"]
    target = common["target"]
    options = DecodeOptions(**{k: v for k, v in common.items() if k != "target"})

    def stop() -> bool:
        if should_stop is not None and should_stop():
            result.stopped = True
            return True
        return False

    def one_more_run() -> None:
        result.runs_done += 1
        if on_progress is not None:
            on_progress(result.runs_done, result.runs_total, result)

    if warmup:
        if stop():
            return
        warm = replace(
            options, gamma=gammas[0], temperature=temperatures[0], max_new_tokens=min(4, options.max_new_tokens)
        )
        speculative_generate(prompt, target=target, draft=draft, options=warm, trace=False)
    for temperature in temperatures:
        if stop():
            return
        at = replace(options, temperature=temperature)
        base = autoregressive_generate(prompt, target=target, options=at, trace=False)
        result.baselines[str(temperature)] = float(base.summary["tokens_per_s"])
        one_more_run()
        for gamma in gammas:
            if stop():
                return
            run = speculative_generate(prompt, target=target, draft=draft, options=replace(at, gamma=gamma))
            result.cells.append(_cell(gamma, temperature, run, base))
            one_more_run()


# ----- reading back ---------------------------------------------------------------------------


def _clean_cell(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise SweepError(f"{where}: expected an object with the columns {', '.join(_REQUIRED)}.")
    missing = [col for col in _REQUIRED if col not in raw]
    if missing:
        raise SweepError(f"{where}: missing {', '.join(missing)}.")
    cell: dict[str, Any] = {}
    for col in CSV_COLUMNS:
        cell[col] = number(raw.get(col), f"{where}, {col}", SweepError, optional=col not in _REQUIRED)
    gamma = cell["gamma"]
    if gamma != int(gamma) or not 1 <= gamma <= 64:
        raise SweepError(f"{where}, gamma: expected a whole number from 1 to 64, got {gamma}.")
    cell["gamma"] = int(gamma)
    for col in ("iterations", "new_tokens"):
        if cell[col] is not None:
            cell[col] = int(cell[col])
    for col in ("alpha", "acceptance_rate"):
        if cell[col] is not None and cell[col] > 1 + 1e-9:
            raise SweepError(f"{where}, {col}: {cell[col]} is above 1; it is a rate.")
    if cell["speedup"] is None:
        base = cell["baseline_tokens_per_s"]
        cell["speedup"] = cell["tokens_per_s"] / base if base > 0 else 0.0
    return cell


def _twice(key: tuple) -> str:
    return f"γ {key[0]} at temperature {key[1]}"


def _finish(
    cells: list[dict[str, Any]], config: dict[str, Any], stopped: bool, source: str, runs_total: Any = None
) -> SweepResult:
    check_cells(cells, source, MAX_CELLS, lambda c: (c["gamma"], c["temperature"]), _twice, SweepError)
    baselines = {str(c["temperature"]): c["baseline_tokens_per_s"] for c in cells}
    result = SweepResult(config=config, baselines=baselines, cells=cells, stopped=stopped)
    result.runs_done = len(cells) + len(baselines)
    total_ok = isinstance(runs_total, int) and not isinstance(runs_total, bool) and runs_total >= result.runs_done
    result.runs_total = runs_total if stopped and total_ok else result.runs_done
    return result


def from_json(text: str | bytes) -> SweepResult:
    """Read a sweep saved with SweepResult.to_json. Raises SweepError naming the first problem."""
    # The trace's careful reading (size, UTF-8, NaN, nesting), in a sweep's words.
    data = parse_json(
        text,
        what="sweep",
        max_bytes=MAX_SWEEP_BYTES,
        error=SweepError,
        too_big="A sweep file is a few kB: is this one a sweep?",
    )
    if not isinstance(data, dict):
        raise SweepError("The file is JSON but not a sweep: expected an object with 'schema' and 'cells'.")
    if data.get("schema") != SCHEMA:
        raise SweepError(
            f"Unsupported schema {str(data.get('schema'))[:60]!r}; this page reads {SCHEMA!r} "
            "(a trace file belongs on the Traces page)."
        )
    raw_cells = data.get("cells")
    if not isinstance(raw_cells, list):
        raise SweepError("'cells' must be a list of results.")
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    cells = [_clean_cell(c, f"cell {i + 1}") for i, c in enumerate(raw_cells[: MAX_CELLS + 1])]
    return _finish(cells, config, bool(data.get("stopped")), "file", data.get("runs_total"))


def from_csv(text: str | bytes) -> SweepResult:
    """Read a sweep saved with SweepResult.to_csv (the header names the columns, in any order)."""
    text = uploaded_text(
        text, what="sweep", max_bytes=MAX_SWEEP_BYTES, error=SweepError, encoding="utf-8-sig",
        too_big="A sweep file is a few kB: is this one a sweep?",
    )  # fmt: skip
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [col for col in _REQUIRED if col not in header]
    if missing:
        raise SweepError(f"The CSV has no column {', '.join(missing)}; its header is {', '.join(header)[:200]!r}.")
    cells = []
    for i, row in enumerate(reader):
        if i >= MAX_CELLS + 1:
            break
        cells.append(_clean_cell(row, f"CSV row {i + 2}"))
    return _finish(cells, {}, False, "CSV")


def read(name: str, data: bytes) -> SweepResult:
    """An uploaded file by its name: .csv as CSV, anything else as JSON."""
    if name.lower().endswith(".csv"):
        return from_csv(data)
    return from_json(data)
