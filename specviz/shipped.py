"""Where the files that ship inside the specviz package live, so an installed wheel finds them.

- `ASSETS`: recordings and records the app and the notebook read (lesson text and traces,
  example traces, the race of drafters, the training records of the learned drafts, and the
  paper's check tables that specviz.labs.theory reproduces);
- `WEIGHTS`: the trained drafts (safetensors), one folder per `offline:<name>`.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ASSETS = PACKAGE / "assets"
WEIGHTS = PACKAGE / "weights"
