"""The app's server limits glibc's malloc arenas (specviz_app/serving/malloc.py): threads that allocate
at once share two arenas instead of getting one each, which is what kept a class's freed tensors
spread over sixteen arenas. Counted by glibc itself (malloc_stats), in a fresh process each time."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import ctypes, sys, threading
from specviz_app.serving.malloc import limit_arenas
limited = limit_arenas() if sys.argv[1] == "limit" else False
ready = threading.Barrier(9)
def allocate():
    held = [bytearray(4000) for _ in range(200)]  # small blocks: from the thread's arena
    ready.wait(30)
    ready.wait(30)
threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads:
    t.start()
ready.wait(30)  # all eight threads hold their blocks now
ctypes.CDLL("libc.so.6").malloc_stats()  # writes "Arena N:" per arena to stderr
ready.wait(30)
for t in threads:
    t.join()
print(limited)
"""


def arenas(mode: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    return len(re.findall(r"^Arena \d+:", done.stderr, re.M)), done.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's arenas: glibc only")
def test_the_server_shares_two_arenas_among_its_threads():
    free, said = arenas("free")
    assert said == "False" and free > 2  # glibc's default: an arena per allocating thread
    limited, said = arenas("limit")
    assert said == "True" and limited <= 2


def test_an_arena_count_in_the_environment_wins(monkeypatch):
    from specviz_app.serving import malloc

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert malloc.limit_arenas() is False
