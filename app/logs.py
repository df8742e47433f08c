"""Corral's log file and crash reports: one `logging` set-up for the app, the engine, the
local server and MCP, and the hooks that catch an exception nobody caught.

The log goes to the platform's log folder (`app.paths.default_log_dir()`; `$CORRAL_LOG_DIR`
or the `folder` argument instead, for tests), in `corral.log` rotated at 2 MB with five old
files kept. Its level is the user's (Preferences → Log: warnings, info or debug); what a
user or a model wrote is logged only at debug. Every record passes the MCP redaction
(`engine.mcp.redaction.redact`) on its way to the file, with the secrets known at run time
(the server's API key, MCP env and header values: `remember_secrets`) masked as well, so no
secret reaches the file whatever a message or a traceback contains.

`CrashReporter` is sys.excepthook and threading.excepthook: an uncaught exception on any
thread is logged with its traceback and its report (redacted) is emitted as `crashed`,
which reaches the GUI thread as a queued signal; the window shows it (app.views.crash_dialog).
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import threading
import traceback
from collections.abc import Iterable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from types import TracebackType
from typing import Any

from PySide6.QtCore import QObject, Signal

from app import __version__
from app.paths import default_log_dir
from engine.mcp.redaction import redact

LOG_FILE = "corral.log"
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 5
# The level names Preferences stores, and what each writes.
LEVELS = {"warnings": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
DEFAULT_LEVEL = "warnings"
# The loggers written to the file: the app's modules, the engine's, the local server
# ("corral.server"), MCP and the HTTP client it uses.
LOGGERS = ("app", "engine", "corral", "mcp", "httpx", "httpcore")
_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"

log = logging.getLogger("app.logs")


def log_dir(folder: Path | None = None) -> Path:
    """Where the log is written: `folder`, else $CORRAL_LOG_DIR, else the platform's."""
    if folder is not None:
        return folder
    override = os.environ.get("CORRAL_LOG_DIR")
    return Path(override) if override else default_log_dir()


class SecretFilter(logging.Filter):
    """Redacts a record's message and traceback: the known secrets, and anything that looks
    like one. Installed on the file handler, so every logger's records pass it."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def remember(self, values: Iterable[str | None]) -> None:
        with self._lock:
            self._secrets.update(v for v in values if v)

    def redact(self, text: str) -> str:
        with self._lock:
            secrets = list(self._secrets)
        return redact(text, secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format: logging reports it itself
            return True
        record.msg, record.args = self.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


_FILTER = SecretFilter()
_handler: RotatingFileHandler | None = None


def remember_secrets(values: Iterable[str | None]) -> None:
    """Secrets known at run time (an API key, MCP env and header values): never written."""
    _FILTER.remember(values)


def redact_text(text: str) -> str:
    """`text` as the log would write it (a crash report shown or copied)."""
    return _FILTER.redact(text)


def setup_logging(
    level: str = DEFAULT_LEVEL,
    folder: Path | None = None,
    max_bytes: int = MAX_BYTES,
    backups: int = BACKUPS,
) -> Path:
    """Write the app's, engine's, server's and MCP's logs to `corral.log` in the log folder
    (a second call replaces the first's file). Returns the file's path."""
    global _handler
    directory = log_dir(folder)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOG_FILE
    handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_FILTER)
    old, _handler = _handler, handler
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if old is not None:
            logger.removeHandler(old)
        logger.addHandler(handler)
    if old is not None:
        old.close()
    set_level(level)
    return path


def close_logging() -> None:
    """Stop writing the file (at exit, and after a test)."""
    global _handler
    if _handler is None:
        return
    for name in LOGGERS:
        logging.getLogger(name).removeHandler(_handler)
    _handler.close()
    _handler = None


def set_level(name: str) -> None:
    """The user's level ("warnings", "info", "debug"); an unknown name means warnings."""
    level = LEVELS.get(name, LEVELS[DEFAULT_LEVEL])
    for logger_name in LOGGERS:
        if logger_name == "mcp" and logging.getLogger("mcp").level > logging.WARNING:
            continue  # the MCP SDK's own chatter stays silenced (engine.mcp.hub)
        logging.getLogger(logger_name).setLevel(level)
    if _handler is not None:
        _handler.setLevel(level)


def log_file() -> Path | None:
    """The file being written, or None before `setup_logging`."""
    return Path(_handler.baseFilename) if _handler is not None else None


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
