"""`DistributedEngine`: the EngineAPI (`engine.api`) in Corral's process, served by rank 0.

The app, `serve` and `chat` use it exactly like `Engine` (load, submit, cancel, snapshot,
constraint checks); it starts the ranks (`launch`), hands each call to rank 0 over the local
connection (`protocol`) and passes rank 0's events back to the request handles. It is never
inside a collective itself, so it can always give an answer: a watchdog ends every reply
when a rank exits, stops sending its heartbeat (frozen, or its network dropped), or when the
reply makes no progress for `timeout_s`; the error names the rank and its host, the group is
stopped, and `failure` says why (the app then offers to go on with this machine alone).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any, TypeVar

from engine.distributed.hostfile import Hostfile, read_hostfile
from engine.distributed.info import GroupInfo
from engine.distributed.launch import GroupProcess, rank_python
from engine.distributed.protocol import (
    FAMILY,
    DistributedError,
    rebuild_error,
    strip_request,
)
from engine.errors import EngineClosedError
from engine.runtime.handle import EventFn, RequestHandle
from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    EngineSnapshot,
    Finished,
    LoadProgress,
    MemoryPlan,
    ModelInfo,
    ValidationReport,
)

T = TypeVar("T")

WATCH_S = 0.25
DIAGNOSE_WAIT_S = 3.0  # after a collective failed on rank 0: time for mlx.launch's verdict
CLOSE_WAIT_S = 30.0


@dataclass(frozen=True)
class DistributedConfig:
    """How to run a group: the hostfile and the watchdog's limits.

    Attributes:
        hostfile: the hostfile's path (or a checked Hostfile).
        shard: "auto" (tensor parallel where the model allows, else pipeline), "tensor" or
            "pipeline".
        timeout_s: while replies wait, rank 0 saying nothing this long ends them (a hang in
            a collective: a frozen link, or rank 0 itself); a check waits this long too.
        stall_s: a rank whose heartbeat is this late has stopped (frozen or cut off). Rank 0
            runs here: its end is seen at once, and a hang of it by `timeout_s`.
        start_timeout_s: how long the ranks may take to start and connect.
        load_timeout_s: how long loading a model may take (weights may be downloaded).
    """

    hostfile: str | Hostfile
    shard: str = "auto"
    timeout_s: float = 60.0
    stall_s: float = 20.0
    start_timeout_s: float = 120.0
    load_timeout_s: float = 1800.0


@dataclass
class _Call:
    future: Future[Any]
    kind: str
    deadline: float
    on_progress: Callable[[LoadProgress], None] | None = None


class RemoteRequestHandle(RequestHandle):
    """A request served by rank 0: cancelling it also tells rank 0."""

    def __init__(
        self,
        request_id: int,
        request: ChatRequest,
        on_event: EventFn | None,
        send_cancel: Callable[[int], None],
    ) -> None:
        super().__init__(request_id, request, on_event)
        self._send_cancel = send_cancel
        self._emit_lock = threading.Lock()
        self._finished = False

    def emit(self, event: ChatEvent) -> None:
        # Rank 0's events and the watchdog's verdict may race: the first Finished wins.
        with self._emit_lock:
            if self._finished:
                return
            self._finished = isinstance(event, Finished)
            super().emit(event)

    def cancel(self) -> None:
        if not self.cancelled:
            super().cancel()
            self._send_cancel(self.id)


def failed_result(message: str) -> ChatResult:
    """The result of a reply the group could not finish."""
    return ChatResult.failed(message, kind="unavailable")


class DistributedEngine:
    """The EngineAPI (engine.api) for a model sharded across the machines of a hostfile.

    Nothing runs here but the threads that talk to rank 0 and watch the group: no engine
    thread, no prompt cache (rank 0 has them)."""

    def __init__(self, config: DistributedConfig, *, kv_budget_bytes: int | None = None) -> None:
        if config.shard not in ("auto", "tensor", "pipeline"):
            raise ValueError(f"shard must be auto, tensor or pipeline, not {config.shard!r}")
        if min(config.timeout_s, config.stall_s, config.start_timeout_s) <= 0:
            raise ValueError("the distributed timeouts must be positive")
        hf = config.hostfile
        self.hostfile = hf if isinstance(hf, Hostfile) else read_hostfile(hf)  # bad: raise now
        rank_python(self.hostfile)  # a packaged app needs the hostfile to name a Python
        self.config = config
        self.hosts = [self.hostfile.host_name(r) for r in range(self.hostfile.size)]
        self._kv_setting = kv_budget_bytes
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._outbox: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._calls: dict[int, _Call] = {}
        self._handles: dict[int, RemoteRequestHandle] = {}
        self._failure: str | None = None
        self._remote = EngineSnapshot()
        self._conn: Connection | None = None
        self._connected = threading.Event()
        self._progress_at = time.monotonic()  # the last word from rank 0 (or idle's end)
        self._closing = False
        self._shut_lock = threading.Lock()
        self._shut_done = False
        self.group_info: GroupInfo | None = None
        self.rank_pids: list[int] = []
        self._folder = Path(tempfile.mkdtemp(prefix="corral-dist-"))
        key = os.urandom(32)
        self._listener = Listener(str(self._folder / "rank0.sock"), family=FAMILY, authkey=key)
        self._group = GroupProcess(self.hostfile, str(self._folder / "rank0.sock"), key)
        self._started = time.monotonic()
        threading.Thread(target=self._run, name="corral-dist-send", daemon=True).start()
        threading.Thread(target=self._watch, name="corral-dist-watch", daemon=True).start()

    # ---- the EngineAPI ----

    @property
    def failure(self) -> str | None:
        """Why the group stopped (a sentence naming the rank and host), or None."""
        return self._failure

    @property
    def snapshot(self) -> EngineSnapshot:
        return self._remote

    def load_model(
        self, spec: str, on_progress: Callable[[LoadProgress], None] | None = None
    ) -> Future[ModelInfo]:
        return self._call("load", (spec,), self.config.load_timeout_s, on_progress)

    def set_kv_budget(self, kv_budget_bytes: int | None) -> Future[MemoryPlan | None]:
        self._kv_setting = kv_budget_bytes
        return self._call("kv_budget", (kv_budget_bytes,), self.config.timeout_s)

    def submit(self, request: ChatRequest, on_event: EventFn | None = None) -> RequestHandle:
        if self._closing:
            raise EngineClosedError("the engine has been closed")
        handle = RemoteRequestHandle(next(self._ids), request, on_event, self._send_cancel)
        with self._lock:
            failure = self._failure
            if failure is None:
                if not self._handles:  # the group was idle: the wait starts now
                    self._progress_at = time.monotonic()
                self._handles[handle.id] = handle
        if failure is not None:
            handle.emit(Finished(failed_result(failure)))
            return handle
        plain, grammar = strip_request(request)
        self._outbox.put(("submit", handle.id, plain, grammar))
        return handle

    def submit_many(
        self,
        requests: Sequence[ChatRequest],
        on_event: Callable[[int, ChatEvent], None] | None = None,
    ) -> list[RequestHandle]:
        """Each request on its own: rank 0 decodes the group's replies one at a time (the
        other ranks mirror one KV state per request, not a batch)."""
        return [
            self.submit(request, functools.partial(on_event, i) if on_event else None)
            for i, request in enumerate(requests)
        ]

    def chat(self, request: ChatRequest) -> ChatResult:
        return self.submit(request).result()

    def set_max_rows(self, max_rows: int) -> None:
        """Nothing to change: a sharded model decodes one reply at a time."""

    def set_speculative(self, on: bool) -> None:
        """Nothing to change: rank 0 decodes as the group was started."""

    def set_kv_bits(self, kv_bits: int | None) -> Future[None]:
        """A group keeps its KV caches at the model's own precision: anything else is
        refused (the future raises ValueError); None is accepted."""
        future: Future[None] = Future()
        if kv_bits is None:
            future.set_result(None)
        else:
            future.set_exception(
                ValueError("a model split across machines keeps its KV cache at full precision")
            )
        return future

    def load_draft_model(self, spec: str | None) -> Future[ModelInfo | None]:
        """A group takes no draft model (its replies draft by prompt lookup, if at all)."""
        future: Future[ModelInfo | None] = Future()
        if spec is None:
            future.set_result(None)
        else:
            future.set_exception(ValueError("a distributed group takes no draft model"))
        return future

    def check_constraint(self, spec: ConstraintSpec, model: str | None = None) -> ValidationReport:
        """Checked by rank 0 with the loaded model's tokenizer (or here, without one, when no
        model is loaded or the group has stopped). The group serves one model, whatever
        `model` names."""
        from engine.constraints.compiled import CompiledGrammar
        from engine.constraints.validate import validate_constraint

        if self._remote.model is None or self._failure is not None:
            return validate_constraint(spec)
        plain = dataclasses.replace(spec, compiled=None)
        report, grammar = self._call("check", (plain,), self.config.timeout_s).result()
        if grammar is not None:  # rank 0 keeps it compiled; requests carry the text there
            report.spec = dataclasses.replace(report.spec, compiled=CompiledGrammar(grammar))
        assert isinstance(report, ValidationReport)
        return report

    def probe_communication(self, steps: int = 50) -> Future[tuple[float, int]]:
        """(ms of communication per decode step, collectives per step), measured on the group
        by replaying one step's collectives (the benchmark's `dist_comm_ms_per_token`)."""
        return self._call("probe", (steps,), self.config.timeout_s + steps)

    def run(self, fn: Callable[[Any], T], model: str | None = None) -> Future[T]:
        future: Future[T] = Future()
        future.set_exception(
            DistributedError("the model lives in rank 0's process: it cannot run code here")
        )
        return future

    def close(self) -> None:
        """Stop the ranks (after queued work) and the threads here."""
        if self._closing:
            return
        self._closing = True
        if self._connected.is_set() and self._failure is None:
            try:
                self._call("close", (), CLOSE_WAIT_S, force=True).result(CLOSE_WAIT_S)
            except Exception:  # stopped below either way
                pass
            self._group.wait(CLOSE_WAIT_S / 3)
        with self._lock:  # whatever rank 0 did not finish ends now, not never
            handles, self._handles = list(self._handles.values()), {}
            calls, self._calls = list(self._calls.values()), {}
        for handle in handles:
            handle.emit(Finished(failed_result("the engine was closed")))
        for call in calls:
            if not call.future.done():
                call.future.set_exception(EngineClosedError("the engine was closed"))
        self._outbox.put(None)
        self._shut()

    # ---- calls and messages ----

    def _call(
        self,
        kind: str,
        args: tuple[Any, ...],
        timeout_s: float,
        on_progress: Callable[[LoadProgress], None] | None = None,
        *,
        force: bool = False,
    ) -> Future[Any]:
        future: Future[Any] = Future()
        if self._closing and not force:
            future.set_exception(EngineClosedError("the engine has been closed"))
            return future
        call = next(self._ids)
        with self._lock:
            failure = self._failure
            if failure is None:
                deadline = time.monotonic() + timeout_s
                self._calls[call] = _Call(future, kind, deadline, on_progress)
        if failure is not None:
            future.set_exception(DistributedError(failure))
            return future
        self._outbox.put((kind, call, *args))
        return future

    def _send_cancel(self, request_id: int) -> None:
        if self._failure is None:
            self._outbox.put(("cancel", request_id))

    def _run(self) -> None:
        """Start the group, then send queued messages in order (this thread alone sends)."""
        try:
            self._group.start()
            conn = self._listener.accept()
        except Exception as exc:
            if not self._closing:
                self._fail(self._diagnose(f"the ranks did not start: {exc}"))
            return
        self._conn = conn
        settings = {"shard": self.config.shard, "kv_budget_bytes": self._kv_setting}
        try:
            conn.send(("hosts", self.hosts, settings))
        except OSError:
            return  # the reader reports it
        self._connected.set()
        reader = threading.Thread(target=self._read, args=(conn,), name="corral-dist-read")
        reader.daemon = True
        reader.start()
        while (message := self._outbox.get()) is not None:
            try:
                conn.send(message)
            except (OSError, ValueError):
                break  # the reader and the watchdog report why

    def _read(self, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                if not self._closing:
                    self._fail(self._diagnose("rank 0 closed its connection"))
                return
            self._progress_at = time.monotonic()
            self._receive(message)

    def _receive(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "event":
            self._event(message[1], message[2])
        elif kind == "snapshot":
            self._remote = message[1]
        elif kind == "group":
            self.group_info = message[1]
        elif kind == "ready":
            self.rank_pids = list(message[1])
        elif kind == "progress":
            call = self._calls.get(message[1])
            if call is not None and call.on_progress is not None:
                call.on_progress(message[2])
        elif kind in ("done", "failed"):
            if kind == "failed" and _collective_failed(message[3]):
                self._group_down(message[3])  # fails this call too, naming the cause
                return
            with self._lock:
                found = self._calls.pop(message[1], None)
            if found is None:
                return
            if found.future.done():
                return
            if kind == "done":
                found.future.set_result(message[2])
            else:
                found.future.set_exception(rebuild_error(message[2], message[3]))

    def _event(self, request_id: int, event: Any) -> None:
        with self._lock:
            handle = self._handles.get(request_id)
        if handle is None:
            return
        if isinstance(event, Finished):
            error = event.result.error_line or ""
            if _collective_failed(error):
                self._group_down(error)  # finishes this handle too, naming the cause
                return
            with self._lock:
                self._handles.pop(request_id, None)
        handle.emit(event)

    # ---- failure ----

    def _group_down(self, error: str) -> None:
        """Rank 0 saw a collective fail: wait a moment for mlx.launch to say which rank
        ended, then fail the group with that."""
        waited = time.monotonic() + DIAGNOSE_WAIT_S
        while self._group.first_exit() is None and time.monotonic() < waited:
            time.sleep(WATCH_S)
        self._fail(self._diagnose(f"rank 0 ({self.hosts[0]}): {error}"))

    def _diagnose(self, fallback: str) -> str:
        """A sentence naming the rank (and host) that took the group down, if it can tell."""
        group, now = self._group, time.monotonic()
        prefix = "The distributed group stopped: "
        ended = group.first_exit()
        if ended is not None:
            tail = [line for line in group.tail() if line.strip()]
            why = f" (last words: {tail[-1][:300]})" if tail else ""
            host = self.hosts[ended.rank] if ended.rank < len(self.hosts) else "?"
            return f"{prefix}rank {ended.rank} ({host}) {ended.describe()}{why}."
        stale = [
            (rank, now - seen)
            for rank, (seen, _) in sorted(group.heartbeats.items())
            if now - seen > self.config.stall_s
        ]
        if stale:
            rank, late = stale[0]
            return (
                f"{prefix}rank {rank} ({self.hosts[rank]}) stopped answering: nothing from it "
                f"for {late:.0f} s (the machine is frozen or its network dropped)."
            )
        return prefix + fallback

    def _fail(self, message: str) -> None:
        """Take the group down: every pending reply and call ends with `message`."""
        with self._lock:
            if self._failure is not None:
                return
            self._failure = message
            handles, self._handles = list(self._handles.values()), {}
            calls, self._calls = list(self._calls.values()), {}
        for handle in handles:
            handle.emit(Finished(failed_result(message)))
        for call in calls:
            call.future.set_exception(DistributedError(message))
        self._outbox.put(None)
        threading.Thread(target=self._shut, name="corral-dist-stop", daemon=True).start()

    def _shut(self) -> None:
        # A failure shuts down from its own thread while close() may shut down too: once only.
        with self._shut_lock:
            if self._shut_done:
                return
            self._shut_done = True
        self._group.stop()
        try:
            self._listener.close()
        except OSError:  # its socket file went with the folder already
            pass
        if self._conn is not None:
            self._conn.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _watch(self) -> None:
        """The watchdog: ends the group when a rank is gone, silent, or a reply is stuck."""
        cfg = self.config
        while not self._closing and self._failure is None:
            time.sleep(WATCH_S)
            now = time.monotonic()
            group = self._group
            if self._closing or self._failure is not None:
                return
            if group.first_exit() is not None or (group.proc is not None and not group.running()):
                self._fail(self._diagnose("mlx.launch ended"))
            elif not self._connected.is_set():
                if now - self._started > cfg.start_timeout_s:
                    late = f"rank 0 did not connect in {cfg.start_timeout_s:.0f} s"
                    self._fail(self._diagnose(late))
            elif any(now - seen > cfg.stall_s for seen, _ in group.heartbeats.values()):
                self._fail(self._diagnose("a rank stopped answering"))
            else:
                self._check_deadlines(now)

    def _check_deadlines(self, now: float) -> None:
        with self._lock:
            # Replies wait in rank 0's queue behind each other: the group is stuck only when
            # none of them has moved for timeout_s (a model load has its own deadline).
            replies = bool(self._handles) and not any(
                c.kind == "load" for c in self._calls.values()
            )
            stuck = replies and now - self._progress_at > self.config.timeout_s
            late = [c for c in self._calls.values() if now > c.deadline]
        if stuck:
            ranks = ", ".join(f"rank {r} ({h})" for r, h in enumerate(self.hosts))
            self._fail(
                self._diagnose(
                    f"replies made no progress for {self.config.timeout_s:.0f} s: one of "
                    f"{ranks} or the network between them is stuck"
                )
            )
        elif late:
            self._fail(self._diagnose(f"rank 0 did not answer a {late[0].kind} request in time"))


def _collective_failed(error: str) -> bool:
    """Whether an error from rank 0 is MLX's backend reporting a lost peer."""
    return "[ring]" in error or "[jaccl]" in error
