"""Where it pays: speculative decoding measured per kind of task, for every offline drafter.

The gain depends on the task (the source article's third engineering difficulty): where the
output is predictable (code, copying text from the prompt, rewriting it) the drafts pass and each
target pass yields several tokens; where it is open (a story) the draft guesses less often. This
module measures that with the real decoder: a shipped set of task kinds (KINDS), a few short
prompts each, written for this project and chat-templated as the app does (the decoder wraps them,
specviz.decoding.prompting); for each kind and each drafter:

    α, tokens per iteration, acceptance by position   pooled over the kind's prompts, with the
                                  definitions of specviz.traces.trace (specviz.labs.bench.speculative_stats)
    measured speedup              one timed pair per prompt (the run and the target alone back to
                                  back, alternating which goes first: specviz.traces.speedup.time_pair),
                                  the median pair's ratio with the range (speedup.spread_of_pairs)
    c, v                          speedup.costs_of_pairs over the same pairs
    predicted                     Eq. 1's tokens per iteration and τ / (γc + v) from those α, c, v
                                  (specviz.labs.theory), as the Theory page and the bench do

Plain data in and out, no streamlit; torch only inside the functions that decode. `run_workloads`
takes `on_progress(done, total, result)` (after every pair, with the partial result) and
`should_stop()` (checked before every pair): a stopped run returns what it has, marked stopped.
Results export as JSON and CSV and read back validated (`from_json`, with the trace's parse_json).
"""

from __future__ import annotations

import csv
import io
import json
import numbers
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from specviz.config import DEFAULT_GAMMA, DRAFTERS, DecodeOptions, drafter_kind
from specviz.errors import SpecvizError
from specviz.labs.saved_results import check_cells, number
from specviz.labs.theory import expected_tokens_per_iteration, walltime_improvement
from specviz.shipped import ASSETS
from specviz.traces.trace import parse_json, uploaded_text

SCHEMA = "specviz.workloads/1"
RECORDING = ASSETS / "workloads.json"  # made by scripts/record_workloads.py
# The drafters measured per kind of task: the race's (specviz.config.DRAFTERS), but the target drafting for
# itself, which accepts every draft whatever the task and so tells nothing per kind.
OFFLINE_DRAFTS = tuple(k.name for k in DRAFTERS.values() if k.raced and k.name != "self")
MAX_BYTES = 2 * 1024 * 1024  # a full recording is tens of kB
MAX_CELLS = 64
MAX_POSITIONS = 64
NOT_REACHED = "-"  # the CSV's acceptance at a position no iteration reached (None in JSON)


@dataclass(frozen=True)
class Kind:
    """A kind of task: its key, its name on the page, why it should (not) be predictable, its prompts."""

    key: str
    label: str
    why: str
    prompts: tuple[str | tuple[int, ...], ...]


KINDS_FILE = ASSETS / "workload_kinds.json"  # the kinds and their prompts, written for specviz
KINDS = tuple(
    Kind(k["key"], k["label"], k["why"], tuple(k["prompts"]))
    for k in json.loads(KINDS_FILE.read_text(encoding="utf-8"))["kinds"]
)
KIND_KEYS = tuple(k.key for k in KINDS)

CSV_COLUMNS = (
    "kind", "draft", "label", "prompts", "gamma", "temperature", "new_tokens", "iterations", "alpha",
    "acceptance_rate", "tokens_per_iteration", "predicted_tokens_per_iteration", "c", "verify_cost", "speedup",
    "speedup_low", "speedup_high", "pairs", "predicted_speedup", "speculative_tokens_per_s", "target_tokens_per_s",
    "acceptance_by_position",
)  # fmt: skip
_RATES = ("alpha", "acceptance_rate")
_COUNTS = ("prompts", "gamma", "new_tokens", "iterations", "pairs")
_NUMBERS = (
    "temperature", "tokens_per_iteration", "predicted_tokens_per_iteration", "c", "verify_cost", "speedup",
    "speedup_low", "speedup_high", "predicted_speedup", "speculative_tokens_per_s", "target_tokens_per_s",
)  # fmt: skip
_REQUIRED = ("kind", "draft", "gamma", "new_tokens", "iterations", "tokens_per_iteration", "speedup")


class WorkloadsError(SpecvizError, ValueError):
    """A workloads file cannot be read back, or the settings of a run are unusable."""


