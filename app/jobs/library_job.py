"""The model library seen from Qt: scanning the stores, deleting Corral's own copies and
downloading by repo id, each on a worker thread, with results as signals on the GUI thread.

Nothing here imports MLX: discovery reads headers only, and the memory budget comes from
the engine's last published plan (or an estimate from the machine's memory before any
model has loaded).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.jobs.thread import run_task
from app.words import error_sentence

if TYPE_CHECKING:
    from engine.library.downloads import DownloadPlan, DownloadProgress
    from engine.memory.budget import MemoryBudget


def corral_root() -> Path:
    from engine.library.load import cache_dir

    return cache_dir()


def model_disk_size(path: str) -> int:
    """Bytes a model takes on disk: a file, or a folder's files (links followed, as the
    Hugging Face cache's snapshots link to their blobs). Blocking: run it on a worker."""
    target = Path(path)
    if target.is_file():
        return target.stat().st_size
    return sum(p.stat().st_size for p in target.rglob("*") if p.is_file())


def _default_origin() -> str | None:
    """The built-in model's GGUF as its import records it (resolved), if installed."""
    from engine.errors import ModelLoadError
    from engine.library.load import default_gguf_path

    try:
        return str(default_gguf_path().resolve())
    except (ModelLoadError, OSError):
        return None


class LibraryJob(QObject):
    """Scans the library and deletes copies; `scanned(list[LibraryModel])` after each scan.

    Each scan also learns, off the GUI thread, what the picker's menu needs to show each
    model once: where the built-in model's GGUF is (`default_origin`), where scanned links
    lead (`resolved`), and which of `recent_paths` (models opened from elsewhere) are still
    on disk (`present`)."""

    scanning = Signal()
    scanned = Signal(object)  # list[LibraryModel]
    failed = Signal(str)
    deleted = Signal(str, int)  # path, bytes freed

    def __init__(self, budget: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._budget = budget  # () -> MemoryBudget
        self.models: list[Any] = []
        self.busy = False
        self.recent_paths: list[str] = []
        self.default_origin: str | None = None
        self.resolved: dict[str, str] = {}
        self.present: set[str] = set()
        self._again = False  # asked to scan while a scan ran: what it saw may be stale
        self._closed = False

    def close(self) -> None:
        """The window is closing: no more scans, and a running scan's result is dropped
        (what it would update, and the store it reads, are going)."""
        self._closed = True
        self._again = False

    def refresh(self) -> None:
        """Scan again in the background. A scan already running is not doubled: one more
        follows it, since it may have started before what this call wants seen (a model
        just opened, a copy just deleted)."""
        if self._closed:
            return
        if self.busy:
            self._again = True
            return
        self.busy = True
        self.scanning.emit()
        budget: MemoryBudget = self._budget()
        recent = list(self.recent_paths)

        def scan() -> tuple[list[Any], str | None, dict[str, str], set[str]]:
            from engine.library.discovery import LibraryRoots, scan_library
            from engine.tools.dialect import template_dialect

            roots = LibraryRoots.default(corral_root())
            models = scan_library(roots, budget, template_dialect)
            resolved = {m.path: str(Path(m.path).resolve()) for m in models}
            present = {p for p in recent if p and Path(p).exists()}
            return models, _default_origin(), resolved, present

        run_task(scan, self._scanned)

    def _scanned(self, result: Any, error: BaseException | None) -> None:
        self.busy = False
        if self._closed:
            return
        if error is not None or result is None:
            self.failed.emit(f"The library could not be read: {error}")
        else:
            self.models, self.default_origin, self.resolved, self.present = result
            self.scanned.emit(self.models)
        if self._again:
            self._again = False
            self.refresh()

    def repo_ids(self) -> list[str]:
        """Repo ids the library knows, for completing the repo field."""
        return sorted({m.repo_id for m in self.models if m.repo_id})

    def delete(self, path: str) -> None:
        """Delete one of Corral's own copies (refused for anything else), then rescan."""

        def remove() -> int:
            from engine.library.paths import delete_own_copy

            return delete_own_copy(path, corral_root())

        def done(freed: int | None, error: BaseException | None) -> None:
            if error is not None:
                self.failed.emit(str(error))
            else:
                self.deleted.emit(path, int(freed or 0))
            self.refresh()

        run_task(remove, done)


class DownloadJob(QObject):
    """One repo download: `planned` after the size and memory check, `progressed` several
    times a second, then exactly one of `finished(folder)`, `failed` or `cancelled`."""

    planned = Signal(object)  # DownloadPlan
    progressed = Signal(object)  # DownloadProgress
    finished = Signal(str)
    failed = Signal(str)
    cancelled = Signal(str)

    def __init__(self, repo_id: str, budget: MemoryBudget, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.repo_id = repo_id
        self.budget = budget
        self.plan: DownloadPlan | None = None
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> None:
        """Ask the Hub for the repo's files and sizes (on a worker thread)."""

        def plan() -> DownloadPlan:
            from engine.library.downloads import plan_download

            return plan_download(self.repo_id, corral_root(), self.budget)

        def done(result: DownloadPlan | None, error: BaseException | None) -> None:
            if error is not None or result is None:
                self.failed.emit(str(error))
                return
            self.plan = result
            self.planned.emit(result)

        run_task(plan, done)

    def start(self) -> None:
        """Download what the plan lists, on a thread of its own (it can take hours)."""
        plan = self.plan
        if plan is None or self._thread is not None:
            return

        def run() -> None:
            from engine.library.downloads import DownloadCancelled, download

            try:
                folder = download(plan, self._progress, self._cancel)
            except DownloadCancelled as exc:
                self.cancelled.emit(str(exc))
            except Exception as exc:  # shown to the user, never a traceback
                self.failed.emit(error_sentence(exc))
            else:
                self.finished.emit(str(folder))

        self._thread = threading.Thread(target=run, name=f"download {plan.repo_id}", daemon=True)
        self._thread.start()

    def _progress(self, progress: DownloadProgress) -> None:
        self.progressed.emit(progress)  # queued to the GUI thread

    def cancel(self) -> None:
        """Stop the download; the bytes so far are kept for a resume."""
        self._cancel.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
