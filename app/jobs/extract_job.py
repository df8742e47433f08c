"""An extraction job run off the GUI thread: the engine's ExtractRunner on a thread of its
own, its rows re-emitted as Qt signals on the GUI thread as they finish."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from engine.api import EngineAPI
from engine.errors import CorralError
from engine.extract.runner import ExtractRunner, Progress
from engine.extract.store import JobStore, Row


class ExtractJob(QObject):
    """One run of a job. `rowFinished(row, progress)` for each row written; `finished`
    once, with the job's Progress, or an error message (str) when it could not run."""

    rowFinished = Signal(object, object)
    finished = Signal(object)

    def __init__(
        self, engine: EngineAPI, store: JobStore, job_id: str, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.job_id = job_id
        self.runner = ExtractRunner(engine, store, job_id, on_row=self._row)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="corral-extract", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def pause(self) -> None:
        """Rows decoding finish and are written; no new one starts."""
        self.runner.pause()

    @property
    def in_flight(self) -> int:
        """How many rows are being written now (after `pause`: how many are finishing)."""
        return self.runner.feeder.in_flight

    def cancel(self) -> None:
        """Rows decoding stop now and stay pending."""
        self.runner.cancel()

    def wait(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _row(self, row: Row, progress: Progress) -> None:  # the runner's thread
        self.rowFinished.emit(row, progress)

    def _run(self) -> None:
        try:
            progress: Progress | str = self.runner.run()
        except CorralError as exc:
            progress = str(exc)
        self.finished.emit(progress)
