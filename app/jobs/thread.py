"""Run short blocking work (file reading, grammar validation) off the GUI thread.

In the style of Picard's util/thread.py: the function runs on Qt's global thread pool and
its result (or exception) is handed to a callback on the GUI thread through a queued
signal, so the event loop never waits on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from engine.threads import THREAD_STACK_BYTES

_pending: set[_Relay] = set()  # keep relays alive until their callback ran


class _Relay(QObject):
    done = Signal(object, object)  # result, exception

    def __init__(self, callback: Callable[[Any, BaseException | None], None]) -> None:
        super().__init__()
        self._callback = callback
        self.done.connect(self._deliver)

    def _deliver(self, result: Any, error: BaseException | None) -> None:
        _pending.discard(self)
        owner = getattr(self._callback, "__self__", None)
        if isinstance(owner, QObject) and not shiboken6.isValid(owner):
            return  # the widget or job that asked was closed meanwhile: nobody to tell
        self._callback(result, error)


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], relay: _Relay) -> None:
        super().__init__()
        self._fn = fn
        self._relay = relay

    def run(self) -> None:
        try:
            result, error = self._fn(), None
        except Exception as exc:  # handed to the callback, shown to the user
            result, error = None, exc
        self._relay.done.emit(result, error)


def run_task(fn: Callable[[], Any], on_done: Callable[[Any, BaseException | None], None]) -> None:
    """Run `fn()` on a worker thread; call `on_done(result, error)` on the GUI thread."""
    relay = _Relay(on_done)  # created here, so it lives in (and delivers to) the GUI thread
    _pending.add(relay)
    pool = QThreadPool.globalInstance()
    if pool.stackSize() < THREAD_STACK_BYTES:
        # Grammar checks run here: llguidance's depth limits assume a big enough stack, and
        # Qt's default on macOS is 512 KiB (engine/threads.py).
        pool.setStackSize(THREAD_STACK_BYTES)
    pool.start(_Task(fn, relay))
