"""Corral's desktop app: a PySide6 window over the engine, which runs on its own thread.

Nothing in this package imports MLX; the engine does that on its thread.
"""

__version__ = "0.1.0"
