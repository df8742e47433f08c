"""Make MLX's CPU backend use OpenBLAS on Linux.

The `mlx[cpu]` wheel links a reference BLAS that is ~30x slower than OpenBLAS for the
matmuls of a forward pass. Loading OpenBLAS with RTLD_GLOBAL before `mlx.core` makes the
dynamic linker bind MLX's BLAS symbols to it. On macOS MLX uses Accelerate/Metal and
nothing happens here. Set CORRAL_NO_OPENBLAS=1 to keep the bundled BLAS.
"""

from __future__ import annotations

import ctypes
import os
import sys

_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
    "libopenblas.so.0",
)

openblas_path: str | None = None


def preload_openblas() -> str | None:
    """Load OpenBLAS globally if MLX is not imported yet; return the library used."""
    global openblas_path
    if openblas_path or sys.platform != "linux" or os.environ.get("CORRAL_NO_OPENBLAS"):
        return openblas_path
    if "mlx.core" in sys.modules:
        return None  # too late: MLX already bound its BLAS
    for candidate in _CANDIDATES:
        try:
            ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        openblas_path = candidate
        return candidate
    return None
