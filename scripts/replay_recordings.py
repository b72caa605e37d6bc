"""Re-decode every shipped recording with its own settings, through the public API, and fingerprint it.

    PYTHONPATH=. HF_HUB_OFFLINE=1 SPECVIZ_KERNELS=packed python scripts/replay_recordings.py OUT.json

For the gallery's examples and the lesson's two traces (specviz/assets), it runs
`specviz.speculative_generate` with the recorded prompt, models and settings, says whether the
tokens equal the recording's, and writes a fingerprint of each fresh decode: a hash of its tokens
and its iterations (drafts, decisions, r, p, q, corrections, drafting) with every timing and kernel
record and the KV-cache lengths left out and numbers rounded to 4 decimals. Two checkouts that give
the same fingerprints decode the same way: how a restructuring shows its behaviour unchanged (run
both with the same SPECVIZ_KERNELS, since a different kernel rounds the last bits of p and q
differently). It uses only the public API, so it runs on any version of the package.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import specviz
from specviz.config import DecodeOptions

ASSETS = Path(specviz.__file__).resolve().parent / "assets"
# Keys left out wherever they occur (any key containing one of these). "cache": the iterations' KV-cache
# lengths (optional, recorded since commit 13dbb61) are bookkeeping of how the engine stored the tokens, not
# what it decoded; fingerprinting them would make checkouts before and after that commit differ with the
# same decoding.
LEFT_OUT = ("_ms", "_s", "seconds", "timing", "pairs", "recorded_with", "kernels", "forward", "cache")


def recordings() -> list[Path]:
    examples = sorted(p for p in (ASSETS / "examples").glob("*.json") if ".baseline" not in p.name)
    return [*examples, ASSETS / "lesson_trace.json", ASSETS / "lesson_contrast.json"]


def timing_free(value):
    """The value with timings, kernel records and cache lengths left out and floats rounded to 4 decimals."""
    if isinstance(value, dict):
        return {k: timing_free(v) for k, v in value.items() if not any(word in k for word in LEFT_OUT)}
    if isinstance(value, list):
        return [timing_free(v) for v in value]
    return round(value, 4) if isinstance(value, float) else value


def replay(path: Path) -> tuple[bool, str]:
    """(the fresh decode's tokens equal the recording's, the fresh decode's fingerprint)."""
    recorded = json.loads(path.read_text(encoding="utf-8"))
    c = recorded["config"]
    fresh = specviz.speculative_generate(
        recorded["prompt"],
        target=c["target"],
        draft=c["draft"],
        options=DecodeOptions(
            gamma=c["gamma"],
            temperature=c["temperature"],
            top_k=c.get("top_k"),
            top_p=c.get("top_p"),
            seed=c["seed"],
            max_new_tokens=c["max_new_tokens"],
            rule=c.get("rule", "exact"),
            chat_template=c.get("chat_template", True),
        ),
    )
    data = json.loads(fresh.to_json())
    shape = timing_free({"tokens": data["output_token_ids"], "iterations": data["iterations"]})
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]
    return data["output_token_ids"] == recorded["output_token_ids"], digest


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    prints = {}
    for path in recordings():
        same_tokens, digest = replay(path)
        prints[path.name] = digest
        print(f"{path.name}: tokens {'equal' if same_tokens else 'DIFFER from'} the recording's; fingerprint {digest}")
    Path(argv[0]).write_text(json.dumps(prints, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
