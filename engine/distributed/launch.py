"""Start the ranks with `mlx.launch` and keep watching what it and they report.

`mlx.launch` runs `python -m engine.distributed.rank` on every host of the hostfile (locally
for `127.0.0.1`, over ssh otherwise) and relays their output. From it this module keeps:
each follower's heartbeat (its last message done, and when it said so), the exit of any rank
(`mlx.launch` prints "Node with rank R exited with code C"), and the last lines the ranks
wrote, for error messages. It runs in Corral's process, never inside a collective, so it can
always stop the group: `stop()` ends `mlx.launch`'s process group (the local ranks; remote
ranks end with their ssh session).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from engine.distributed.hostfile import LOCAL, Hostfile, HostfileError
from engine.distributed.protocol import HEARTBEAT, KEY_ENV

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EXITED = re.compile(r"Node with rank (\d+) exited with code (-?\d+)")
_KILLED = re.compile(r"Node with rank (\d+) was killed")
TAIL_LINES = 60
STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class RankExit:
    """A rank `mlx.launch` saw end: its exit code (negative: the signal that ended it)."""

    rank: int
    code: int | None  # None: killed by mlx.launch itself

    def describe(self) -> str:
        if self.code is None:
            return "was stopped"
        if self.code < 0:
            try:
                name = signal.Signals(-self.code).name
            except ValueError:
                name = f"signal {-self.code}"
            return f"was killed ({name})"
        return f"exited with status {self.code}"


def rank_python(hostfile: Hostfile) -> str:
    """The interpreter every rank runs: the hostfile's, else this one. A packaged app is no
    Python interpreter, so there the hostfile must name one (with Corral installed)."""
    if hostfile.python:
        return hostfile.python
    if getattr(sys, "frozen", False):
        raise HostfileError(
            f"{hostfile.path}: the packaged app cannot run the ranks itself: add "
            '"python": "/path/to/python" (a Python with Corral installed, on every Mac)'
        )
    return sys.executable


def _launcher(python: str) -> list[str]:
    """How to run `mlx.launch` with `python`'s MLX."""
    script = Path(python).with_name("mlx.launch")
    if script.exists():
        return [python, str(script)]
    return [python, "-c", "import sys; from mlx._distributed_utils.launch import main; main()"]


class GroupProcess:
    """`mlx.launch` running the ranks of one hostfile, and what it has reported."""

    def __init__(self, hostfile: Hostfile, control: str, key: bytes) -> None:
        self.hostfile = hostfile
        self.control = control
        self._key = key
        self._folder = Path(tempfile.mkdtemp(prefix="corral-launch-"))
        self._lock = threading.Lock()
        self.heartbeats: dict[int, tuple[float, int]] = {}  # rank -> (monotonic time, seq)
        self.exits: dict[int, RankExit] = {}
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.verbose = bool(os.environ.get("CORRAL_DIST_VERBOSE"))

    def command(self) -> list[str]:
        """The `mlx.launch` command line (no secrets: the key travels in the environment)."""
        launch_file = self._folder / "hostfile.json"
        launch_file.write_text(json.dumps(self.hostfile.launch_json()))
        backend = self.hostfile.backend
        package_root = str(Path(__file__).resolve().parents[2])
        python = rank_python(self.hostfile)
        return [
            *_launcher(python),
            "--hostfile",
            str(launch_file),
            "--backend",
            backend,
            "--python",
            python,
            "--env",
            f"PYTHONPATH={package_root}",
            "--",
            "-m",
            "engine.distributed.rank",
            "--control",
            self.control,
            "--backend",
            "ring" if backend == "ring" else "jaccl",
        ]

    def start(self) -> None:
        """Start `mlx.launch` in its own process group, with readers for its output."""
        env = dict(os.environ)
        env[KEY_ENV] = self._key.hex()  # inherited by local ranks only, never on a command line
        local = sum(1 for r, h in enumerate(self.hostfile.hosts) if r == 0 or h.ssh == LOCAL)
        if local > 1 and "OPENBLAS_NUM_THREADS" not in env:
            # Ranks sharing this machine (tests, benchmarks) split its cores: OpenBLAS threads
            # that spin after each matmul would otherwise starve the rank whose turn it is.
            env["OPENBLAS_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // local))
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,  # kept open: mlx.launch spins on a closed stdin
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for stream, name in ((self.proc.stdout, "out"), (self.proc.stderr, "err")):
            threading.Thread(
                target=self._read, args=(stream,), name=f"corral-launch-{name}", daemon=True
            ).start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = _ANSI.sub("", raw.decode("utf-8", errors="replace")).strip("\r\n")
            self._note(line)

    def _note(self, line: str) -> None:
        with self._lock:
            if line.startswith(HEARTBEAT):
                parts = line.split()
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    self.heartbeats[int(parts[1])] = (time.monotonic(), int(parts[2]))
                return
            if m := _EXITED.search(line):
                rank = int(m.group(1))
                self.exits.setdefault(rank, RankExit(rank, int(m.group(2))))
            elif m := _KILLED.search(line):
                rank = int(m.group(1))
                self.exits.setdefault(rank, RankExit(rank, None))
            elif line.strip():
                self._tail.append(line)
        if self.verbose:
            print(f"[ranks] {line}", file=sys.stderr, flush=True)

    def tail(self, lines: int = 6) -> list[str]:
        """The last lines the ranks wrote (tracebacks, errors), oldest first."""
        with self._lock:
            return list(self._tail)[-lines:]

    def first_exit(self) -> RankExit | None:
        """The rank that ended first, preferring one that ended on its own (the cause) over
        those `mlx.launch` stopped because of it."""
        with self._lock:
            exits = list(self.exits.values())
        own = [e for e in exits if e.code is not None and e.code != -signal.SIGTERM]
        found = own or exits
        return found[0] if found else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """End `mlx.launch` and the ranks it started (its process group), then tidy up."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, STOP_WAIT_S)):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def wait(self, timeout: float) -> bool:
        """Wait for `mlx.launch` to end by itself; True if it did."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
