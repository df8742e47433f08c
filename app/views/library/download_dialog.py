"""The picker's "Download a model…" window: a Hugging Face repo id (completed from the
library), the size and memory check before any byte moves ("needs ~X GB of disk and Y GB
of memory; this Mac's budget is Z"), then the progress with speed and Cancel. Closing it
leaves the download running (the toolbar's chip shows it); Cancel keeps the bytes, and
downloading the same repo again resumes."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, QStringListModel, Qt, Signal
from PySide6.QtWidgets import (
    QCompleter,
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.views.common import theme
from app.views.common.format import format_bytes

EXAMPLE = "mlx-community/Qwen2.5-0.5B-Instruct-4bit"
WIDTH = 460


def looks_like_repo_id(text: str) -> bool:
    """'org/name' (the engine checks it fully before asking the Hub)."""
    parts = text.strip().split("/")
    return len(parts) == 2 and all(parts) and not any(c.isspace() for c in text.strip())


def progress_text(done: int, total: int, bytes_per_s: float) -> str:
    """'12.3 MB of 98.0 MB · 4.5 MB/s'."""
    speed = f"{format_bytes(int(bytes_per_s))}/s" if bytes_per_s else "starting"
    return f"{format_bytes(done)} of {format_bytes(total)} · {speed}"


class DownloadDialog(QDialog):
    """Emits `requested(repo_id)` (check it, then download or load it), `confirmed` (download
    although it may not fit in memory) and `cancelRequested`; the window reports back."""

    requested = Signal(str)
    confirmed = Signal()
    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Download a model")
        self.setObjectName("downloadDialog")
        self.setFixedWidth(WIDTH)  # its height follows what it says (`_fit`)
        intro = QLabel("An MLX model from Hugging Face, by its repo id:", self)
        intro.setWordWrap(True)
        self.repo = QLineEdit(self)
        self.repo.setObjectName("repoField")
        self.repo.setPlaceholderText(f"e.g. {EXAMPLE}")
        self.repo.setClearButtonEnabled(True)
        self.completions = QStringListModel(self)
        completer = QCompleter(self.completions, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.repo.setCompleter(completer)
        self.message = QLabel(self)
        self.message.setObjectName("downloadMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setVisible(False)
        self.detail = QLabel(self)
        self.detail.setObjectName("hint")
        self.detail.setVisible(False)
        self.cancel = QPushButton("Cancel download", self)
        self.cancel.setToolTip("Stop the download; downloading it again resumes where it stopped")
        self.cancel.setVisible(False)
        self.anyway = QPushButton("Download anyway", self)
        self.anyway.setVisible(False)
        self.close_button = QPushButton("Close", self)
        self.close_button.setToolTip("Close this window; a download goes on")
        self.start = QPushButton("Download", self)
        self.start.setDefault(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.cancel)
        buttons.addStretch(1)
        for button in (self.close_button, self.anyway, self.start):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.L, theme.SPACE.L, theme.SPACE.L, theme.SPACE.L)
        layout.setSpacing(theme.SPACE.S)
        layout.addWidget(intro)
        layout.addWidget(self.repo)
        layout.addWidget(self.message)
        layout.addWidget(self.progress)
        layout.addWidget(self.detail)
        layout.addSpacing(theme.SPACE.S)
        layout.addLayout(buttons)

        self.repo.textChanged.connect(lambda _text: self._update_start())
        self.repo.returnPressed.connect(self._request)
        self.start.clicked.connect(self._request)
        self.anyway.clicked.connect(self._confirm)
        self.cancel.clicked.connect(self.cancelRequested.emit)
        self.close_button.clicked.connect(self.close)
        self.busy = False
        self.idle()

    def set_completions(self, repo_ids: list[str]) -> None:
        """Repo ids the library knows (downloaded, in the Hugging Face cache, LM Studio)."""
        self.completions.setStringList(repo_ids)

    def open_below(self, anchor: QWidget) -> None:
        """Show the window under `anchor` (the picker), kept on the anchor's window."""
        self._fit()
        top = anchor.window()
        x = anchor.mapTo(top, QPoint(anchor.width() // 2, 0)).x() - self.width() // 2
        x = max(0, min(x, top.width() - self.width()))
        y = anchor.mapTo(top, QPoint(0, anchor.height())).y() + theme.SPACE.XS
        self.move(top.mapToGlobal(QPoint(x, y)))
        self.show()
        self.raise_()
        self.activateWindow()
        if not self.busy:
            self.repo.setFocus()

    # ---- states ----

    def _say(self, text: str, kind: str = "") -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
        self.message.setProperty("kind", kind)
        self.message.style().unpolish(self.message)
        self.message.style().polish(self.message)
        self._fit()

    def _fit(self) -> None:
        """As tall as its content needs now (a message wraps; the progress appears)."""
        layout = self.layout()
        if layout is not None:
            layout.activate()
            self.setFixedHeight(layout.totalHeightForWidth(self.width()))

    def _update_start(self) -> None:
        self.start.setEnabled(not self.busy and looks_like_repo_id(self.repo.text()))

    def idle(self, text: str = "", kind: str = "") -> None:
        """Nothing running: a repo id can be typed; `text` says how the last try ended."""
        self.busy = False
        self.repo.setReadOnly(False)
        for widget in (self.progress, self.detail, self.cancel, self.anyway):
            widget.setVisible(False)
        self._say(text, kind)  # and fits
        self._update_start()

    def checking(self, repo_id: str) -> None:
        self.busy = True
        self.repo.setText(repo_id)
        self.repo.setReadOnly(True)
        self.anyway.setVisible(False)
        self._say(f"Checking {repo_id} on Hugging Face…")
        self._update_start()

    def planned(self, plan: Any) -> None:
        """The size and memory check: said in words; past the memory budget the user
        decides; without the disk space it stops here."""
        if not plan.fits_disk:
            self.idle(plan.describe(), "error")
        elif not plan.fits_memory:
            self.busy = False
            self._say(plan.describe(), "warning")
            self.anyway.setVisible(True)
            self.repo.setReadOnly(False)
            self._update_start()
        else:
            self._say(plan.describe() + ".")

    def _confirm(self) -> None:
        self.busy = True
        self.anyway.setVisible(False)
        self.repo.setReadOnly(True)
        self._update_start()
        self.confirmed.emit()

    def progressed(self, progress: Any) -> None:
        """Bytes so far of the total and the speed (a `DownloadProgress`)."""
        self.busy = True
        self.progress.setValue(int(progress.fraction * 100))
        self.detail.setText(
            progress_text(progress.done_bytes, progress.total_bytes, progress.bytes_per_s)
        )
        if self.progress.isHidden():
            for widget in (self.progress, self.detail, self.cancel):
                widget.setVisible(True)
            self._fit()
        self._update_start()

    def _request(self) -> None:
        text = self.repo.text().strip()
        if self.busy:
            return
        if not looks_like_repo_id(text):
            self._say(f"A repo id looks like org/name, for example {EXAMPLE}.", "error")
            return
        self.requested.emit(text)
