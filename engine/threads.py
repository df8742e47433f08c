"""A known stack size for every thread Corral starts.

llguidance compiles grammars recursively in native code, on whatever thread asks; the
depth limits in `engine.constraints.limits` are measured against an 8 MiB stack. Python's
threads get the platform's default (8 MiB on most Linux systems, 2 MiB under `ulimit -s
unlimited`, 16 MiB on macOS), so the engine raises the default for the threads it starts.
Qt's thread pool sets its own (app/jobs/thread.py uses THREAD_STACK_BYTES too).
"""

from __future__ import annotations

import threading

THREAD_STACK_BYTES = 16 << 20


def ensure_thread_stack() -> None:
    """Make threads started from now on get at least THREAD_STACK_BYTES of stack."""
    if threading.stack_size() < THREAD_STACK_BYTES:  # 0: the platform's default
        try:
            threading.stack_size(THREAD_STACK_BYTES)
        except (ValueError, RuntimeError):  # a platform that cannot change it: keep its own
            pass
