"""Reading the training records the recipes write (assets/draft_training.json from
specviz.training.train_draft, assets/head_training.json from specviz.training.train_head) for the app to plot.

Both become one shape: history points with `step`, `alpha` (at the first draft position, T = 1)
and `greedy_agreement` (T = 0), plus `alpha_by_position` where the record has it (the head), and
`alpha_bench_prompts` (α at the first draft position on the bench's free-text prompts) where the
record measured it, else None.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from specviz.errors import SpecvizError


def read_training_record(path: Path) -> dict:
    """The record, checked enough to plot. Raises SpecvizError with a message naming the problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecvizError(f"Cannot read {path.name}: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise SpecvizError(f"{path.name} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("history"), list) or not data["history"]:
        raise SpecvizError(f"{path.name} has no 'history' list of training points.")
    data["history"] = [_point(p, i, path.name) for i, p in enumerate(data["history"])]
    return data


def _point(point, i: int, name: str) -> dict:
    if isinstance(point, dict) and isinstance(point.get("alpha_by_position"), list) and point["alpha_by_position"]:
        point = dict(point)
        point["alpha"] = point["alpha_by_position"][0]
        greedy = point.get("greedy_agreement_by_position")
        point["greedy_agreement"] = greedy[0] if isinstance(greedy, list) and greedy else None
        bench = point.get("bench_prompts")
        by_position = bench.get("alpha_by_position") if isinstance(bench, dict) else None
        point["alpha_bench_prompts"] = by_position[0] if isinstance(by_position, list) and by_position else None
    ok = isinstance(point, dict) and all(_number(point.get(key)) for key in ("step", "alpha"))
    if not ok or not (0 <= point["alpha"] <= 1 and math.isfinite(point["step"])):
        raise SpecvizError(f"{name}: training point {i + 1} needs a numeric 'step' and an 'alpha' in 0..1.")
    for key in ("greedy_agreement", "alpha_bench_prompts"):
        value = point.get(key)
        if value is not None and (not _number(value) or not 0 <= value <= 1):
            point[key] = None
    by_position = point.get("alpha_by_position")
    if by_position is not None and not all(_number(a) and 0 <= a <= 1 for a in by_position):
        point["alpha_by_position"] = None
    return point


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
