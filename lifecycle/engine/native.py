"""A matrix-vector product compiled for this CPU, for the decode step of a single request.

At one token a step the model's products are matrix-vector products, and their speed is the speed
at which the weights are read. oneDNN reads the large ones (the head, gate/up) at the memory's
speed, but each call has a fixed cost that the small ones feel: measured on this 2-core machine,
the attention output (576x576) took 102 us against 30 us for ``gemv.c``, the down projection
(576x1536) 301 against 132 us. ``gemv.c`` is compiled once with the system's C compiler for this
CPU (about a second) into the cache directory and loaded with ctypes; without a compiler, or if
its result disagrees with ``F.linear`` on a probe, the engine keeps oneDNN.

On a CPU with AVX2 the same library also reads packed weights (``packing.py``: 4-bit and 8-bit
codes that rebuild the fp32 weights exactly), with results equal to the fp32 kernel's bit for bit;
a probe checks that before the engine uses them, and without AVX2 every matrix is read as fp32.
It reads them for a few rows at once too (``gemm_*``: a decode step of a small batch), rebuilding
each block once for up to four rows, each row's result the one-row kernel's bit for bit.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lifecycle.engine.packing import Affine4, Packed, Scaled8, interleave, unpack

SOURCE = Path(__file__).with_name("gemv.c")
DISABLE_ENV = "LIFECYCLE_NATIVE_GEMV"  # "0" keeps oneDNN for every product
SIZES = [ctypes.c_long, ctypes.c_long, ctypes.c_int]  # rows, n, threads (after m, the rows of x, for gemm_*)
SMALL_BATCH_PROBE = 7  # rows of x the start-up probe checks: a tile of four and the three-row remainder


@dataclass(frozen=True)
class Gemv:
    """``x @ weight.T + bias`` as an [m, rows] tensor for a contiguous [m, n] fp32 ``x``; ``weight`` is
    fp32 (one row of ``x`` only), or packed where ``reads_packed`` (any number of rows: each row's result
    is the one-row kernel's bit for bit)."""

    library: ctypes.CDLL
    reads_packed: bool

    def __call__(self, x: torch.Tensor, weight: torch.Tensor | Packed, bias: torch.Tensor | None) -> torch.Tensor:
        rows, n = weight.shape
        m = x.shape[0]
        y = torch.empty(m, rows)
        if isinstance(weight, Affine4):
            tensors = (x, weight.codes, weight.scale, weight.offset, bias, y)
            kernel = self.library.gemm_affine4 if m > 1 else self.library.gemv_affine4
        elif isinstance(weight, Scaled8):
            tensors = (x, weight.codes, weight.scale, bias, y)
            kernel = self.library.gemm_scaled8 if m > 1 else self.library.gemv_scaled8
        elif m == 1:
            tensors = (x, weight, bias, y)
            kernel = self.library.gemv
        else:
            raise ValueError(f"gemv.c reads fp32 weights for one row, not {m}")
        sizes = (m, rows, n) if m > 1 else (rows, n)
        kernel(*(None if t is None else t.data_ptr() for t in tensors), *sizes, torch.get_num_threads())
        return y


def compiled_gemv(cache_dir: Path) -> Gemv | None:
    """The compiled product, or None where it cannot be built or disagrees with ``F.linear``."""
    if os.environ.get(DISABLE_ENV, "").strip() == "0":
        return None
    library = _build(cache_dir)
    if library is None:
        return None
    kernels = {"gemv": 4, "gemv_affine4": 6, "gemv_scaled8": 5, "gemm_affine4": 6, "gemm_scaled8": 5}  # pointers
    for name, pointers in kernels.items():
        if hasattr(library, name):
            getattr(library, name).restype = None
            rows_of_x = [ctypes.c_long] if name.startswith("gemm") else []
            getattr(library, name).argtypes = [ctypes.c_void_p] * pointers + rows_of_x + SIZES
    plain = Gemv(library, reads_packed=False)
    if not _agrees(plain):
        return None
    packed = Gemv(library, reads_packed=True)
    has_packed = all(hasattr(library, name) for name in kernels if name != "gemv")
    return packed if has_packed and _packed_agrees(packed) else plain


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


def _packed_agrees(gemv: Gemv) -> bool:
    """Packed matrices (every code value present) give the fp32 kernel's result bit for bit."""
    generator = torch.Generator().manual_seed(1)
    rows, n = 13, 96
    with torch.inference_mode():
        scale = torch.rand(rows, n // 32, generator=generator).half().float()
        offset = -torch.rand(rows, n // 32, generator=generator).half().float()
        four = torch.randint(0, 16, (rows, n), dtype=torch.uint8, generator=generator)
        four[:, :16] = torch.arange(16, dtype=torch.uint8)
        eight = torch.randint(-128, 128, (rows, n), dtype=torch.int8, generator=generator)
        eight[:, :32] = torch.tensor([-128, 127, 0, -1] * 8, dtype=torch.int8)
        affine = Affine4(interleave(four), scale, offset)
        scaled = Scaled8(eight, scale)
        x, bias = torch.randn(SMALL_BATCH_PROBE, n, generator=generator), torch.randn(rows, generator=generator)
        for matrix in (affine, scaled):
            dense = unpack(matrix).contiguous()
            for b in (None, bias):
                alone = torch.cat([gemv(x[i:i + 1], dense, b) for i in range(len(x))])
                if not (torch.equal(gemv(x[:1], matrix, b), alone[:1]) and torch.equal(gemv(x, matrix, b), alone)):
                    return False
    return True
