"""One Corral per data folder: a second launch hands its files to the running window.

Two apps writing one conversation database would each keep their own view of it (and the
second met "database is locked" on start). The first app takes an exclusive lock on
`corral.lock` in its data folder and listens on a user-only Unix socket there; a later launch
with the same folder finds the lock taken, sends the files it was given over the socket,
and exits, and the running window comes forward and opens them. Launches with other data
folders (tests, a second profile) run side by side. Only the standard library is used
(the bundle leaves out QtNetwork); where it lacks `fcntl` or Unix sockets every launch
runs, and the database's busy timeout keeps two apps from failing on each other.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import IO

from PySide6.QtCore import QObject, Signal, Slot

LOCK_NAME = "corral.lock"
SOCKET_NAME = "corral.sock"
_TIMEOUT_S = 2.0


def socket_path(data_dir: str | Path) -> Path:
    """The running app's socket: in the data folder itself, which only its user writes
    (a shared temporary folder would let another user stand in for it)."""
    return Path(data_dir).expanduser().resolve() / SOCKET_NAME


def _lock(data_dir: Path) -> IO[str] | None:
    """The held lock file, or None when another app holds it."""
    import fcntl

    data_dir.mkdir(parents=True, exist_ok=True)
    handle = open(data_dir / LOCK_NAME, "a+")  # noqa: SIM115 (held for the app's lifetime)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    handle.truncate(0)
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def forward_to_running(data_dir: str | Path, files: list[str]) -> bool:
    """Send `files` to the app running on `data_dir`; False if there is none to reach."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(_TIMEOUT_S)
            client.connect(str(socket_path(data_dir)))
            client.sendall(json.dumps({"files": files}).encode() + b"\n")
        return True
    except OSError:
        return False


class SingleInstance(QObject):
    """This app's claim on a data folder; `activated` carries each later launch's files."""

    activated = Signal(list)
    _received = Signal(list)  # from the socket thread; re-emitted on the GUI thread

    def __init__(self, data_dir: str | Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._received.connect(self._deliver)  # queued: this object lives on the GUI thread
        self._lock: IO[str] | None = None
        self._server: socket.socket | None = None
        self._path = socket_path(data_dir)
        self.claimed = True  # nothing to claim with on this platform: run
        try:
            self._lock = _lock(Path(data_dir))
        except (ImportError, OSError):
            return
        if self._lock is None:
            self.claimed = False
            return
        try:
            self._listen()
        except OSError:
            self._server = None  # the lock still holds; later launches just cannot reach us

    def _listen(self) -> None:
        self._path.unlink(missing_ok=True)  # ours (we hold the lock): left by a crash
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o077)  # only this user may connect
        try:
            server.bind(str(self._path))
        finally:
            os.umask(old_mask)
        server.listen(4)
        self._server = server
        threading.Thread(target=self._serve, name="corral-instance", daemon=True).start()

    def _serve(self) -> None:
        server = self._server
        while server is not None:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed
            with conn:
                conn.settimeout(_TIMEOUT_S)
                data = b""
                try:
                    while b"\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    files = json.loads(data.split(b"\n")[0] or b"{}").get("files", [])
                except (OSError, ValueError, AttributeError):
                    files = []
            self._received.emit([str(f) for f in files if isinstance(f, str)][:16])

    @Slot(list)
    def _deliver(self, files: list[str]) -> None:
        self.activated.emit(files)

    def close(self) -> None:
        """Stop listening and release the folder."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            self._path.unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None
