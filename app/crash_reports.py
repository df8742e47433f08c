"""Crash reports for exceptions nobody caught: `CrashReporter` is sys.excepthook and
threading.excepthook; an uncaught exception on any thread is logged (engine.logs) with its
traceback and its report (redacted) is emitted as `crashed`, which reaches the GUI thread
as a queued signal; the window shows it (app.views.common.crash_dialog)."""

from __future__ import annotations

import platform
import sys
import threading
import traceback
from types import TracebackType
from typing import Any

from PySide6.QtCore import QObject, Signal

from app import __version__
from engine.logs import log, log_file, redact_text


def report_text(
    exc_type: type[BaseException],
    exc: BaseException | None,
    tb: TracebackType | None,
    where: str,
) -> str:
    """A crash report: Corral's and Python's versions, the OS, where it happened and the
    traceback, redacted."""
    lines = [
        f"Corral {__version__}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()})",
        f"Uncaught exception in {where}:",
        "".join(traceback.format_exception(exc_type, exc, tb)).rstrip(),
    ]
    path = log_file()
    if path is not None:
        lines.append(f"Log: {path}")
    return redact_text("\n".join(lines))


class CrashReporter(QObject):
    """sys.excepthook and threading.excepthook: logs an uncaught exception and emits its
    report. Connect `crashed` with a queued connection to a GUI-thread receiver."""

    crashed = Signal(str)  # the report text

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._previous_sys: Any = None
        self._previous_thread: Any = None

    def install(self) -> None:
        self._previous_sys, sys.excepthook = sys.excepthook, self._sys_hook
        self._previous_thread, threading.excepthook = threading.excepthook, self._thread_hook

    def uninstall(self) -> None:
        if sys.excepthook == self._sys_hook:
            sys.excepthook = self._previous_sys
        if threading.excepthook == self._thread_hook:
            threading.excepthook = self._previous_thread

    def handle(
        self,
        exc_type: type[BaseException],
        exc: BaseException | None,
        tb: TracebackType | None,
        where: str,
    ) -> None:
        log.error("Uncaught exception in %s", where, exc_info=exc if exc is not None else True)
        self.crashed.emit(report_text(exc_type, exc, tb, where))

    def _sys_hook(
        self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            self._previous_sys(exc_type, exc, tb)
            return
        self.handle(exc_type, exc, tb, "the main thread")
        if self._previous_sys not in (None, sys.__excepthook__):
            self._previous_sys(exc_type, exc, tb)  # a test harness's hook still sees it

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        self.handle(args.exc_type, args.exc_value, args.exc_traceback, f"thread {name}")
