"""Long-lived worker threads that own MLX state.

MLX streams belong to the thread that made them, so each Engine runs all model work on
one thread. Those threads are never allowed to exit: with mlx 0.32 on the CPU backend a
thread that ran some MLX ops (e.g. `mx.random.categorical`) and then exited makes the
process abort at interpreter shutdown ("terminate called without an active exception").
A closed Engine hands its thread back to a small pool, and the next Engine reuses it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Job = Callable[[], None]

_idle: list[WorkerThread] = []
_idle_lock = threading.Lock()


class WorkerThread:
    """A daemon thread running queued jobs in order, forever."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[Job] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name="corral-engine", daemon=True)
        self.thread.start()

    def put(self, job: Job) -> None:
        self._jobs.put(job)

    def _serve(self) -> None:
        while True:
            self._jobs.get()()


def acquire_worker() -> WorkerThread:
    """An idle worker thread from the pool, or a new one."""
    with _idle_lock:
        if _idle:
            return _idle.pop()
    return WorkerThread()


def release_worker(worker: WorkerThread) -> None:
    """Give a worker back once its queue has drained (call from any thread)."""

    def park() -> None:
        with _idle_lock:
            _idle.append(worker)

    worker.put(park)