@dataclass
class WorkloadsResult:
    """One cell per (kind, drafter), CSV_COLUMNS keys; `config` the settings and where it ran."""

    config: dict[str, Any]
    cells: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False
    pairs_done: int = 0
    pairs_total: int = 0
    schema: str = SCHEMA

    def kinds(self) -> list[str]:
        """The kinds measured, in KINDS' order (unknown ones after, as found)."""
        found = list(dict.fromkeys(c["kind"] for c in self.cells))
        return sorted(found, key=lambda k: KIND_KEYS.index(k) if k in KIND_KEYS else len(KIND_KEYS))

    def drafts(self) -> list[str]:
        """The drafters measured, in the order the run took them (the last one timed moves to the end)."""
        found = list(dict.fromkeys(c["draft"] for c in self.cells))
        ordered = self.config.get("drafts") if isinstance(self.config.get("drafts"), list) else []
        return [d for d in ordered if d in found] + [d for d in found if d not in ordered]

    def cell(self, kind: str, draft: str) -> dict[str, Any] | None:
        return next((c for c in self.cells if c["kind"] == kind and c["draft"] == draft), None)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, allow_nan=False)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for cell in self.cells:
            row = ["" if cell.get(col) is None else cell[col] for col in CSV_COLUMNS[:-1]]
            positions = " ".join(NOT_REACHED if a is None else f"{a:.4f}" for a in cell["acceptance_by_position"])
            writer.writerow([*row, positions])
        return out.getvalue()


def kind_label(key: str) -> str:
    return next((k.label for k in KINDS if k.key == key), key)


def draft_label(name: str) -> str:
    return kind.key if (kind := drafter_kind(name)) else name  # pages name it: catalogue.drafter_words


# ----- measuring ------------------------------------------------------------------------------


def cell_of(kind: str, draft: str, traces: list[Any], pairs: list[dict], gamma: int, temperature: float) -> dict:
    """One (kind, drafter) cell from its speculative traces and their timed pairs (one per prompt)."""
    from specviz.labs.bench import speculative_stats  # the bench's pooling: sums over iterations
    from specviz.traces.speedup import costs_of_pairs, spread_of_pairs

    stats, spread, costs = speculative_stats(traces, gamma), spread_of_pairs(pairs), costs_of_pairs(pairs)
    alpha = stats["alpha"]
    c, v = (None, None) if costs is None else (costs.c, costs.v)
    return {
        "kind": kind,
        "draft": draft,
        "label": draft_label(draft),
        "prompts": len(traces),
        "gamma": gamma,
        "temperature": temperature,
        "new_tokens": sum(t.summary["new_tokens"] for t in traces),
        "iterations": sum(t.summary["iterations"] for t in traces),
        "alpha": alpha,
        "acceptance_rate": stats["acceptance_rate"],
        "tokens_per_iteration": stats["mean_accepted_length"],
        "predicted_tokens_per_iteration": None if alpha is None else expected_tokens_per_iteration(alpha, gamma),
        "c": c,
        "verify_cost": v,
        "speedup": None if spread is None else spread.median,
        "speedup_low": None if spread is None else spread.low,
        "speedup_high": None if spread is None else spread.high,
        "pairs": 0 if spread is None else spread.pairs,
        "predicted_speedup": None if None in (alpha, c, v) else walltime_improvement(alpha, gamma, c or 0.0, v),
        "speculative_tokens_per_s": None if spread is None else spread.speculative_tok_s,
        "target_tokens_per_s": None if spread is None else spread.target_tok_s,
        "acceptance_by_position": stats["acceptance_by_position"],
    }


def _check(kinds: Sequence[Kind], drafts: Sequence[Any], prompts_per_kind: int, max_new_tokens: int) -> None:
    if not kinds or not drafts:
        raise WorkloadsError("Choose at least one kind of task and one drafter.")
    if len(kinds) * len(drafts) > MAX_CELLS:
        raise WorkloadsError(f"{len(kinds)} kinds × {len(drafts)} drafters is over the limit of {MAX_CELLS} cells.")
    for n, what in ((prompts_per_kind, "prompts per kind"), (max_new_tokens, "max new tokens")):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise WorkloadsError(f"{what} must be a whole number >= 1; got {n!r}.")


