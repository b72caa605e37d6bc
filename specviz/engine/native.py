"""specviz's native kernel (csrc/gemv.cpp): built once per machine with the C++ compiler, loaded as
the torch ops `torch.ops.specviz.pack_rows(w [N, K])` (the weight laid out once, in blocks of 4 rows)
and `torch.ops.specviz.gemv(x [M, K], packed, N) -> [M, N]`.

Why a kernel of our own: a target step on the CPU multiplies one row (a verification pass a few) by
every weight, so its time is the bytes it streams. torch's one-row float32 kernels reach about half of
this machine's measured bandwidth (docs/benchmarks.md); a kernel that streams each weight once, in
one sequential pass over its own layout, comes closer. specviz.engine.kernels measures it at load
beside torch's kernels wherever it builds (kernels.candidates); SPECVIZ_KERNELS=native forces it.

Building takes seconds, once per machine (the first load of a model there; how long:
docs/benchmarks.md, "Figures once kept in code comments", "Load cost"):
torch's extension builder keeps the result under its cache ($TORCH_EXTENSIONS_DIR,
~/.cache/torch_extensions), keyed by this CPU's name and instruction-set flags (the code is compiled
for it: -march=native, so a build must never meet another CPU). It needs a C++ compiler and ninja
(on this project's machines: Debian's g++ and ninja-build). No compiler, a failed build or a result
that differs from the exact product makes `unavailable()` say why (it is then not measured), and
SPECVIZ_KERNELS=native an error that says it.
"""

from __future__ import annotations

import hashlib
import platform
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("csrc") / "gemv.cpp"
SOURCES = (SOURCE, SOURCE.with_name("step.cpp"))  # the kernel, and the lean step that calls it (decoder_layers)
_lock = threading.Lock()
STALE_LOCK_S = 600  # far longer than any build takes: a lock this old was left by a killed build
_state: dict[str, str | None] = {}  # "reason": None once loaded, else why it is not available


def source_digest() -> str:
    """The kernel's source, in 10 hex digits: a choice or a cost measured with one version of the
    kernel is never read back for another (specviz.engine.kernels.machine_key)."""
    return hashlib.sha1(b"".join(path.read_bytes() for path in SOURCES)).hexdigest()[:10]


def unavailable() -> str | None:
    """Build (once per machine) and load the kernel; None when `torch.ops.specviz.gemv` is ready,
    else the reason it is not (recorded beside the kernel choice)."""
    with _lock:
        if "reason" not in _state:
            _state["reason"] = _load()
        return _state["reason"]


def _load() -> str | None:
    import torch

    from specviz.engine.machine import cpu_name

    try:
        if not hasattr(torch.ops, "specviz") or not hasattr(torch.ops.specviz, "gemv"):
            from torch.utils.cpp_extension import load

            code = "".join(path.read_text(encoding="utf-8") for path in SOURCES)
            what = f"{cpu_name()} {_cpu_flags()} {torch.__version__} {code}"
            name = f"specviz_gemv_{hashlib.sha1(what.encode()).hexdigest()[:10]}"  # a build per CPU, torch and source
            _clear_stale_lock(name)
            flags = ["-O3", "-march=native", "-ffp-contract=fast", "-fopenmp"]
            if platform.machine() in ("x86_64", "AMD64"):
                flags.append("-mprefer-vector-width=512")  # the kernel's 16-float vectors in one register each
            load(
                name=name, sources=[str(path) for path in SOURCES], extra_cflags=flags,
                extra_ldflags=["-fopenmp"], is_python_module=False, verbose=False,
            )  # fmt: skip
        return _checked(torch)
    except Exception as exc:  # no compiler, no ninja, a failed build or check: said, never a crash
        return f"the native kernel could not be built here ({type(exc).__name__}: {str(exc)[:200]})"


def _clear_stale_lock(name: str) -> None:
    """Remove a build lock left by a process killed while it built (torch's builder waits for its
    lock file to go, forever); one older than STALE_LOCK_S is such a leftover, as a build takes
    seconds."""
    import time

    from torch.utils.cpp_extension import _get_build_directory

    lock = Path(_get_build_directory(name, verbose=False)) / "lock"
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
    except OSError:
        pass  # no lock, or another process removed it first


def _cpu_flags() -> str:
    """The instruction-set flags of this CPU (/proc/cpuinfo), so a build for one CPU is never loaded on
    another that shares its name but lacks an instruction (a virtual machine may show only "AMD EPYC")."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("flags"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _checked(torch) -> str | None:
    """The kernel against float64 on the shapes it will meet, and a row's result alone and among others."""
    generator = torch.Generator().manual_seed(0)
    for n, k in ((5, 37), (64, 576), (9, 1536)):
        w, x = torch.randn(n, k, generator=generator), torch.randn(14, k, generator=generator)
        packed = torch.ops.specviz.pack_rows(w)
        y = torch.ops.specviz.gemv(x, packed, n)  # [14, n]: past 12 rows, the tiled sweeps
        want = (x.double() @ w.double().T).float()
        if not torch.allclose(y, want, rtol=1e-4, atol=1e-4):
            return "the native kernel's result differs from the exact product"
        if not torch.equal(torch.ops.specviz.gemv(x[2:3], packed, n), y[2:3]):
            return "the native kernel's row differs computed alone"
    return None
