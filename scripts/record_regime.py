"""Record the regime the Serving page opens on (specviz/assets/regime.json): both weight formats of the
offline target, v(rows) and the default drafter against the target alone (specviz.labs.regime).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/record_regime.py [--threads 2]

On a quiet machine: every figure is a timing. --threads defaults to 2, the app's own on this project's
two-core machines.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.config import WEIGHT_FORMATS  # noqa: E402
from specviz.labs import regime  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from specviz.engine.models import load_model

    torch.set_num_threads(args.threads)
    targets = {w: load_model(weights=w) for w in WEIGHT_FORMATS}
    record = regime.measure(targets)
    regime.RECORDING.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name in record["formats"]:
        f = record["formats"][name]
        print(name, f["one_row_ms"], "ms; v", f["v"], "; measured", f["measured_speedup"],
              "predicted", round(regime.predicted_speedup(record, name), 2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