def run_workloads(
    *,
    target: Any,
    drafts: Sequence[Any] | None = None,
    kinds: Sequence[Kind] | None = None,
    prompts_per_kind: int = 3,
    gamma: int = DEFAULT_GAMMA,
    temperature: float = 0.0,
    seed: int = 0,
    max_new_tokens: int = 32,
    on_progress: Callable[[int, int, WorkloadsResult], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> WorkloadsResult:
    """Measure every (kind, drafter) on `target` (a LoadedModel); `drafts` are what the decoder takes
    (names, or a LoadedModel draft; OFFLINE_DRAFTS unless told), `kinds` KINDS unless told. Each
    prompt's pairs run back to back for every drafter, so a drift of the machine's load reaches every
    drafter of a kind alike."""
    drafts = OFFLINE_DRAFTS if drafts is None else drafts
    kinds = KINDS if kinds is None else kinds
    _check(kinds, drafts, prompts_per_kind, max_new_tokens)
    from specviz.engine.machine import cpu_name, load_average

    names = [getattr(d, "name", d) for d in drafts]
    result = WorkloadsResult(
        config={
            "target": getattr(target, "name", str(target)), "drafts": names, "kinds": [k.key for k in kinds],
            "prompts_per_kind": prompts_per_kind, "gamma": gamma, "temperature": temperature, "seed": seed,
            "max_new_tokens": max_new_tokens, "cpu": cpu_name(), "cores": os.cpu_count(), "load_before": load_average(),
        },
        pairs_total=sum(min(prompts_per_kind, len(k.prompts)) for k in kinds) * len(drafts),
    )  # fmt: skip
    common = {"target": target, "temperature": temperature, "seed": seed}  # the decodes' target and options
    _measure(result, kinds, list(zip(names, drafts, strict=True)), common, gamma, max_new_tokens, on_progress,
             should_stop)  # fmt: skip
    result.config["load_after"] = load_average()
    return result


def _measure(result, kinds, drafts, common, gamma, max_new, on_progress, should_stop) -> None:
    """Warm every drafter up (loading stays out of the timings), then time each prompt's pairs."""
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.traces.speedup import time_pair

    target = common["target"]
    options = DecodeOptions(gamma=gamma, temperature=common["temperature"], seed=common["seed"], max_new_tokens=max_new)
    warm = replace(options, max_new_tokens=4)
    first = _as_prompt(kinds[0].prompts[0])
    autoregressive_generate(first, target=target, options=warm, trace=False)
    for _, draft in drafts:
        if should_stop is not None and should_stop():
            result.stopped = True
            return
        speculative_generate(first, target=target, draft=draft, options=warm, trace=False)
    for kind in kinds:
        runs: dict[str, tuple[list, list]] = {name: ([], []) for name, _ in drafts}
        for prompt in kind.prompts[: result.config["prompts_per_kind"]]:
            prompt = _as_prompt(prompt)
            for name, draft in drafts:
                if should_stop is not None and should_stop():
                    result.stopped = True
                    return
                traces, pairs = runs[name]

                def spec(draft=draft, prompt=prompt, traces=traces):
                    traces.append(speculative_generate(prompt, target=target, draft=draft, options=options))
                    return traces[-1]

                def alone(prompt=prompt):
                    return autoregressive_generate(prompt, target=target, options=options)

                pairs.append(time_pair(spec, alone, result.pairs_done, traced=True))
                _set_cell(result, kind.key, name, traces, pairs, gamma, common["temperature"])
                result.pairs_done += 1
                if on_progress is not None:
                    on_progress(result.pairs_done, result.pairs_total, result)


def _as_prompt(prompt: str | Sequence[int]) -> str | list[int]:
    return prompt if isinstance(prompt, str) else list(prompt)


def _set_cell(result: WorkloadsResult, kind: str, draft: str, traces, pairs, gamma: int, temperature: float) -> None:
    """Put the (kind, drafter) cell measured so far last in the result: a stop keeps every prompt timed."""
    cell = cell_of(kind, draft, traces, pairs, gamma, temperature)
    at = next((i for i, c in enumerate(result.cells) if c["kind"] == kind and c["draft"] == draft), None)
    if at is not None:
        del result.cells[at]
    result.cells.append(cell)  # last: the one just timed, which the progress line names


# ----- reading back ---------------------------------------------------------------------------


def _positions(raw: Any, where: str) -> list[float | None]:
    if isinstance(raw, str):  # the CSV's space-separated form
        raw = [None if a == NOT_REACHED else a for a in raw.split()]
    if not isinstance(raw, list) or len(raw) > MAX_POSITIONS:
        raise WorkloadsError(f"{where}: expected a list of at most {MAX_POSITIONS} rates.")
    return [number(a, f"{where}, position {i + 1}", WorkloadsError, hi=1.0 + 1e-9) for i, a in enumerate(raw)]


def clean_cell(raw: Any, where: str) -> dict[str, Any]:
    """A cell read from a file, checked: every column a number in its range, kind and draft short text."""
    if not isinstance(raw, dict):
        raise WorkloadsError(f"{where}: expected an object with the columns {', '.join(_REQUIRED)}.")
    if missing := [col for col in _REQUIRED if raw.get(col) in (None, "")]:
        raise WorkloadsError(f"{where}: missing {', '.join(missing)}.")
    cell: dict[str, Any] = {}
    for col in ("kind", "draft", "label"):
        text = raw.get(col, raw.get("draft"))
        if not isinstance(text, str) or not 0 < len(text) <= 200:
            raise WorkloadsError(f"{where}, {col}: expected a short text.")
        cell[col] = text
    for col in _COUNTS:
        count = number(raw.get(col), f"{where}, {col}", WorkloadsError)
        if count is not None and count != int(count):
            raise WorkloadsError(f"{where}, {col}: expected a whole number, got {count}.")
        cell[col] = None if count is None else int(count)
    for col in _RATES:
        cell[col] = number(raw.get(col), f"{where}, {col}", WorkloadsError, hi=1.0 + 1e-9)
    for col in _NUMBERS:
        cell[col] = number(raw.get(col), f"{where}, {col}", WorkloadsError)
    cell["acceptance_by_position"] = _positions(raw.get("acceptance_by_position", []), where)
    return cell


def _twice(key: tuple) -> str:
    return f"kind {key[0]!r} with drafter {key[1]!r}"


def _finish(cells: list[dict], config: dict, stopped: bool, source: str) -> WorkloadsResult:
    check_cells(cells, source, MAX_CELLS, lambda c: (c["kind"], c["draft"]), _twice, WorkloadsError)
    done = sum(c["pairs"] or 0 for c in cells)
    return WorkloadsResult(config=config, cells=cells, stopped=stopped, pairs_done=done, pairs_total=done)


def from_json(text: str | bytes) -> WorkloadsResult:
    """Read a file saved with WorkloadsResult.to_json; raises WorkloadsError naming the first problem."""
    data = parse_json(
        text, what="workloads", max_bytes=MAX_BYTES, error=WorkloadsError,
        too_big="A workloads file is tens of kB: is this one a workloads file?",
    )  # fmt: skip
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise WorkloadsError(f"This is not a workloads file: its schema is {str(found)[:60]!r}, not {SCHEMA!r}.")
    if not isinstance(data.get("cells"), list):
        raise WorkloadsError("'cells' must be a list of results.")
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    cells = [clean_cell(c, f"cell {i + 1}") for i, c in enumerate(data["cells"][: MAX_CELLS + 1])]
    return _finish(cells, config, bool(data.get("stopped")), "file")


def from_csv(text: str | bytes) -> WorkloadsResult:
    """Read a file saved with WorkloadsResult.to_csv (the header names the columns, in any order)."""
    text = uploaded_text(
        text, what="workloads", max_bytes=MAX_BYTES, error=WorkloadsError, encoding="utf-8-sig",
        too_big="A workloads file is tens of kB: is this one a workloads file?",
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and (missing := [col for col in _REQUIRED if col not in rows[0]]):
        raise WorkloadsError(f"The CSV has no column {', '.join(missing)}.")
    cells = [clean_cell(row, f"CSV row {i + 2}") for i, row in enumerate(rows[: MAX_CELLS + 1])]
    return _finish(cells, {}, False, "CSV")


def read(name: str, data: bytes) -> WorkloadsResult:
    """An uploaded file by its name: .csv as CSV, anything else as JSON."""
    return from_csv(data) if name.lower().endswith(".csv") else from_json(data)


def shipped() -> WorkloadsResult | None:
    """The recording that ships (scripts/record_workloads.py), or None when this copy has none."""
    try:
        return from_json(RECORDING.read_bytes())
    except (OSError, WorkloadsError):
        return None


def provenance(result: WorkloadsResult) -> str:
    """Where and how the numbers were measured, in one line for the page: speed is this machine's."""
    cfg = result.config
    before, after = _load(cfg.get("load_before")), _load(cfg.get("load_after"))
    loads = [f"{x:g} at the {when}" for x, when in ((before, "start"), (after, "end")) if x is not None]
    load = f", load average {' and '.join(loads)}" if loads else ""
    if isinstance(cfg.get("cores"), int):
        load = f" ({cfg['cores']} cores){load}"
    parts = [
        f"target {cfg.get('target', '?')}",
        f"γ {cfg.get('gamma', '?')}, temperature {cfg.get('temperature', '?')}, seed {cfg.get('seed', '?')}",
        f"{cfg.get('max_new_tokens', '?')} new tokens, {cfg.get('prompts_per_kind', '?')} prompt(s) per kind",
        f"CPU {cfg.get('cpu', 'not recorded')}{load}",
    ]
    if cfg.get("recorded_with"):
        parts.append(str(cfg["recorded_with"]))
    return " · ".join(parts)


def _load(value: Any) -> float | None:
    """The 1-minute load average of a recorded [1, 5, 15] list; config is not validated, so anything else is None."""
    ok = isinstance(value, list) and value and isinstance(value[0], (int, float)) and not isinstance(value[0], bool)
    return float(value[0]) if ok else None
