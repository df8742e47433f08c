"""Rank 0: the engine, serving Corral's process over the local connection.

Rank 0 runs an ordinary `Engine` whose loader splits the model across the group and hands the
engine a `LeaderModel` and a `MirroredPromptCacheTrie` (see `mirror`): prompts, the prefix
trie, constraint masks, sampling and stop conditions all run here, exactly as on one machine,
and the other ranks follow. This module only translates the connection's messages
(`protocol`) into engine calls and the engine's events back into messages.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

import mlx.core as mx

from engine.constraints.compiled import CompiledGrammar, compiled_of
from engine.distributed.channel import LeaderChannel, Op, encode_text
from engine.distributed.comm import replay_probe
from engine.distributed.info import GroupInfo
from engine.distributed.loading import load_on_rank
from engine.distributed.mirror import CacheMirror, LeaderModel, MirroredPromptCacheTrie
from engine.distributed.plan import group_plan
from engine.distributed.protocol import (
    error_kind,
    strip_report,
    with_grammar,
)
from engine.distributed.shard import SHARD_MODES, ShardMode
from engine.engine import Engine
from engine.library.load import LoadedModel, resolve_model
from engine.runtime.handle import RequestHandle
from engine.types import ChatEvent, ChatRequest, ConstraintSpec, Finished, LoadProgress

GRAMMARS_KEPT = 32
SHUTDOWN_WAIT_S = 30.0


class Leader:
    """Rank 0's side of the connection: one Engine, driven by Corral's messages."""

    def __init__(self, group: mx.distributed.Group, conn: Connection, backend: str) -> None:
        self.group = group
        self.conn = conn
        self.backend = backend
        self.channel = LeaderChannel(group)
        self.hosts = [f"rank {r}" for r in range(group.size())]
        self.mode: ShardMode = "auto"
        self.kv_setting: int | None = None
        self._send_lock = threading.Lock()
        self._handles: dict[int, RequestHandle] = {}
        self._grammars: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._shut_down = False
        self.engine: Engine | None = None

    # ---- the connection ----

    def send(self, message: tuple[Any, ...]) -> None:
        """Send one message to Corral's process (any thread)."""
        with self._send_lock:
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # Corral went away: the reader notices and stops
                pass

    def serve(self, pids: list[int]) -> int:
        """Answer Corral's messages until it says close or goes away; the exit status."""
        first = self.conn.recv()
        if first[0] != "hosts":
            raise RuntimeError(f"expected the hosts first, got {first[0]!r}")
        _, self.hosts, settings = first
        self.mode = settings.get("shard", "auto")
        self.kv_setting = settings.get("kv_budget_bytes")
        # One reply at a time: the other ranks mirror each request's own KV state by id,
        # which a batch (rows merged into one cache) would not keep.
        self.engine = Engine(kv_budget_bytes=self.kv_setting, loader=self._load, max_rows=1)
        self.send(("ready", pids))
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):  # Corral's process is gone: take the group down
                self._shutdown()
                return 1
            if message[0] == "close":
                self._shutdown()
                self.send(("done", message[1], None))
                return 0
            self._dispatch(message)

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        engine = self.engine
        assert engine is not None
        kind = message[0]
        if kind == "submit":
            _, request_id, request, grammar = message
            self._submit(engine, request_id, request, grammar)
        elif kind == "cancel":
            handle = self._handles.get(message[1])
            if handle is not None:
                handle.cancel()
        elif kind == "load":
            call, spec = message[1], message[2]

            def progress(p: LoadProgress) -> None:
                self.send(("progress", call, p))

            self._answer(call, engine.load_model(spec, progress), after=self._publish)
        elif kind == "kv_budget":
            self.kv_setting = message[2]
            self._answer(message[1], engine.set_kv_budget(message[2]), after=self._publish)
        elif kind == "check":
            call, spec = message[1], message[2]
            threading.Thread(
                target=self._check, args=(engine, call, spec), name="corral-check", daemon=True
            ).start()
        elif kind == "probe":
            call, steps = message[1], message[2]
            self._answer(call, engine.run(lambda loaded: self._probe(loaded, steps)))
        else:
            raise RuntimeError(f"unknown message {kind!r}")

    def _answer(
        self, call: int, future: Future[Any], after: Callable[[], None] | None = None
    ) -> None:
        def done(f: Future[Any]) -> None:
            exc = f.exception()
            if after is not None:
                after()
            if exc is None:
                self.send(("done", call, f.result()))
            else:
                self.send(("failed", call, error_kind(exc), str(exc) or type(exc).__name__))

        future.add_done_callback(done)

    def _publish(self) -> None:
        if self.engine is not None:
            self.send(("snapshot", self.engine.snapshot))

    def _submit(
        self, engine: Engine, request_id: int, request: ChatRequest, grammar: str | None
    ) -> None:
        if grammar is not None and request.constraint is not None:
            request.constraint = with_grammar(request.constraint, self._compiled(grammar))

        def on_event(event: ChatEvent) -> None:
            if isinstance(event, Finished):
                self._handles.pop(request_id, None)
                self._publish()  # before Finished, as the engine itself does
            self.send(("event", request_id, event))

        self._handles[request_id] = engine.submit(request, on_event)

    def _compiled(self, grammar: str) -> CompiledGrammar:
        found = self._grammars.pop(grammar, None) or CompiledGrammar(grammar)
        self._grammars[grammar] = found
        while len(self._grammars) > GRAMMARS_KEPT:
            self._grammars.popitem(last=False)
        return found

    def _check(self, engine: Engine, call: int, spec: ConstraintSpec) -> None:
        try:
            report = engine.check_constraint(spec)
        except Exception as exc:
            self.send(("failed", call, error_kind(exc), str(exc) or type(exc).__name__))
            return
        grammar = None
        compiled = compiled_of(report.spec)
        if compiled is not None:  # requests with this grammar find it compiled
            grammar = compiled.grammar
            self._grammars[grammar] = compiled
            self._compiled(grammar)
        self.send(("done", call, (strip_report(report), grammar)))

    # ---- engine thread ----

    def _load(self, spec: str, report: Callable[[str, float], None] | None) -> LoadedModel:
        resolve_model(spec, report)  # here first: a GGUF import happens once per machine
        self.channel.flush()
        budget_mib = -1 if self.kv_setting is None else self.kv_setting >> 20
        self.channel.send(Op.LOAD, (SHARD_MODES.index(self.mode), budget_mib), encode_text(spec))
        done = load_on_rank(spec, self.group, self.mode, self.hosts, report)
        figures, hosts = done.figures, self.hosts
        mirror = CacheMirror(self.channel)

        def plan(setting: int | None) -> Any:
            own, ranks = group_plan(figures, hosts, setting)
            self.send(("group", GroupInfo(self.backend, done.mode, tuple(ranks))))
            return own

        loaded = done.loaded
        return LoadedModel(
            LeaderModel(loaded.model, mirror),
            loaded.tokenizer,
            loaded.info,
            plan_memory=plan,
            make_prompt_cache=lambda budget: MirroredPromptCacheTrie(budget, mirror),
        )

    def _probe(self, loaded: LoadedModel | None, steps: int) -> tuple[float, int]:
        if loaded is None:
            raise ValueError("no model is loaded")
        model = loaded.model.sharded
        self.channel.flush()
        self.channel.send(Op.PROBE, (steps,))
        return replay_probe(self.group, model, model, steps)

    def _shutdown(self) -> None:
        """Tell the other ranks to stop (after everything already queued) and stop here."""
        if self._shut_down or self.engine is None:
            self._shut_down = True
            return
        self._shut_down = True

        def stop(_: Any) -> None:
            self.channel.flush()
            self.channel.send(Op.SHUTDOWN)

        try:
            self.engine.run(stop).result(timeout=SHUTDOWN_WAIT_S)
        except Exception:  # the group is already broken: the ranks stop on their own
            pass
        self.engine.close()


def run_leader(group: mx.distributed.Group, address: str, backend: str, pids: list[int]) -> int:
    """Connect to Corral's process at `address` and serve it; the exit status."""
    from multiprocessing.connection import Client

    from engine.distributed.protocol import FAMILY, KEY_ENV

    key = os.environ.pop(KEY_ENV, "")
    if not key:
        raise RuntimeError(f"rank 0 needs {KEY_ENV} (it is started by Corral)")
    conn = Client(address, family=FAMILY, authkey=bytes.fromhex(key))
    try:
        return Leader(group, conn, backend).serve(pids)
    finally:
        conn.close()
