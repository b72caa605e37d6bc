"""Reading a lab's saved results back (the Sweep's and the Workloads' JSON/CSV files): the checks
every such file's numbers and cells get, in one place. Each raises the lab's own error class (a
SpecvizError), naming the place in the file, so a page can say what is wrong and keep what it shows."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable
from typing import Any


def number(
    value: Any, where: str, error: type[Exception], *, lo: float = 0.0, hi: float = math.inf, optional: bool = True
) -> float | None:
    """`value` (a number, or its text as a CSV holds it) as a finite float in [lo, hi]; None for an empty
    value when `optional`, else `error`."""
    if value is None or value == "":
        if optional:
            return None
        raise error(f"{where}: a number is missing.")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise error(f"{where}: {value[:40]!r} is not a number.") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise error(f"{where}: expected a finite number, got {str(value)[:40]!r}.")
    if not lo <= value <= hi:
        raise error(f"{where}: {value} is outside {lo:g} to {hi:g}.")
    return float(value)


def check_cells(
    cells: list[dict],
    source: str,
    max_cells: int,
    key: Callable[[dict], Hashable],
    twice: Callable[[Any], str],
    error: type[Exception],
) -> None:
    """Raise `error` unless the file (`source`: "uploaded file", …) holds 1 to `max_cells` cells and no
    two with the same `key(cell)`; `twice(key)` names a repeated cell ("γ 3 at temperature 0.5")."""
    if not cells:
        raise error(f"The {source} holds no results (no rows).")
    if len(cells) > max_cells:
        raise error(f"The {source} has {len(cells)} rows; a file of these results has at most {max_cells}.")
    seen = set()
    for cell in cells:
        if (k := key(cell)) in seen:
            raise error(f"The {source} has {twice(k)} twice.")
        seen.add(k)
