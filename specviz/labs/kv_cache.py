"""They compose: no KV cache, the KV cache, and the KV cache with speculative decoding, measured
side by side on one prompt.

Three ways to make the same greedy text with the same target:

    no_cache      every step runs the target's forward over the whole sequence so far (prompt and
                  every token made), from an empty cache: each position's keys and values are
                  recomputed at every step. It is the engine's own forward (`TargetState.forward`:
                  the lean forward for the offline target, the same kernels), handed a fresh state
                  each step, so the only difference from the next row is the cache.
    kv_cache      the target alone with its KV cache: each step feeds only the newest token
                  (specviz.decoding.decoder.autoregressive_generate, the app's baseline)
    speculative   the KV cache and speculative decoding: the default draft proposes, one target
                  pass verifies (speculative_generate)

At temperature 0 all three make the same tokens (greedy: the target's top token every time; the
comparison records each run's tokens and `identical` says whether they agree). The runs are
interleaved, round by round, with the order rotated each round, so a load that comes and goes on a
shared CPU falls on all three; each figure is the median over the rounds of a whole decode's wall
time ÷ its new tokens.

Plain data in and out; torch only inside the function that decodes, so `load_comparison` and the
charts read the recording without it. scripts/record_kv_cache.py writes ASSET.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specviz.errors import SpecvizError
from specviz.shipped import ASSETS

SCHEMA = "specviz.kv_cache/1"
ASSET = ASSETS / "kv_cache.json"  # made by scripts/record_kv_cache.py
MODES = ("no_cache", "kv_cache", "speculative")
PROMPT = "Write a Python function `is_even(n)` that returns True when n is even, with a docstring."
MAX_BYTES = 512 * 1024  # a recording is a few kB


class ComparisonError(SpecvizError):
    """A comparison file that cannot be read: its message says what is wrong."""


@dataclass
class ModeRun:
    """One way of decoding: its tokens (the same every round: greedy) and each round's wall time."""

    mode: str  # one of MODES
    tokens: list[int]
    wall_ms: list[float]  # per round, the whole decode

    @property
    def ms_per_token(self) -> float:
        """The median round's wall time ÷ the new tokens."""
        return statistics.median(self.wall_ms) / max(1, len(self.tokens))

    @property
    def tokens_per_s(self) -> float:
        return 1e3 / self.ms_per_token if self.ms_per_token > 0 else 0.0


@dataclass
class KVComparison:
    """The three runs on one prompt, and where they were measured."""

    prompt: str
    target: str
    draft: str
    max_new_tokens: int
    rounds: int
    runs: list[ModeRun]
    text: str = ""  # the decoded output (the same for all three when `identical`)
    machine: dict = field(default_factory=dict)  # cpu, threads, load before and after

    def run(self, mode: str) -> ModeRun:
        for r in self.runs:
            if r.mode == mode:
                return r
        raise KeyError(mode)

    @property
    def identical(self) -> bool:
        """Whether the three runs made exactly the same tokens."""
        return len({tuple(r.tokens) for r in self.runs}) == 1

    def speedup(self, mode: str, over: str = "no_cache") -> float:
        """How many times faster `mode` is than `over`, per token."""
        return self.run(over).ms_per_token / self.run(mode).ms_per_token

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any) -> KVComparison:
        """Read back a to_dict(); a clear ComparisonError for anything else."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ComparisonError(f"Not a KV-cache comparison (expected schema {SCHEMA!r}).")
        try:
            runs = [_mode_run(r) for r in data["runs"]]
            if sorted(r.mode for r in runs) != sorted(MODES):
                raise ComparisonError(f"A comparison holds one run of each of {', '.join(MODES)}.")
            return cls(
                prompt=str(data["prompt"]), target=str(data["target"]), draft=str(data["draft"]),
                max_new_tokens=int(data["max_new_tokens"]), rounds=int(data["rounds"]), runs=runs,
                text=str(data.get("text", "")), machine=dict(data.get("machine") or {}),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ComparisonError(f"This KV-cache comparison is incomplete or malformed ({exc!r}).") from exc


def _mode_run(d: Any) -> ModeRun:
    if not isinstance(d, dict) or d.get("mode") not in MODES:
        raise ComparisonError(f"Each run needs a mode among {', '.join(MODES)}.")
    tokens, wall = [int(t) for t in d["tokens"]], [float(x) for x in d["wall_ms"]]
    if not wall or any(not x > 0 for x in wall):
        raise ComparisonError(f"The {d['mode']} run needs positive wall times, one per round.")
    return ModeRun(d["mode"], tokens, wall)


def load_comparison(path: str | Path = ASSET) -> KVComparison:
    """The shipped recording (or the file at `path`)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ComparisonError(f"Cannot read the KV-cache comparison {path.name}: {exc.strerror}.") from exc
    if len(raw) > MAX_BYTES:
        raise ComparisonError(f"{path.name} is over {MAX_BYTES // 1024} kB: not a KV-cache comparison.")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ComparisonError(f"{path.name} is not JSON ({exc}).") from exc
    return KVComparison.from_dict(data)


