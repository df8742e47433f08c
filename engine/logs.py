"""Corral's log file and native crash reports: one `logging` set-up for the app, the engine's
command line, the local server and MCP, all writing to the same folder.

The log goes to the platform's log folder (`default_log_dir()`; `$CORRAL_LOG_DIR` or the
`folder` argument instead, for tests), in `corral.log` rotated at 2 MB with five old
files kept. Its level is the user's (Preferences → Log: warnings, info or debug); what a
user or a model wrote is logged only at debug. Every record passes the MCP redaction
(`engine.mcp.redaction.redact`) on its way to the file, with the secrets known at run time
(the server's API key, MCP env and header values: `remember_secrets`) masked as well, so no
secret reaches the file whatever a message or a traceback contains.

Uncaught exceptions in the window are caught by app.crash_reports (the Qt side); this module
imports no Qt, so `python -m engine …`, `--self-test` and `--diagnostics` log to the same
folder without it.

A native crash (a segfault in Qt or MLX) kills the process before any hook runs:
`catch_native_crashes` points `faulthandler` at `native-crash.log` in the log folder, and at
the next start the report it left is set aside (`native-crash-<time>.log`) and offered.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

import platformdirs

from engine.mcp.redaction import redact

LOG_FILE = "corral.log"
NATIVE_CRASH_FILE = "native-crash.log"
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 5
# The level names Preferences stores, and what each writes.
LEVELS = {"warnings": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
DEFAULT_LEVEL = "warnings"
# The loggers written to the file: the app's modules, the engine's, the local server
# ("corral.server"), MCP and the HTTP client it uses.
LOGGERS = ("app", "engine", "corral", "mcp", "httpx", "httpcore")
_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"

log = logging.getLogger("engine.logs")


def default_log_dir() -> Path:
    """The platform's log folder: ~/Library/Logs/Corral on a Mac, the XDG state folder
    ($XDG_STATE_HOME/Corral/log) on Linux."""
    return Path(platformdirs.user_log_dir("Corral", "Corral"))


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


_native: Any = None  # the open file faulthandler writes into
_native_was_enabled = False  # faulthandler's state before (a test runner's own)


def catch_native_crashes(folder: Path | None = None) -> tuple[Path, str] | None:
    """Write native crashes (every thread's Python stack) to NATIVE_CRASH_FILE in the log
    folder from now on. Returns (where it was kept, its text) for a report the last run
    left, set aside under a name of its own so it is offered once; None when it left none."""
    global _native, _native_was_enabled
    directory = log_dir(folder)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / NATIVE_CRASH_FILE
    previous: tuple[Path, str] | None = None
    if path.is_file() and path.stat().st_size > 0:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
        kept = directory / f"native-crash-{stamp}.log"
        path.replace(kept)
        previous = (kept, redact_text(kept.read_text(encoding="utf-8", errors="replace")))
    if _native is None:
        _native_was_enabled = faulthandler.is_enabled()
    else:
        _native.close()
    _native = path.open("w", encoding="utf-8")
    faulthandler.enable(_native, all_threads=True)
    return previous


def stop_catching_native_crashes() -> None:
    """Close the native crash file (an empty one means no crash happened)."""
    global _native
    if _native is None:
        return
    faulthandler.disable()
    _native.close()
    _native = None
    if _native_was_enabled and sys.__stderr__ is not None:
        try:
            faulthandler.enable(sys.__stderr__)
        except (ValueError, OSError):  # no usable stderr
            pass


def close_logging() -> None:
    """Stop writing the file (at exit, and after a test)."""
    global _handler
    stop_catching_native_crashes()
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
