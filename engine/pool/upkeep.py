"""The pool's own thread: what loads and unloads, and when.

Woken whenever something changes (a request waits for a model, a model goes idle, a load
ends, a setting changes) and at least every TICK_S, it:

1. finishes waiters whose clients went away, and fails those that waited past their
   deadline (ModelUnavailableError: "model_busy", with their place in the queue);
2. unloads models asked to unload and models idle past their idle-unload time, once no
   request is in flight on them;
3. unloads idle, unpinned models, least recently used first, while the pool holds more
   than its limit (a lower limit, a model larger than its estimate);
4. loads waiting models in the order they were asked for: the next one loads when it
   fits under the limit, after the idle models that make room for it are unloaded; while
   it would only fit once busy models finish, it (and everything behind it) waits;
5. re-reads the settings file when it changed (engine.pool.settings_file).

Closing a model (Engine.close) and starting a load happen here, outside the pool's lock;
a load runs on the new model's own thread and reports back through its future.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from engine.errors import EngineClosedError
from engine.memory.budget import gb
from engine.pool.backends import Backend, ChatBackend, LoadOrder
from engine.pool.entry import Entry, Waiter
from engine.pool.memory import MIN_KV_BUDGET, Estimate, Holder, kv_share, make_room, never_fits
from engine.pool.settings_file import SettingsFile
from engine.types import LoadProgress
from engine.workers import acquire_worker, exiting, release_worker

if TYPE_CHECKING:
    from concurrent.futures import Future

    from engine.pool.state import PoolState

log = logging.getLogger("engine.pool")

TICK_S = 0.25  # idle unloads and waiting deadlines are checked this often at least
CLOSE_WAIT_S = 60.0  # closing waits this long for loads in flight (a download may not end)


class Upkeep:
    """The thread that loads and unloads a pool's models (see the module's docstring)."""

    def __init__(self, state: PoolState, wire_memory: bool) -> None:
        self.pool = state
        state.wake = self.wake
        self.settings = SettingsFile(state)
        self._wire_memory = wire_memory
        self._wired: Any = None  # engine.memory.plan.WiredLimit once applied
        self._wired_bytes: int | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._stopped = threading.Event()
        # A worker thread of the engine's (engine.workers), not one of its own: the
        # garbage it collects may free MLX state, and a thread that holds MLX's
        # thread-local state must never exit (the process would abort at shutdown).
        self._worker = acquire_worker()
        self._noted: set[str] = set()  # models whose wait was logged
        self._grown: dict[str, int] = {}  # the KV budget each model alone was last given

    def start(self) -> None:
        self._worker.put(self._run)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Fail the waiters, unload every model (after its requests), stop the thread."""
        self._stopping = True
        self._wake.set()
        self._stopped.wait()
        release_worker(self._worker)

    # ---- the loop ----

    def _run(self) -> None:
        while not self._stopping:
            if exiting.is_set():  # the interpreter exits with the pool open: let it
                self._stopped.set()
                return
            self._wake.wait(TICK_S)
            self._wake.clear()
            try:
                self.settings.check()
                self.step()
            except Exception:  # a bug here must not stop the pool from serving
                log.exception("model pool upkeep failed")
        try:
            self._shut_down()
        finally:
            self._stopped.set()

    def step(self) -> None:
        """One round of the five steps above (after what was left for this thread)."""
        pool = self.pool
        with pool.lock:
            jobs, pool.later = pool.later, []
        for job in jobs:
            job()
        now, wall = time.monotonic(), time.time()
        finished: list[Waiter] = []
        expired: list[tuple[Waiter, str]] = []
        refused: list[tuple[Waiter, str]] = []
        closing: list[tuple[Entry, str]] = []
        loading: list[tuple[Entry, LoadOrder, int]] = []
        needs: dict[str, int] = {}  # what the loads started in this round will hold
        with pool.lock:
            entries = list(pool.entries.values())
            limit = pool.memory_limit_bytes
            for entry in entries:
                if entry.state == "loaded" and entry.backend is not None:
                    entry.memory_bytes = entry.backend.memory_bytes
                queued = entry.state in ("unloaded", "failed", "unloading")
                for waiter in list(entry.waiters):
                    if waiter.cancelled():
                        entry.waiters.remove(waiter)
                        finished.append(waiter)
                    elif queued and waiter.deadline is not None and now > waiter.deadline:
                        entry.waiters.remove(waiter)
                        expired.append((waiter, self._busy_message(entry)))
                if not entry.waiters and entry.state != "loading":
                    entry.queued_at = None
            for entry in entries:  # asked to unload, or idle too long
                if entry.state != "loaded" or entry.in_flight:
                    continue
                idle_s = entry.idle_unload_s(pool.idle_unload_s)
                idle = idle_s is not None and wall - entry.last_used >= idle_s
                if entry.unload_asked:
                    closing.append((entry, "asked"))
                elif idle and not entry.pinned and not entry.waiters:
                    closing.append((entry, f"idle for {wall - entry.last_used:.0f} s"))
            for entry, _ in closing:
                entry.state = "unloading"
            holders = [_holder(e, needs) for e in entries if e.state in ("loaded", "loading")]
            over = sum(h.memory_bytes for h in holders) - limit
            for holder in sorted(holders, key=lambda h: h.last_used):
                if over <= 0:
                    break
                entry = pool.entries[holder.id]
                if entry.state == "loaded" and not holder.busy and not holder.pinned:
                    entry.state = "unloading"
                    closing.append((entry, f"over the limit of {gb(limit)}"))
                    over -= holder.memory_bytes
            queue = sorted(
                (e for e in entries if e.waiters and e.state in ("unloaded", "failed")),
                key=lambda e: e.queued_at or 0.0,
            )
            for entry in queue:
                weights = _weights(entry)
                kv = pool.kv_budget_for(entry, weights or 0)
                # Unknown until it loads (a repo still to download): nothing is unloaded
                # for it beforehand; once loaded, what it holds is counted like any other.
                working = entry.estimate.working_bytes
                need = weights + (kv or 0) + working if weights is not None else MIN_KV_BUDGET
                holders = [_holder(e, needs) for e in entries if e.state in ("loaded", "loading")]
                victims, fits, busy = make_room(holders, need, limit)
                if not fits:
                    if never_fits(holders, need, limit):
                        message = (
                            f"model {entry.id} needs about {gb(need)} and the pinned models "
                            f"hold {gb(sum(h.memory_bytes for h in holders if h.pinned))} of "
                            f"the {gb(limit)} limit (--max-model-memory): it cannot load "
                            "until one is unpinned or the limit is raised"
                        )
                        refused += [(w, message) for w in entry.waiters]
                        entry.waiters.clear()
                        entry.queued_at = None
                        continue
                    if entry.id not in self._noted:
                        self._noted.add(entry.id)
                        log.info(
                            "model %s waits for memory: it needs about %s; %s must finish "
                            "their requests first",
                            entry.id,
                            gb(need),
                            ", ".join(busy),
                        )
                    break  # first come, first loaded
                self._noted.discard(entry.id)
                for victim in victims:
                    pool.entries[victim].state = "unloading"
                    closing.append((pool.entries[victim], f"to make room for {entry.id}"))
                entry.state = "loading"  # its memory counts once the room is made
                entry.error = None
                needs[entry.id] = need
                loading.append((entry, self._order(entry, kv), need))
            pool.publish()
        for waiter in finished:
            waiter.cancel()
        for waiter, message in expired:
            waiter.fail(message, "model_busy")
        for waiter, message in refused:
            waiter.fail(message, "model_busy")
        for entry, why in closing:
            self._close(entry, why)
        if closing and not loading:
            self._grow()
        if loading:
            self._wire()
        for entry, order, need in loading:
            self._load(entry, order, need)

    # ---- loading and unloading ----

    def _order(self, entry: Entry, kv: int | None) -> LoadOrder:
        pool = self.pool

        def progress(p: LoadProgress) -> None:
            for listener in list(entry.progress):
                listener(p)

        def kv_for(weights: int) -> int | None:
            with pool.lock:
                return pool.kv_budget_for(entry, weights)

        known = entry.info is not None or entry.estimate.weights_bytes is not None
        return LoadOrder(
            entry.id,
            entry.spec,
            entry.kind,
            entry.settings,
            kv if known else None,
            progress,
            kv_for,
        )

    def _load(self, entry: Entry, order: LoadOrder, need: int) -> None:
        with self.pool.lock:
            entry.memory_bytes = need
            self.pool.publish()
        log.info("loading model %s (%s, about %s)", entry.id, entry.spec, gb(need))
        started = time.monotonic()
        try:
            future = self.pool.loaders[entry.kind](order)
        except Exception as exc:  # a loader that fails before it starts
            self._loaded(entry, None, exc, started)
            return
        future.add_done_callback(lambda f: self._loaded(entry, f, f.exception(), started))

    def _loaded(
        self,
        entry: Entry,
        future: Future[Backend] | None,
        error: BaseException | None,
        started: float,
    ) -> None:
        """A load ended (on the loading thread): serve or fail its waiters."""
        pool = self.pool
        backend = future.result() if future is not None and error is None else None
        if backend is not None and pool.closed:  # loaded after the pool closed: let it go
            closer = acquire_worker()  # (not this thread: an engine's close waits for it)
            closer.put(backend.close)
            release_worker(closer)
            backend = None
            error = EngineClosedError("the server is stopping")
        with pool.lock:
            waiters, entry.waiters = entry.waiters, []
            entry.queued_at = None
            entry.progress.clear()
            if backend is None:
                entry.state, entry.error, entry.memory_bytes = "failed", str(error), 0
            else:
                entry.state, entry.backend, entry.info = "loaded", backend, backend.info
                entry.memory_bytes = backend.memory_bytes
                if entry.kind != "chat":  # what it holds beside its weights, for next time
                    info = backend.info
                    working = max(0, entry.memory_bytes - info.weights_bytes)
                    entry.estimate = Estimate(info.weights_bytes, info.context_length, working)
                entry.last_used = time.time()
            pool.publish()
        if backend is None:
            log.error("model %s could not be loaded: %s", entry.id, error)
            for waiter in waiters:
                waiter.fail(str(error), "model_load_failed")
        else:
            log.info(
                "model %s loaded in %.1f s (%s with its KV budget)",
                entry.id,
                time.monotonic() - started,
                gb(entry.memory_bytes),
            )
            for waiter in waiters:
                try:
                    waiter.ready(backend)
                except Exception as exc:  # one waiter's failure is its own
                    waiter.fail(str(exc), "internal")
        self.wake()

    def _close(self, entry: Entry, why: str) -> None:
        backend = entry.backend
        freed = entry.memory_bytes
        if backend is not None:
            try:
                backend.close()
            except Exception:
                log.exception("model %s did not close cleanly", entry.id)
        pool = self.pool
        with pool.lock:
            entry.state, entry.backend, entry.memory_bytes = "unloaded", None, 0
            asked, entry.unload_asked = entry.unload_asked, []
            if not entry.listed and not entry.waiters and not entry.in_flight:
                pool.entries.pop(entry.id, None)
            pool.publish()
        self._grown.pop(entry.id, None)
        log.info("model %s unloaded (%s): %s freed", entry.id, why, gb(freed))
        for done in asked:
            done()
        self.wake()

    def _grow(self) -> None:
        """A chat model left alone, whose KV budget was its share beside others, gets the
        budget it would have alone (never shrunk here: shrinking would drop its cache)."""
        pool = self.pool
        with pool.lock:
            held = [e for e in pool.entries.values() if e.state in ("loaded", "loading")]
            entry = held[0] if len(held) == 1 else None
            backend = entry.backend if entry is not None and entry.state == "loaded" else None
            if entry is None or not isinstance(backend, ChatBackend):
                return
            if entry.settings.kv_budget_bytes is not None or pool.kv_setting is not None:
                return
            plan = backend.engine.snapshot.memory
            if plan is None:
                return
            limit = pool.memory_limit_bytes
            target = kv_share(limit, plan.model_bytes, 1, pool.budget.device_bytes // 2)
            if target <= plan.kv_budget_bytes * 1.1 or self._grown.get(entry.id) == target:
                return
            self._grown[entry.id] = target
        log.info("model %s alone: its prompt cache may use %s", entry.id, gb(target))
        backend.engine.set_kv_budget(target).add_done_callback(lambda _f: self.wake())

    def _wire(self) -> None:
        """On Metal, wire the pool's limit for all its models, once (and again after the
        limit changed), while nothing else runs: the wired limit is the process's."""
        if not self._wire_memory:
            return
        limit = self.pool.memory_limit_bytes
        if limit == self._wired_bytes:
            return
        with self.pool.lock:
            if any(e.in_flight or e.state == "loading" for e in self.pool.entries.values()):
                return
        from engine.memory.plan import WiredLimit

        if self._wired is None:
            self._wired = WiredLimit()
        if self._wired.apply_bytes(min(limit, self.pool.budget.device_bytes)):
            self._wired_bytes = limit

    def _shut_down(self) -> None:
        pool = self.pool
        with pool.lock:
            jobs, pool.later = pool.later, []
        for job in jobs:
            job()
        with pool.lock:
            entries = list(pool.entries.values())
            waiters = [(e, w) for e in entries for w in e.waiters]
            for entry in entries:
                entry.waiters.clear()
        for _entry, waiter in waiters:
            waiter.fail("the server is stopping", "engine_closed")
        deadline = time.monotonic() + CLOSE_WAIT_S
        for entry in entries:  # loads in flight end first: their engines close with them
            while entry.state == "loading" and time.monotonic() < deadline:
                time.sleep(0.05)
            if entry.backend is not None and entry.state != "loading":
                self._close(entry, "closing")
        if self._wired is not None:
            self._wired.restore()

    def _busy_message(self, entry: Entry) -> str:
        """Why a request for `entry` gave up waiting."""
        pool = self.pool
        busy = [
            f"{e.id} ({e.in_flight} request{'s' if e.in_flight != 1 else ''})"
            for e in pool.entries.values()
            if e.in_flight and e.state == "loaded"
        ]
        position = pool.published[0].find(entry.id)
        place = position.queue_position if position is not None else None
        held = (
            f"held by models answering requests ({', '.join(busy)})"
            if busy
            else "wanted by the models ahead of it in the load queue"
        )
        return (
            f"model {entry.id} could not be loaded within {pool.load_wait_s:g} s: the memory "
            f"it needs is {held}"
            + (f"; it was number {place} in the load queue" if place else "")
            + "; try again shortly"
        )


def _holder(entry: Entry, needs: dict[str, int]) -> Holder:
    return Holder(
        entry.id,
        needs.get(entry.id, entry.memory_bytes),
        entry.last_used,
        busy=entry.in_flight > 0 or entry.state == "loading",
        pinned=entry.pinned,
    )


def _weights(entry: Entry) -> int | None:
    if entry.info is not None:
        return entry.info.weights_bytes
    return entry.estimate.weights_bytes