def compare(
    target=None,
    draft=None,
    prompt: str | list[int] = PROMPT,
    max_new_tokens: int = 48,
    rounds: int = 3,
    chat_template: bool = True,
) -> KVComparison:
    """Decode `prompt` greedily the three ways (MODES), `rounds` times each, interleaved.
    target: a LoadedModel or name (None: the default target); draft: as speculative_generate's."""
    from specviz.config import DecodeOptions
    from specviz.decoding.decoder import autoregressive_generate, speculative_generate
    from specviz.decoding.prompting import prompt_token_ids
    from specviz.engine import machine
    from specviz.engine.models import DEFAULT_TARGET, default_draft, load_model

    if rounds < 1 or max_new_tokens < 1:
        raise ComparisonError("rounds and max_new_tokens must be at least 1.")
    target = target if target is not None and not isinstance(target, str) else load_model(target or DEFAULT_TARGET)
    draft = draft if draft is not None else default_draft(target.name)
    ids = prompt_token_ids(target.tokenizer, prompt, chat_template) if isinstance(prompt, str) else list(prompt)
    common = {
        "target": target,
        "options": DecodeOptions(temperature=0.0, max_new_tokens=max_new_tokens),
        "trace": False,
    }
    decode = {
        "no_cache": lambda: no_cache_generate(target, ids, max_new_tokens),
        "kv_cache": lambda: autoregressive_generate(ids, **common).output_token_ids,
        "speculative": lambda: speculative_generate(ids, draft=draft, **common).output_token_ids,
    }
    tokens: dict[str, list[int]] = {}
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    load_before = machine.load_average()
    for r in range(rounds):
        for mode in MODES[r % 3 :] + MODES[: r % 3]:  # rotate who goes first
            start = time.perf_counter()
            tokens[mode] = decode[mode]()
            wall[mode].append((time.perf_counter() - start) * 1e3)
    runs = [ModeRun(m, tokens[m], wall[m]) for m in MODES]
    where = {**machine.machine(str(target.device)), "load_before": load_before, "load_after": machine.load_average()}
    text = target.tokenizer.decode(tokens["kv_cache"]) if target.tokenizer is not None else ""
    name = draft if isinstance(draft, str) else getattr(draft, "name", str(draft))
    label = prompt if isinstance(prompt, str) else " ".join(f"<{i}>" for i in prompt)
    return KVComparison(label, target.name, name, max_new_tokens, rounds, runs, text, where)


def no_cache_generate(target, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Greedy decoding with no KV cache: each step a fresh TargetState (an empty cache) and one
    forward over the whole sequence; the cache it fills is thrown away. Stops at end of sequence."""
    import torch

    from specviz.engine.target import TargetState

    seq, out = list(prompt_ids), []
    empty = torch.empty(1, 0, dtype=torch.long, device=target.device)
    with torch.inference_mode():
        while len(out) < max_new_tokens:
            logits, _ = TargetState(target, seq).forward(empty, None)  # [1, V]: the last position
            token = int(logits[-1].argmax())
            seq.append(token)
            out.append(token)
            if token == target.eos_token_id:
                break
    return out
