"""Record the Workloads page's shipped recording (specviz/assets/workloads.json) with the offline
target and every offline drafter, so the page opens at once on real measurements.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/record_workloads.py [--prompts 2] [--max-new 24] [--threads 1]

Small settings by default (2 prompts per kind, 24 new tokens, greedy, the default γ): about ten
minutes on a 2-core CPU. The file says what machine, load and settings recorded it (config.cpu,
config.load_before/after, config.recorded_with), and the page shows that beside the numbers.

--threads defaults to 1, as scripts/record_examples.py's: on a shared CPU torch's intra-op threads
spin against each other and a verify pass becomes several times slower than on one thread.
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
from specviz.labs import workloads  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2, help="prompts per kind (at most 3)")
    parser.add_argument("--max-new", type=int, default=24, help="new tokens per run")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=workloads.RECORDING)
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    target = models.load_model(models.OFFLINE_TARGET)
    started = time.perf_counter()

    def progress(done: int, total: int, result: workloads.WorkloadsResult) -> None:
        cell = result.cells[-1] if result.cells else {}
        print(f"{done}/{total} pairs ({time.perf_counter() - started:.0f} s): {cell.get('kind')} {cell.get('draft')}")

    result = workloads.run_workloads(
        target=target, prompts_per_kind=args.prompts, gamma=DEFAULT_GAMMA, temperature=0.0,
        max_new_tokens=args.max_new, on_progress=progress,
    )  # fmt: skip
    result.config["recorded_with"] = (
        f"scripts/record_workloads.py, {torch.get_num_threads()} torch thread(s), {target.dtype} "
        f"({target.kernels_label}), {time.perf_counter() - started:.0f} s in all, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}"
    )
    args.out.write_text(result.to_json() + "\n", encoding="utf-8")
    for cell in result.cells:
        print(
            f"{cell['kind']:>8} {cell['label']:>18}: α {cell['alpha'] or 0:.2f}, "
            f"{cell['tokens_per_iteration']:.2f} tokens/iteration, {cell['speedup'] or 0:.2f}× "
            f"(predicted {cell['predicted_speedup'] or 0:.2f}×)"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
