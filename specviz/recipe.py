"""What the training recipes and the bench share: batched target text, schedules, provenance.

- `left_padded` and `generation_config`: how the target writes many answers at once with
  transformers' generate (left padding, pure sampling at the given temperature or greedy);
- `lr_scale`: linear warm-up then cosine decay to 10%;
- `machine`: the CPU, threads, load and library versions a result was measured with;
- `config_cli`: one command-line flag per field of a recipe's frozen config dataclass.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
from dataclasses import asdict
from pathlib import Path

import torch


def left_padded(encoded: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts of different lengths -> input_ids and attention_mask [B, P], padded on the left so
    every row's next token is written at the same column."""
    width = max(len(e) for e in encoded)
    input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)  # [B, P]
    attention = torch.zeros((len(encoded), width), dtype=torch.long)  # [B, P]
    for i, e in enumerate(encoded):
        input_ids[i, width - len(e) :] = torch.tensor(e)
        attention[i, width - len(e) :] = 1
    return input_ids, attention


def generation_config(max_new_tokens: int, temperature: float, eos: int | None, pad: int | None, **extra):
    """transformers' GenerationConfig for pure sampling at `temperature` (0: greedy), no top-k/p."""
    from transformers import GenerationConfig

    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=temperature > 0,
        temperature=temperature if temperature > 0 else None,
        top_k=None,
        top_p=None,
        eos_token_id=eos,
        pad_token_id=pad,
        **extra,
    )


def lr_scale(step: int, warmup: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step <= warmup:
        return step / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: on a shared machine they explain slow timings."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def versions() -> dict:
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}


def machine(device: str) -> dict:
    """Where a recipe ran: CPU, torch threads, device and the load average (a shared CPU is slower)."""
    return {"cpu": cpu_name(), "threads": torch.get_num_threads(), "device": device, "load": load_average()}


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
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    cfg = type(defaults)(**{k: getattr(args, k) for k in asdict(defaults)})

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    train(cfg, args.data, args.out, args.history, log)
    return 0


def config_cli(parser: argparse.ArgumentParser, defaults) -> None:
    """Add --field-name for every field of the dataclass instance `defaults`, typed like its default."""
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, tuple):  # integers, written 1,14 on the command line
            parser.add_argument(flag, type=_int_tuple, default=value, metavar="I,J,...")
            continue
        kind = float if isinstance(value, float) else int if isinstance(value, int) else str
        parser.add_argument(flag, type=kind, default=value)


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, like 1,14") from None
