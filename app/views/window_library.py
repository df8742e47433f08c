"""What the main window does about the model library: the library window, completion of
the repo field from it, and downloads by repo id (the size and memory check first, progress
and Cancel in the model bar, the model loaded when it arrives)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMainWindow

from app.jobs.library_job import DownloadJob, LibraryJob
from app.views.library_window import LibraryWindow
from engine.library.budget import MemoryBudget


class WindowLibrary(QMainWindow):
    """MainWindow's library side; uses its bridge, model bar, notice and `load_model`."""

    bridge: Any
    model_bar: Any
    notice: Any
    library: LibraryJob
    download_job: DownloadJob | None
    library_window: LibraryWindow | None
    load_model: Callable[[str], None]  # WindowModel's

    def setup_library(self) -> None:
        self.library = LibraryJob(self.memory_budget, self)
        self.download_job = None
        self.library_window = None
        self.library.scanned.connect(
            lambda _models: self.model_bar.set_completions(self.library.repo_ids())
        )
        self.model_bar.repoRequested.connect(self.request_repo)
        self.model_bar.libraryRequested.connect(self.show_library)
        self.model_bar.cancelDownload.connect(self.cancel_download)
        QTimer.singleShot(0, self.library.refresh)  # after the window has painted

    def memory_budget(self) -> MemoryBudget:
        """The engine's measured budget once a model has loaded; an estimate before."""
        plan = self.bridge.snapshot().memory
        return MemoryBudget.from_plan(plan) if plan is not None else MemoryBudget.estimate()

    def loaded_model_path(self) -> str | None:
        info = self.bridge.model_info
        return info.path if info is not None else None

    def show_library(self) -> None:
        if self.library_window is None:
            window = LibraryWindow(self.library, self.loaded_model_path, self)
            window.loadRequested.connect(self.load_model)
            self.library_window = window
        self.library_window.show()
        self.library_window.raise_()
        self.library_window.activateWindow()
        self.library.refresh()

    # ---- downloads ----

    def request_repo(self, repo_id: str) -> None:
        """Load `repo_id` from a copy on this computer, or check and download it."""
        local = [
            m for m in self.library.models if m.repo_id == repo_id and m.kind == "mlx" and m.can_run
        ]
        if local:
            self.load_model(local[0].spec)
            return
        if self.download_job is not None and self.download_job.running:
            self.notice.show_message(
                f"Downloading {self.download_job.repo_id} already; cancel it first.", "error"
            )
            return
        job = DownloadJob(repo_id, self.memory_budget(), self)
        job.planned.connect(self._download_planned)
        job.progressed.connect(lambda p: self.model_bar.downloading(p.describe(), p.fraction))
        job.finished.connect(self._download_finished)
        job.failed.connect(self._download_failed)
        job.cancelled.connect(self._download_cancelled)
        self.download_job = job
        self.notice.hide()
        self.model_bar.downloading(f"Checking {repo_id}…", 0.0)
        job.check()

    def _download_planned(self, plan: Any) -> None:
        job = self.download_job
        if job is None:
            return
        if not plan.fits_disk:
            self.model_bar.download_ended()
            self.notice.show_message(plan.describe(), "error")
            return
        if not plan.fits_memory:
            self.model_bar.download_ended()
            self.notice.show_message(plan.describe(), "error", "Download Anyway", job.start)
            return
        self.statusBar().showMessage(plan.describe(), 8000)
        job.start()

    def _download_finished(self, folder: str) -> None:
        self.model_bar.download_ended()
        self.download_job = None
        self.library.refresh()
        self.load_model(folder)

    def _download_failed(self, message: str) -> None:
        self.model_bar.download_ended()
        self.download_job = None
        self.notice.show_message(f"The download failed: {message}", "error")

    def _download_cancelled(self, message: str) -> None:
        self.model_bar.download_ended()
        self.download_job = None
        self.notice.show_message(message[:1].upper() + message[1:] + ".", "info")

    def cancel_download(self) -> None:
        if self.download_job is not None:
            self.download_job.cancel()
