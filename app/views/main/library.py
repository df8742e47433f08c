"""What the main window does about the model library: the picker's list of models on this
computer (kept up to date from the library's scans and the recent models), the library
window, and downloads by repo id through the download window (the size and memory check
first, progress with speed and Cancel there and as a chip in the toolbar, the model loaded
when it arrives)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer

from app.jobs.library_job import DownloadJob, LibraryJob
from app.views.library.download_dialog import DownloadDialog
from app.views.library.model_menu import menu_entries
from app.views.library.window import LibraryWindow
from app.views.main.parts import WindowParts
from engine.memory.budget import MemoryBudget

if TYPE_CHECKING:
    from engine.library.downloads import DownloadPlan, DownloadProgress


class LibraryActions:
    """The main window's library: `job` scans the models on this computer, `download_job`
    is the download in flight (None when none), `download_dialog` and `library_window`
    the windows shown."""

    def __init__(self, window: WindowParts) -> None:
        self.window = window
        self.bridge = window.bridge
        self.store = window.store
        self.model_bar = window.model_bar
        self.notice = window.notice
        self.load_model = window.models.load
        self.job = LibraryJob(self.memory_budget, window.window())
        self.job.recent_paths = [str(r.get("path")) for r in self.recent_models()]
        self.download_job: DownloadJob | None = None
        self.library_window: LibraryWindow | None = None
        self.download_dialog = DownloadDialog(window.window())
        self.download_dialog.requested.connect(self.request_repo)
        self.download_dialog.confirmed.connect(self._download_confirmed)
        self.download_dialog.cancelRequested.connect(self.cancel_download)
        self.job.scanned.connect(self._library_scanned)
        self.model_bar.libraryRequested.connect(self.show)
        self.model_bar.downloadRequested.connect(self.show_download)
        self.model_bar.menuOpened.connect(self.job.refresh)  # shown when it changes
        QTimer.singleShot(0, self.job.refresh)  # after the window has painted

    def memory_budget(self) -> MemoryBudget:
        """The engine's measured budget once a model has loaded; an estimate before."""
        plan = self.bridge.snapshot().memory
        return MemoryBudget.from_plan(plan) if plan is not None else MemoryBudget.estimate()

    def loaded_model_path(self) -> str | None:
        info = self.bridge.model_info
        return info.path if info is not None else None

    def recent_models(self) -> list[dict[str, Any]]:
        """The models loaded lately, newest first (the store's `recent_models`)."""
        recents = self.store.get_setting("recent_models")
        return [r for r in recents if isinstance(r, dict)] if isinstance(recents, list) else []

    def _library_scanned(self, _models: object) -> None:
        self.download_dialog.set_completions(self.job.repo_ids())
        self.update_model_menu()

    def update_model_menu(self) -> None:
        """Rebuild the picker's list from the last scan (no disk access here)."""
        lib = self.job
        self.model_bar.set_entries(
            menu_entries(
                lib.models,
                self.recent_models(),
                loaded_path=None if self.bridge.loading else self.loaded_model_path(),
                default_origin=lib.default_origin,
                present=lib.present,
                resolved=lib.resolved,
            )
        )

    def show(self) -> None:
        """The library window (made once)."""
        if self.library_window is None:
            window = LibraryWindow(self.job, self.loaded_model_path, self.window.window())
            window.loadRequested.connect(self.load_model)
            self.library_window = window
        self.library_window.show()
        self.library_window.raise_()
        self.library_window.activateWindow()
        self.job.refresh()

    def show_download(self) -> None:
        """The download window, under the picker."""
        self.download_dialog.open_below(self.model_bar.picker)

    # ---- downloads ----

    def request_repo(self, repo_id: str) -> None:
        """Load `repo_id` from a copy on this computer, or check and download it."""
        dialog = self.download_dialog
        local = [
            m for m in self.job.models if m.repo_id == repo_id and m.kind == "mlx" and m.can_run
        ]
        if local:
            dialog.idle(f"{repo_id} is on this computer already: loading it.")
            self.load_model(local[0].spec)
            return
        if self.download_job is not None and self.download_job.running:
            dialog.idle(f"Downloading {self.download_job.repo_id} already; cancel it first.")
            return
        job = DownloadJob(repo_id, self.memory_budget(), self.window.window())
        job.planned.connect(self._download_planned)
        job.progressed.connect(self._download_progressed)
        job.finished.connect(self._download_finished)
        job.failed.connect(self._download_failed)
        job.cancelled.connect(self._download_cancelled)
        self.download_job = job
        dialog.checking(repo_id)
        job.check()

    def _download_planned(self, plan: DownloadPlan) -> None:
        job = self.download_job
        if job is None:
            return
        self.download_dialog.planned(plan)
        if plan.fits_disk and plan.fits_memory:
            job.start()
        elif not plan.fits_disk:
            self.download_job = None
            self._tell_if_hidden(plan.describe(), "error")
        elif not self.download_dialog.isVisible():  # closed while checking: ask here
            self.notice.show_message(plan.describe(), "error", "Download Anyway", job.start)

    def _download_confirmed(self) -> None:
        if self.download_job is not None:
            self.download_job.start()

    def _download_progressed(self, progress: DownloadProgress) -> None:
        self.download_dialog.progressed(progress)
        self.model_bar.downloading(progress.repo_id, progress.describe(), progress.fraction)

    def _download_finished(self, folder: str) -> None:
        repo = self.download_job.repo_id if self.download_job else folder
        self._download_ended(f"{repo} is downloaded: loading it.")
        self.job.refresh()
        self.load_model(folder)

    def _download_failed(self, message: str) -> None:
        text = f"The download failed: {message}"
        self._download_ended(text, "error")
        self._tell_if_hidden(text, "error")

    def _download_cancelled(self, message: str) -> None:
        text = message[:1].upper() + message[1:] + "."
        self._download_ended(text)
        self._tell_if_hidden(text, "info")

    def _download_ended(self, text: str, kind: str = "") -> None:
        self.model_bar.download_ended()
        self.download_job = None
        self.download_dialog.idle(text, kind)

    def _tell_if_hidden(self, text: str, kind: str) -> None:
        """The download window says how it ended; with it closed, the notice bar does."""
        if not self.download_dialog.isVisible():
            self.notice.show_message(text, kind)

    def cancel_download(self) -> None:
        if self.download_job is not None:
            self.download_job.cancel()
