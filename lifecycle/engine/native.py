"""A matrix-vector product compiled for this CPU, for the decode step of a single request.

At one token a step the model's products are matrix-vector products, and their speed is the speed
at which the weights are read. oneDNN reads the large ones (the head, gate/up) at the memory's
speed, but each call has a fixed cost that the small ones feel: measured on this 2-core machine,
the attention output (576x576) took 102 us against 30 us for ``gemv.c``, the down projection
(576x1536) 301 against 132 us. ``gemv.c`` is compiled once with the system's C compiler for this
CPU (about a second) into the cache directory and loaded with ctypes; without a compiler, or if
its result disagrees with ``F.linear`` on a probe, the engine keeps oneDNN.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

SOURCE = Path(__file__).with_name("gemv.c")
DISABLE_ENV = "LIFECYCLE_NATIVE_GEMV"  # "0" keeps oneDNN for every product
Gemv = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


def compiled_gemv(cache_dir: Path) -> Gemv | None:
    """``weight @ x[0] + bias`` as a [1, rows] tensor for a [1, n] fp32 ``x``, or None where it cannot be
    built or disagrees with ``F.linear``."""
    if os.environ.get(DISABLE_ENV, "").strip() == "0":
        return None
    library = _build(cache_dir)
    if library is None:
        return None
    kernel = library.gemv
    kernel.restype = None
    kernel.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_long, ctypes.c_long, ctypes.c_int]

    def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        rows, n = weight.shape
        y = torch.empty(1, rows)
        kernel(x.data_ptr(), weight.data_ptr(), None if bias is None else bias.data_ptr(), y.data_ptr(),
               rows, n, torch.get_num_threads())
        return y

    return gemv if _agrees(gemv) else None


def _build(cache_dir: Path) -> ctypes.CDLL | None:
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    flags = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
    try:
        target = cache_dir / f"gemv-{_fingerprint(compiler, flags)}.so"
        if not target.exists():
            cache_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache_dir) as work:
                built = Path(work) / target.name
                done = subprocess.run([compiler, *flags, str(SOURCE), "-o", str(built)], capture_output=True)
                if done.returncode != 0:
                    return None
                built.replace(target)  # atomic: a half-written library is never loaded
        return ctypes.CDLL(str(target))
    except OSError:  # a read-only cache directory, a compiler that cannot run, a library that cannot load
        return None


def _fingerprint(compiler: str, flags: list[str]) -> str:
    """The source, the compiler and this CPU: a library built for another CPU is never loaded."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    cpu = next((line for line in _cpuinfo().splitlines() if line.startswith(("flags", "Features"))), "")
    parts = [SOURCE.read_text(), version, " ".join(flags), platform.machine(), cpu]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _agrees(gemv: Gemv) -> bool:
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for rows, n in ((7, 37), (96, 576)):  # odd sizes reach the remainder loops
            x, weight, bias = (torch.randn(*s, generator=generator) for s in ((1, n), (rows, n), (rows,)))
            for b in (None, bias):
                if not torch.allclose(gemv(x, weight, b), F.linear(x, weight, b), atol=1e-4, rtol=1e-4):
                    return False
    return True
