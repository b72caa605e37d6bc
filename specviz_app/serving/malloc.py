"""How the app's server process allocates memory: at most two malloc arenas (glibc on Linux).

glibc gives a thread an arena of its own when it first allocates, up to eight per core, and what
a thread frees stays in its arena for that arena's next allocation. The app decodes in one
Streamlit thread per session, so a class spreads its passes' tensors over sixteen arenas on two
cores: thirty decodes at once in the engine alone (threads, no Streamlit) grew the process by
hundreds of megabytes with their KV caches already sized to their runs, and kept it; two arenas
halved the growth at the same speed (docs/reliability.md; the figures: docs/benchmarks.md, "Figures
once kept in code comments", "Memory bounds"). Torch runs
in one decode's thread at a time (specviz.serving.batching's compute lock), so sharing two arenas
costs no waiting worth measuring.

Only the server sets this (app.py and specviz_app/serving/asgi.py call `limit_arenas` as they start):
the library leaves a user's process as it finds it. A MALLOC_ARENA_MAX in the environment wins.
"""

from __future__ import annotations

import ctypes
import os
import sys

ARENAS = 2
M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Have glibc's malloc use at most `arenas` arenas from now on; False where it cannot (not
    Linux, not glibc) or where MALLOC_ARENA_MAX already says how many."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # another C library (musl has no mallopt arenas)
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
