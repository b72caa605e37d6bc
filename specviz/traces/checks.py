"""The checks of single fields that trace validation (specviz.traces.validation) is built from: a
whole number, a finite number in range, token ids, a top list; and the fields block verification
(specviz.decoding.block) adds to a draft and to its correction. Each raises TraceError with where
and what was expected."""

from __future__ import annotations

import math
from typing import Any

from specviz.config import TRACE_TOKEN_ID_MAX
from specviz.errors import TraceError

BLOCK_TOLERANCE = 1e-5  # float32 rounding between the stored numbers of block verification


def block_draft(d: dict, where: str, j: int, n: int, greedy: bool) -> None:
    """Draft j (0-based) of a block-verified iteration that kept n: its weight w and stop chance h,
    and a draw r that agrees with the verdict (the last draft kept is the last whose r fell under
    its h; greedy, r is null and h is 0 or 1). Draft 0's weight is its own min(1, p/q)."""
    b = d.get("block")
    _expect(isinstance(b, dict), f"{where}.block", "an object with weight and h (the trace's rule is block)")
    weight = _number(b.get("weight"), f"{where}.block.weight", 0, 1)
    h = _number(b.get("h"), f"{where}.block.h", 0, 1)
    if j == 0 and abs(weight - d["accept_prob"]) > BLOCK_TOLERANCE:
        raise TraceError(f"{where}.block.weight is {weight} but the first draft's weight is min(1, p/q).")
    if d["r"] is None:
        _expect(greedy, f"{where}.r", "the draw r (only greedy runs, temperature 0, have no draw)")
        stops = h >= 1.0
    else:
        stops = d["r"] < h
    if j == n - 1 and not stops:
        raise TraceError(f"{where}: kept as the last draft although its stop test failed (r = {d['r']}, h = {h}).")
    if j >= n and stops:
        raise TraceError(f"{where}: its stop test passed (r = {d['r']}, h = {h}), so it should have been kept.")


def block_correction(corr: dict, where: str, rule: str | None, n: int, drafted: int) -> None:
    """A correction of kind "block_resample", or any after a draft was not kept under rule block:
    "block_resample" only under rule block, after a draft was not kept, with its residual's top list,
    weight and mass."""
    _expect(rule == "block", f"{where}.kind", '"resample" ("block_resample" needs the rule "block")')
    _expect(corr["kind"] == "block_resample", f"{where}.kind", '"block_resample" (the rule is "block")')
    _expect(n < drafted, f"{where}.kind", '"bonus" (every draft was kept)')
    _top_list(corr.get("residual_top"), f"{where}.residual_top")
    b = corr.get("block")
    _expect(isinstance(b, dict), f"{where}.block", "an object with weight and mass")
    _number(b.get("weight"), f"{where}.block.weight", 0, 1)
    _number(b.get("mass"), f"{where}.block.mass", 0, 1 + BLOCK_TOLERANCE)


def _expect(ok: bool, where: str, wanted: str) -> None:
    if not ok:
        raise TraceError(f"{where or 'The trace'}: expected {wanted}.")


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise TraceError(f"{where}: expected a whole number from {lo} to {hi}, got {value!r}.")
    return value


def _number(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TraceError(f"{where}: expected a finite number, got {value!r}.")
    if not lo <= value <= hi:
        raise TraceError(f"{where}: expected a number from {lo} to {hi}, got {value!r}.")
    return float(value)


def _token_ids(value: Any, where: str) -> None:
    _expect(isinstance(value, list), where, "a list of token ids")
    for k, v in enumerate(value):
        _int(v, f"{where}[{k}]", 0, TRACE_TOKEN_ID_MAX)


def _top_list(value: Any, where: str) -> None:
    _expect(isinstance(value, list) and len(value) <= 1000, where, "a list of [token_id, prob] pairs")
    for k, pair in enumerate(value):
        _expect(isinstance(pair, list) and len(pair) == 2, f"{where}[{k}]", "a [token_id, prob] pair")
        _int(pair[0], f"{where}[{k}][0]", 0, TRACE_TOKEN_ID_MAX)
        _number(pair[1], f"{where}[{k}][1]", 0, 1 + 1e-4)


def _same(got: Any, want: int, where: str) -> None:
    if got != want:
        raise TraceError(f"{where} is {got} but the iterations give {want}.")


def _close(got: Any, want: float, where: str) -> None:
    if got is None or abs(got - want) > 1e-6:
        raise TraceError(f"{where} is {got} but the iterations give {want:.6f}.")
