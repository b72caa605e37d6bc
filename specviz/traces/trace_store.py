"""A folder of finished traces, by id, that several app replicas share (no streamlit, no torch).

When the app runs as several replicas behind one proxy (specviz_app/serving/replicas.py), a replica that
stops takes its sessions' memory with it. Each finished run is therefore also written here, under
an id made from everything the trace depends on (`run_id`), so

- a reconnecting student, whose link carries `?trace=<id>`, gets the very same trace back from any
  replica (`get`), and
- another replica asked for the same settings shows that recording instead of decoding it again.

Files are `<id>.json` and, when the run had one, `<id>.baseline.json`, written to a temporary name
and renamed, so a reader never sees half a file; they are read back through `Trace.from_json`
(validated, size-limited: a damaged file is refused with its reason, never trusted). The folder
is bounded: past `max_traces` the oldest runs are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from specviz.errors import TraceError
from specviz.traces.speedup import counted_pairs
from specviz.traces.trace import Trace

ENV = "SPECVIZ_TRACE_STORE"  # the folder; unset: the app keeps traces in its own memory only
ID_CHARS = 20
ID_PATTERN = re.compile(rf"[0-9a-f]{{{ID_CHARS}}}")
MAX_TRACES = 2000  # runs kept on disk (their size: docs/benchmarks.md, "Memory bounds")


def run_id(parts) -> str:
    """A stable id for what a trace depends on (JSON-able parts: settings, model names, dtype,
    kernels), the same in every replica and every process."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:ID_CHARS]


def check_id(trace_id: str) -> str:
    """The id as given, or a TraceError saying what an id looks like (a link may carry anything)."""
    if not isinstance(trace_id, str) or not ID_PATTERN.fullmatch(trace_id):
        shown = str(trace_id)[:40]
        raise TraceError(f"{shown!r} is not a stored trace's id: an id is {ID_CHARS} characters of 0-9 and a-f.")
    return trace_id


class TraceStore:
    def __init__(self, folder: str | os.PathLike, max_traces: int = MAX_TRACES) -> None:
        if max_traces < 1:
            raise ValueError(f"keep at least one trace; got max_traces={max_traces!r}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_traces = max_traces

    def _path(self, trace_id: str, baseline: bool = False) -> Path:
        return self.folder / f"{check_id(trace_id)}{'.baseline' if baseline else ''}.json"

    def has(self, trace_id: str) -> bool:
        return self._path(trace_id).is_file()

    def put(self, trace_id: str, trace: Trace, baseline: Trace | None) -> None:
        """Write (or rewrite: later timing pairs) the run. The baseline goes first, so a reader that
        finds the trace finds its baseline too."""
        if baseline is not None:
            self._write(self._path(trace_id, True), baseline.to_dict())
        data = json.loads(trace.to_json())  # a copy: the live trace keeps its own "wanted"
        timing = data.get("extra", {}).get("timing")
        if isinstance(timing, dict) and isinstance(timing.get("pairs"), list):
            # What is in is this file's timing: a replica that stops never adds the pairs still due.
            # Wanted counts solo, undisturbed pairs only (specviz.traces.speedup): a batched first pair takes no place.
            timing["wanted"] = len(counted_pairs(timing["pairs"]))
        self._write(self._path(trace_id), data)
        self._prune()

    def get(self, trace_id: str) -> tuple[Trace, Trace | None, float]:
        """(trace, baseline or None, when it was written, seconds since the epoch). TraceError with a
        clear message for an id that is malformed or not stored, or a file that does not validate."""
        path = self._path(trace_id)
        try:
            text = path.read_bytes()
            written = path.stat().st_mtime
        except FileNotFoundError:
            raise TraceError(
                f"No stored trace has the id {trace_id}: it may be older than the {self.max_traces} runs this "
                "server keeps. Press Run to decode the link's settings again."
            ) from None
        trace = Trace.from_json(text)
        base_path = self._path(trace_id, True)
        baseline = Trace.from_json(base_path.read_bytes()) if base_path.is_file() else None
        return trace, baseline, written

    def _write(self, path: Path, data: dict) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, allow_nan=False)
            os.replace(tmp, path)  # atomic: a reader sees the old file or the new one, never half
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _prune(self) -> None:
        runs = [p for p in self.folder.glob("*.json") if ID_PATTERN.fullmatch(p.stem)]
        if len(runs) <= self.max_traces:
            return
        runs.sort(key=lambda p: p.stat().st_mtime)
        for old in runs[: len(runs) - self.max_traces]:
            old.unlink(missing_ok=True)
            old.with_name(old.stem + ".baseline.json").unlink(missing_ok=True)


def from_environment() -> TraceStore | None:
    """The store SPECVIZ_TRACE_STORE names, or None when it is unset (one replica needs none)."""
    folder = os.environ.get(ENV, "").strip()
    return TraceStore(folder) if folder else None
