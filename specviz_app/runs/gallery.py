"""What ships with specviz to be shown without a model: the example traces of the gallery, the
recorded race of drafters, the learned drafts' training records and the shipped drafters' record on
held-out text (specviz.traces.draft_quality).

An example's title and note are written into its file in English (scripts/record_examples.py);
`said` gives them in a language from the catalogue's section "traces" (keys "example_<name>_...").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from specviz.errors import SpecvizError
from specviz.labs import race
from specviz.shipped import ASSETS
from specviz.teaching import catalogue
from specviz.traces import draft_quality
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


def shipped_draft_report() -> tuple[dict | None, str | None]:
    """The shipped drafters' record on held-out text -> (record, None), or (None, why): "missing",
    "stale" (it measured another head than the one shipped now) or the reading's message."""
    try:
        stamps = draft_quality.RECORD.stat().st_mtime, draft_quality.HEAD_WEIGHTS.stat().st_mtime
    except OSError:
        return None, "missing"
    return _draft_report(*stamps)


@st.cache_data(show_spinner=False)
def _draft_report(_record_mtime: float, _head_mtime: float) -> tuple[dict | None, str | None]:
    try:
        record = draft_quality.read_record()
    except SpecvizError as exc:
        return None, str(exc)
    return (None, "stale") if draft_quality.record_is_stale(record) else (record, None)


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


# The figures record_examples.py writes after an example's note, and where it was recorded.
_STATS = re.compile(
    r"\s*Acceptance (?P<rate>\S+), α (?P<alpha>\S+), (?P<tokens>\S+) tokens per iteration, draft (?P<draft>\S+)\.$"
)
_RECORDED = re.compile(r"(?P<device>\S+), (?P<n>\d+) torch thread\(s\)")


def said(example: Example, lang: str) -> tuple[str, str, str]:
    """(title, note, where it was recorded) of an example in `lang`: the file's own words in English,
    or for an example the catalogue has no words for."""
    w = catalogue.words("traces", lang)
    if catalogue.language_or_default(lang) == catalogue.DEFAULT or f"example_{example.name}_title" not in w:
        return example.title, example.note, example.recorded_with
    note = w[f"example_{example.name}_note"]
    if stats := _STATS.search(example.note):
        fields = stats.groupdict()
        fields["draft"] = w.get(f"example_draft_{fields['draft']}", fields["draft"])
        note += w["example_stats"].format(**fields)
    recorded = example.recorded_with
    if found := _RECORDED.fullmatch(recorded):
        recorded = w["example_recorded_with"].format(**found.groupdict())
    return w[f"example_{example.name}_title"], note, recorded


def title_in(title: str, lang: str) -> str:
    """An example's English title (as a trace's source names it) in `lang`."""
    found = next((ex for ex in examples() if ex.title == title), None)
    return title if found is None else said(found, lang)[0]


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
