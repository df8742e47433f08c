"""The local server (OpenAI- and Anthropic-compatible) seen from Qt: start, stop, and its
activity as signals.

The server runs on its own thread over the app's Engine (one model, one prompt cache for
the window and the server). Starting it imports the HTTP stack and binds the port, so it
happens off the GUI thread; every callback from the server or engine threads reaches the
GUI as a queued signal.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.words import error_sentence
from engine.logs import remember_secrets

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080


class ServerJob(QObject):
    """Owns at most one running server. `start` replaces a running one."""

    started = Signal(str)  # the base URL
    stopped = Signal()
    failed = Signal(str)  # why it could not start, for the user
    requestLogged = Signal(object)  # engine.server.RequestRecord
    activeChanged = Signal(int)  # requests waiting or running

    def __init__(
        self,
        engine: Callable[[], Any],
        parent: QObject | None = None,
        responses_db: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine = engine
        self._responses_db = responses_db  # where stored Responses go (None: the default)
        self._server: Any = None  # engine.server.HTTPServer
        self._lock = threading.Lock()
        self.url: str | None = None
        self.active = 0
        self.activeChanged.connect(self._set_active)
        self.started.connect(self._set_url)

    @property
    def running(self) -> bool:
        return self.url is not None

    def start(self, port: int, api_key: str | None = None, any_model: bool = False) -> None:
        """Serve on 127.0.0.1:`port`; `started` or `failed` follows. `any_model`: answer
        requests naming any model with the loaded one."""
        remember_secrets([api_key])  # before anything could log it
        log.info(
            "local server starting on 127.0.0.1:%d (%s)",
            port,
            "API key required" if api_key else "no API key",
        )
        engine = self._engine()
        threading.Thread(
            target=self._start, args=(engine, port, api_key or None, any_model), daemon=True
        ).start()

    def _start(self, engine: Any, port: int, api_key: str | None, any_model: bool) -> None:
        try:
            from engine.server import HTTPServer, ServerActivity, ServerConfig

            activity = ServerActivity(
                on_record=self.requestLogged.emit, on_active=self.activeChanged.emit
            )
            config = ServerConfig(
                port=port,
                api_key=api_key,
                serve_any_model_name=any_model,
                responses_db=self._responses_db,
            )
            log.debug("local server settings: %r", config)
            server = HTTPServer(engine, config, activity)
            with self._lock:
                self._stop_locked()
                url = server.start()
                self._server = server
        except Exception as exc:  # shown to the user as a message
            log.warning("local server did not start: %s", exc)
            self.failed.emit(error_sentence(exc))
            return
        self.started.emit(url)

    def stop(self) -> None:
        """Stop serving (open streams are cancelled; the window's replies are untouched)."""
        with self._lock:
            was_running = self._stop_locked()
        self.url = None
        if was_running:
            self.stopped.emit()

    def _stop_locked(self) -> bool:
        server, self._server = self._server, None
        if server is None:
            return False
        server.stop()
        return True

    def _set_url(self, url: str) -> None:
        self.url = url

    def _set_active(self, count: int) -> None:
        self.active = count
