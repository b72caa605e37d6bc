"""What ships with specviz to be shown without a model: the example traces of the gallery, the
recorded race of drafters and the learned drafts' training records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from specviz.labs import race
from specviz.shipped import ASSETS
from specviz.traces.trace import Trace

EXAMPLES_DIR = ASSETS / "examples"
# The learned drafts' training records, by the name the Drafters page shows.
TRAINING_RECORDS = {
    "Draft head (reads the target's features)": ASSETS / "head_training.json",
    "Distilled 3-layer draft": ASSETS / "draft_training.json",
}


def shipped_race() -> dict | None:
    """The recorded race of drafters, or None when this copy has none (specviz.labs.race.shipped)."""
    return race.shipped()


@dataclass
class Example:
    name: str
    title: str
    note: str
    path: Path
    baseline_path: Path | None
    recorded_with: str = ""


def examples() -> list[Example]:
    """The gallery: assets/examples/<name>.json (+ <name>.baseline.json), titled in extra.example."""
    out = []
    for path in sorted(EXAMPLES_DIR.glob("*.json")):
        if path.name.endswith(".baseline.json"):
            continue
        meta = _example_meta(path, path.stat().st_mtime)
        base = path.with_name(path.stem + ".baseline.json")
        out.append(
            Example(
                path.stem,
                meta.get("title", path.stem),
                meta.get("note", ""),
                path,
                base if base.is_file() else None,
                meta.get("recorded_with", ""),
            )
        )
    return out


@st.cache_data(show_spinner=False)
def _example_meta(path: Path, mtime: float) -> dict:  # mtime: a re-recorded file is read again
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("extra", {}).get("example", {})
    except (OSError, ValueError):
        return {}


def example_dict(path: Path) -> dict:
    """An example file as JSON, read once per server process (again once the file is re-recorded)."""
    return _read_example(path, path.stat().st_mtime)


@st.cache_data(show_spinner=False, max_entries=32)
def _read_example(path: Path, mtime: float) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def example_traces(example: Example) -> tuple[Trace, Trace | None]:
    """(trace, baseline or None) of a gallery example."""
    trace = Trace.from_dict(example_dict(example.path))
    baseline = Trace.from_dict(example_dict(example.baseline_path)) if example.baseline_path is not None else None
    return trace, baseline
