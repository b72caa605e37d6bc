"""Record the Serving page's shipped recording (specviz/assets/serving.json): B = 1, 2, 4, 8, 16
requests decoding at once on the offline target, the target alone and with its default draft.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/record_serving.py [--max-new 16] [--threads 1]

Greedy, the default γ, 16 new tokens per request by default: a few minutes on a 2-core CPU. Each
(B, mode) is written to the file as soon as it is measured, so an interrupted recording keeps what
it has (its file says "stopped"); run it again to record all of it. The file says what machine,
load and settings recorded it (config.cpu, config.load_before/after, config.recorded_with), and the
page shows that beside the numbers. It ends with the table docs/benchmarks.md (Serving) quotes.

--threads defaults to 1, as scripts/record_workloads.py's: on a shared CPU torch's intra-op threads
spin against each other, and the batcher runs torch in one thread at a time anyway.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.config import DEFAULT_GAMMA  # noqa: E402
from specviz.engine import models  # noqa: E402
from specviz.labs import serving  # noqa: E402


def table(result: serving.ServingResult) -> str:
    """The Markdown table of docs/benchmarks.md: one row per B, both modes side by side."""
    lines = [
        "| B | target alone tok/s | speculative tok/s | gain | median latency, alone / spec (s) "
        "| pass ms per row, alone / spec | rows per pass, alone / spec | identical |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in result.batches():
        alone, spec = result.cell(b, "target") or {}, result.cell(b, "speculative") or {}
        gain = result.gain(b)

        def pair(col: str, spec_: str, alone=alone, spec=spec) -> str:
            return " / ".join("–" if c.get(col) is None else format(c[col], spec_) for c in (alone, spec))

        same = "–" if spec.get("identical") is None else f"{spec['identical']} of {spec['requests']}"
        speeds = pair("tokens_per_s", ".1f").replace(" / ", " | ")
        costs = f"{pair('latency_s', '.2f')} | {pair('pass_ms_per_row', '.2f')} | {pair('rows_per_pass', '.1f')}"
        lines.append(f"| {b} | {speeds} | {'–' if gain is None else f'{gain:.2f}×'} | {costs} | {same} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default, what in (("--max-new", 16, "new tokens per request"),
                                ("--threads", 1, "torch CPU threads (0: torch's default)")):  # fmt: skip
        parser.add_argument(flag, type=int, default=default, help=what)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads or torch.get_num_threads())
    target, out = models.load_model(models.OFFLINE_TARGET), serving.RECORDING
    started = time.perf_counter()

    def stamp(result: serving.ServingResult) -> None:
        result.config["recorded_with"] = (
            f"scripts/record_serving.py, {torch.get_num_threads()} torch thread(s), {target.dtype} "
            f"({target.kernels_label}), {time.perf_counter() - started:.0f} s in all, "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}"
        )
        out.write_text(result.to_json() + "\n", encoding="utf-8")

    def progress(done: int, total: int, result: serving.ServingResult) -> None:
        cell = result.cells[-1]
        print(f"{done}/{total} ({time.perf_counter() - started:.0f} s): B {cell['batch']} {cell['mode']}, "
              f"{cell['tokens_per_s']:.1f} tok/s", flush=True)  # fmt: skip
        partial = serving.ServingResult(result.config, list(result.cells), done < total, total)
        stamp(partial)  # kept if the recording is interrupted: the page says it stopped

    result = serving.run_serving(
        target=target, gamma=DEFAULT_GAMMA, temperature=0.0, max_new_tokens=args.max_new, on_progress=progress
    )
    stamp(result)
    print(table(result))
    crossover = result.crossover()
    print(f"crossover: B = {crossover}" if crossover else "no crossover: speculation paid at every B measured")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
