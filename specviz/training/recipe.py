"""What the training recipes share: the schedule, the record and the command line.

- `lr_scale`: linear warm-up then cosine decay to 10%;
- `write_record` and `run_recipe`: a recipe's JSON record and its command;
- `config_cli`: one command-line flag per field of a recipe's frozen config dataclass.

Where a recipe ran (`machine`) is specviz.engine.machine's; how the target writes many answers
at once with transformers' generate is specviz.engine.transformers_generate's.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from pathlib import Path


def lr_scale(step: int, warmup: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step <= warmup:
        return step / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def write_record(path: Path | None, record: dict) -> None:
    """A recipe's JSON record (its history for the app), when a path is given."""
    import json

    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def run_recipe(argv, prog: str, description: str, defaults, out: Path, history: Path, data: Path | None, train) -> int:
    """The command line of a recipe: --out (the trained weights), --history (its JSON record), --data
    (the target's text, reused when present) and one flag per field of the config dataclass
    `defaults`; then train(cfg, data, out, history, log) with a timestamped log."""
    import sys
    import time

    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", type=Path, default=out, help="folder to write the trained draft to")
    parser.add_argument("--history", type=Path, default=history, help="JSON record of alpha against step")
    parser.add_argument("--data", type=Path, default=data, help="where the target's text is written and reused")
    config_cli(parser, defaults)
    from specviz.labs.command_help import with_defaults

    args = with_defaults(parser).parse_args(sys.argv[1:] if argv is None else argv)
    cfg = type(defaults)(**{k: getattr(args, k) for k in asdict(defaults)})

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    train(cfg, args.data, args.out, args.history, log)
    return 0


def config_cli(parser: argparse.ArgumentParser, defaults) -> None:
    """Add --field-name for every field of the dataclass instance `defaults`, typed like its default, its
    help the comment beside the field in the dataclass (the one place that says what it means)."""
    notes = field_notes(type(defaults))
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        note = notes.get(name, name.replace("_", " ")).replace("%", "%%")  # argparse formats help with %
        if isinstance(value, tuple):  # integers, written 1,14 on the command line
            parser.add_argument(flag, type=_int_tuple, default=value, metavar="I,J,...", help=note)
            continue
        kind = float if isinstance(value, float) else int if isinstance(value, int) else str
        parser.add_argument(flag, type=kind, default=value, help=note)


def field_notes(cls) -> dict[str, str]:
    """{field: the comment on its line} of a dataclass written as `name: type = value  # comment`."""
    import inspect
    import re

    notes = {}
    for line in inspect.getsource(cls).splitlines():
        if found := re.match(r"\s+(\w+):[^=#]+=[^#]*#\s*(.+)$", line):
            notes[found.group(1)] = found.group(2).strip()
    return notes


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, like 1,14") from None
