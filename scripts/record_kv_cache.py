"""Record the KV-cache comparison (specviz/assets/kv_cache.json): no KV cache, the KV cache, and the
KV cache with speculative decoding, on one prompt with the offline target and its default draft,
greedy, interleaved round by round (specviz.labs.kv_cache).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/record_kv_cache.py [--rounds 3] [--max-new 64]

About two minutes on a 2-core CPU shared with others. It runs torch on one thread
(specviz.engine.toy.one_thread), as the other recording scripts do by default: on a shared CPU
torch's intra-op threads spin against each other.
"""

from __future__ import annotations

import argparse
import json
import time

from specviz.engine import models
from specviz.engine.toy import one_thread
from specviz.labs import kv_cache


def record(rounds: int, max_new_tokens: int) -> kv_cache.KVComparison:
    """Load the offline target and compare; the result says how it was recorded."""
    started = time.perf_counter()
    target = models.load_model(models.OFFLINE_TARGET)
    result = kv_cache.compare(target, max_new_tokens=max_new_tokens, rounds=rounds)
    result.machine["recorded_with"] = (
        f"scripts/record_kv_cache.py, one torch thread, {target.dtype} ({target.kernels_label}), "
        f"{time.perf_counter() - started:.0f} s in all, {time.strftime('%Y-%m-%d', time.gmtime())}"
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed decodes of each of the three")
    parser.add_argument("--max-new", type=int, default=64, help="new tokens per decode")
    args = parser.parse_args()
    with one_thread():
        result = record(args.rounds, args.max_new)
    text = json.dumps(result.to_dict(), indent=1, ensure_ascii=False)
    kv_cache.ASSET.write_text(text + "\n", encoding="utf-8")
    for run in result.runs:
        speed = f"{run.ms_per_token:.1f} ms/token, {run.tokens_per_s:.1f} tokens/s"
        print(f"{run.mode:>12}: {speed} ({len(run.tokens)} tokens)")
    print(f"identical tokens: {result.identical}; {result.machine}")
    return 0 if result.identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
