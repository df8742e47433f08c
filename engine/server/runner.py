"""Run the server with uvicorn: on a background thread (the app, tests, benchmarks) or in
the foreground until Ctrl+C (`python -m engine serve`).

The listening socket is bound here, before uvicorn starts, so a busy port is reported as a
clear error and `port=0` yields the port actually chosen.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import threading
from collections.abc import Callable

import uvicorn

from engine.api import EngineAPI
from engine.embeddings import EmbeddingSource
from engine.server.activity import ServerActivity
from engine.server.app import create_app
from engine.server.config import ServerConfig, ServerConfigError

SHUTDOWN_GRACE_S = 3


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket on (host, port); ServerConfigError saying why if it cannot."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    if host == "localhost":
        host = "127.0.0.1"
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServerConfigError(
                f"port {port} on {host} is already in use; choose another port"
            ) from None
        raise ServerConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


class HTTPServer:
    """The OpenAI-compatible server over `engine`. `start()` serves on a thread;
    `serve_forever()` serves on the calling thread until Ctrl+C or `stop()`."""

    def __init__(
        self,
        engine: EngineAPI,
        config: ServerConfig,
        activity: ServerActivity | None = None,
        embeddings: EmbeddingSource | None = None,
    ) -> None:
        """`embeddings`: the embedding and reranker models /v1/embeddings and /v1/rerank
        serve (none: those endpoints answer that the server has none)."""
        config.check()
        self.engine = engine
        self.config = config
        self.activity = activity or ServerActivity()
        self.app = create_app(engine, config, self.activity, embeddings)
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """The base URL (without /v1)."""
        host = self.config.host
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{shown}:{self.port}"

    def _prepare(self) -> socket.socket:
        sock = bind_socket(self.config.host, self.config.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            server_header=False,
        )
        self._uvicorn = uvicorn.Server(config)
        return sock

    async def _serve(self, sock: socket.socket, on_ready: Callable[[str], None] | None) -> None:
        assert self._uvicorn is not None
        task = asyncio.create_task(self._uvicorn.serve(sockets=[sock]))
        while not self._uvicorn.started and not task.done():
            await asyncio.sleep(0.01)
        if self._uvicorn.started:
            self._ready.set()
            if on_ready is not None:
                on_ready(self.url)
        await task

    def start(self, timeout: float = 30.0) -> str:
        """Serve on a background thread; return the URL once it accepts connections."""
        sock = self._prepare()

        def run() -> None:
            try:
                asyncio.run(self._serve(sock, None))
            except BaseException as exc:  # reported by start() or stop()
                self._failure = exc
            finally:
                sock.close()
                self._ready.set()

        self._thread = threading.Thread(target=run, name="corral-server", daemon=True)
        self._thread.start()
        self._ready.wait(timeout)
        if self._failure is not None or not (self._uvicorn and self._uvicorn.started):
            raise ServerConfigError(f"the server did not start: {self._failure or 'timed out'}")
        return self.url

    def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve on this thread until Ctrl+C (SIGINT) or SIGTERM, then stop cleanly."""
        sock = self._prepare()
        try:
            with contextlib.suppress(KeyboardInterrupt):
                # uvicorn re-raises the signal it caught once it has shut down gracefully
                asyncio.run(self._serve(sock, on_ready))
        finally:
            sock.close()
            self.app.state.batches.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving: open streams are cancelled, the engine keeps running."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.app.state.batches.close()  # running batches go on under the next server
