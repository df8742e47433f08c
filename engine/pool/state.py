"""A pool's models and settings under one lock, and what it publishes about them.

ModelPool (the EngineAPI front, engine.pool.pool) and its thread (engine.pool.upkeep)
share a PoolState: they change entries only while holding `lock`, call `publish()` after
each change, and other threads read only the published snapshot. Nothing slow runs under
the lock: no loading, no closing, no file reading.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from engine.errors import ModelNotFoundError
from engine.memory.budget import MemoryBudget
from engine.pool.backends import BackendLoader, ChatBackend
from engine.pool.entry import Entry, Waiter
from engine.pool.memory import default_limit, estimate, kv_share
from engine.pool.names import check_exists, model_id, spec_key, spec_kind, spec_names
from engine.pool.settings import ModelSettings
from engine.types import ModelInfo, ModelKind, PoolSnapshot

if TYPE_CHECKING:
    from engine.engine import Engine


class PoolState:
    """The entries, the default, the limit and the other settings of one pool."""

    def __init__(
        self,
        budget: MemoryBudget,
        loaders: Mapping[ModelKind, BackendLoader],
        *,
        memory_limit_bytes: int | None,
        idle_unload_s: float | None,
        load_wait_s: float,
        max_waiting: int,
    ) -> None:
        self.lock = threading.RLock()
        self.budget = budget
        self.loaders = dict(loaders)
        self.limit_setting = memory_limit_bytes
        self.idle_unload_s = idle_unload_s
        self.load_wait_s = load_wait_s
        self.max_waiting = max_waiting
        self.kv_setting: int | None = None  # set_kv_budget's, for models without their own
        self.entries: dict[str, Entry] = {}
        self.default: str | None = None
        self.closed = False
        self.settings_path: str | None = None
        self.settings_error: str | None = None
        self.wake: Callable[[], None] = lambda: None  # the pool's thread, once it runs
        self.later: list[Callable[[], None]] = []  # for the pool's thread to run next
        self.request_ids = itertools.count(1)
        self.published: tuple[PoolSnapshot, Engine | None, ModelInfo | None] = (
            PoolSnapshot(limit_bytes=self.memory_limit_bytes),
            None,
            None,
        )

    @property
    def memory_limit_bytes(self) -> int:
        setting = self.limit_setting
        return setting if setting is not None else default_limit(self.budget)

    def add_model(
        self,
        spec: str,
        *,
        alias: str | None = None,
        kind: ModelKind | None = None,
        settings: ModelSettings | None = None,
        chosen: bool = False,
    ) -> tuple[str, bool]:
        """List `spec` (see ModelPool.add_model); returns (its id, whether it is new).
        `chosen`: listed because the chat picked it (Entry.chosen), not for good."""
        key = spec_key(spec)
        listed = self.entry_by_key(key)
        if kind is None:  # as listed already, else as its files say
            kind = listed.kind if listed is not None else spec_kind(spec)
        if kind not in self.loaders:
            raise ValueError(f"{spec}: this server cannot load {kind} models")
        check_exists(spec)
        known = estimate(spec, self.budget, kind) if listed is None else None
        with self.lock:
            entry = self.entry_by_key(key)
            made = entry is None
            if entry is None:
                wanted = alias or model_id(spec)
                entry_id = wanted
                for n in itertools.count(2):
                    if entry_id not in self.entries:
                        break
                    entry_id = f"{wanted}-{n}"
                names = [n for n in spec_names(spec) if n != entry_id]
                if alias and model_id(spec) != entry_id:
                    names.append(model_id(spec))
                entry = Entry(entry_id, spec, kind, key, names=names, chosen=chosen)
                if known is not None:
                    entry.estimate = known
                self.entries[entry_id] = entry
                if self.default is None and kind == "chat":  # requests naming none chat
                    self.default = entry_id
            elif entry.kind != kind:
                raise ValueError(f"{spec}: listed already as a {entry.kind} model, not {kind}")
            elif chosen:  # picked again: listed, for good only if it was before
                entry.chosen = entry.chosen or not entry.listed
                entry.listed = True
            else:  # listed by the user: for good
                entry.listed, entry.chosen = True, False
            if settings is not None:
                entry.base = settings.over(entry.base)
            if alias and alias != entry.id and alias not in entry.names:
                self.check_free_name(alias, entry)
                entry.names.append(alias)
            self.publish()
            return entry.id, made

    def kv_budget_for(self, entry: Entry, weights: int) -> int | None:
        """The KV budget of `entry`'s model with `weights`: its own setting, the pool's,
        or its share of the limit (None for models that keep no KV cache)."""
        if entry.kind != "chat":
            return None
        if entry.settings.kv_budget_bytes is not None:
            return entry.settings.kv_budget_bytes
        if self.kv_setting is not None:
            return self.kv_setting
        listed = sum(1 for e in self.entries.values() if e.kind == "chat" and e.listed)
        listed += not entry.listed  # one the chat picked earlier counts while it loads
        return kv_share(self.memory_limit_bytes, weights, listed, self.budget.device_bytes // 2)

    def publish(self) -> None:
        """(Under the lock.) Replace what other threads read with the pool as it is."""
        waiting = sorted(
            (e for e in self.entries.values() if e.queued_at is not None and e.waiters),
            key=lambda e: e.queued_at or 0.0,
        )
        positions = {e.id: i + 1 for i, e in enumerate(waiting)}
        models = tuple(
            e.snapshot(
                default=e.id == self.default,
                position=positions.get(e.id),
                idle_default=self.idle_unload_s,
            )
            for e in self.entries.values()
        )
        pool = PoolSnapshot(
            models,
            self.memory_limit_bytes,
            sum(e.memory_bytes for e in self.entries.values()),
            settings_file=self.settings_path,
            settings_error=self.settings_error,
        )
        default = self.entries.get(self.default or "")
        backend = default.backend if default is not None and default.state == "loaded" else None
        engine = backend.engine if isinstance(backend, ChatBackend) else None
        self.published = (pool, engine, default.info if default is not None else None)

    def route(self, name: str | None, kind: ModelKind | None = None) -> Entry:
        """(Under the lock.) The entry a request naming `name` means (None: the default);
        ModelNotFoundError listing the models served, ValueError for another `kind`."""
        found = self.published[0].find(name)
        entry = self.entries.get(found.id) if found is not None else None
        if entry is None:
            served = ", ".join(self.entries) or "none yet"
            what = f"model {name!r} is not one" if name is not None else "no model is one"
            raise ModelNotFoundError(f"{what} this server serves (it serves: {served})")
        if kind is not None and entry.kind != kind:
            raise ValueError(f"model {entry.id!r} is {_a(entry.kind)} model, not {_a(kind)} model")
        return entry

    def entry_by_key(self, key: str) -> Entry | None:
        return next((e for e in list(self.entries.values()) if e.key == key), None)

    def check_free_name(self, name: str, owner: Entry) -> None:
        """ValueError if `name` is already another entry's."""
        for entry in self.entries.values():
            if entry is not owner and (entry.id == name or name in entry.names):
                raise ValueError(f"the name {name!r} is already {entry.id}'s")

    def soon(self, job: Callable[[], None]) -> None:
        """Run `job` on the pool's thread, next (outside the lock)."""
        with self.lock:
            self.later.append(job)
        self.wake()

    def wait_for(self, entry: Entry, waiter: Waiter) -> None:
        """(Under the lock.) Queue `waiter` for `entry`'s load."""
        if self.closed:
            waiter.fail("the server is stopping", "engine_closed")
            return
        entry.waiters.append(waiter)
        if entry.queued_at is None:
            entry.queued_at = time.monotonic()
        self.publish()
        self.wake()

    def done(self, entry: Entry, count: int) -> None:
        """`count` requests (or a lease) on `entry` finished."""
        with self.lock:
            entry.in_flight -= count
            entry.last_used = time.time()
            self.publish()
            idle = entry.in_flight == 0
        if idle:
            self.wake()


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word
