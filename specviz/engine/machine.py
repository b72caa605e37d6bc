"""Where a measurement ran: the CPU's name, the load average, torch's threads and the library
versions, as the bench, the kernel cache and the training records write them down."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch


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
