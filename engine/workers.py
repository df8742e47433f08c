"""Long-lived worker threads that own MLX state.

MLX streams belong to the thread that made them, so each Engine runs all model work on
one thread. Those threads are never allowed to exit: with mlx 0.32 on the CPU backend a
thread that ran some MLX ops (e.g. `mx.random.categorical`) and then exited makes the
process abort at interpreter shutdown ("terminate called without an active exception").
A closed Engine hands its thread back to a small pool, and the next Engine reuses it.

Nor may they be running Python when the interpreter finalizes: a daemon thread that wakes
then is made to exit, and MLX's thread-local state then aborts the process the same way.
So at exit (`atexit`) every worker is given one last job and awaited, and `exiting` is set
for jobs that loop (a model pool's upkeep) to return.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from collections.abc import Callable

Job = Callable[[], None]

_idle: list[WorkerThread] = []
_idle_lock = threading.Lock()
_every: list[WorkerThread] = []  # they never end
exiting = threading.Event()  # set at interpreter exit: looping jobs return
QUIESCE_S = 5.0  # at exit, how long workers busy with a job are waited for


class WorkerThread:
    """A daemon thread running queued jobs in order, forever."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[Job] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name="corral-engine", daemon=True)
        self.thread.start()
        with _idle_lock:
            _every.append(self)

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


@atexit.register
def _quiesce() -> None:
    """At exit, before the interpreter finalizes: every worker finishes the job it runs
    (jobs that loop return once `exiting` is set) and blocks waiting for the next, so
    none runs Python while the interpreter finalizes."""
    exiting.set()
    with _idle_lock:
        workers = list(_every)
    marks = []
    for worker in workers:
        mark = threading.Event()
        worker.put(mark.set)
        marks.append(mark)
    deadline = time.monotonic() + QUIESCE_S
    for mark in marks:
        mark.wait(max(0.0, deadline - time.monotonic()))
    time.sleep(0.02)  # from setting its mark to blocking again: a few lines of Python
