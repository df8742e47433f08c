"""Corral's engine: loads MLX models and generates constrained replies on one thread.

No Qt here. Import order matters: OpenBLAS must be loaded before `mlx.core`.
"""

from engine.blas import preload_openblas
from engine.threads import ensure_thread_stack

preload_openblas()
ensure_thread_stack()
