"""Work around a reference-count bug of PySide6 6.12.0 on Python 3.11.

There, every call of a void Qt method drops one reference to None and every signal emit
one reference to True. Python 3.12+ made those objects immortal, so the bug is harmless
there; on 3.11 None's count reaches zero after a few thousand calls and the interpreter
aborts ("none_dealloc" / "bool_dealloc"). PySide6 6.11 does not have the bug.

`guard_refcounts()` measures the leak on the running versions and, only if it is there,
gives None, True and False so many references that they behave as immortal, which is what
Python 3.12 does for them anyway.
"""

from __future__ import annotations

import ctypes
import sys

_IMMORTAL = 1 << 40  # leaked decrefs the app can absorb: far beyond any session
_applied = False


def _leaks() -> bool:
    from PySide6.QtCore import QObject, Signal

    class Probe(QObject):
        ping = Signal()

    probe = Probe()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(64):
        probe.setObjectName("probe")  # a void method
        probe.ping.emit()
    leaked_none = none_before - sys.getrefcount(None)
    leaked_true = true_before - sys.getrefcount(True)
    return leaked_none >= 32 or leaked_true >= 32


def guard_refcounts() -> bool:
    """Apply the workaround if this PySide6 leaks references; return whether it did."""
    global _applied
    if _applied or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return _applied
    if _leaks():
        for obj in (None, True, False):
            # ob_refcnt is the first field of every CPython object.
            ctypes.c_ssize_t.from_address(id(obj)).value += _IMMORTAL
        _applied = True
    return _applied
