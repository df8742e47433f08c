"""Pictures in the chat: the thumbnails of images waiting to be sent (above the composer's
text, each with a button that removes it), the thumbnails of a sent message (a click opens
the picture full size in a dialog), and that dialog."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QMouseEvent, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.chat.attachments import Attachment
from app.views.common import theme
from app.views.common.icons import IconButton

THUMB = 56  # px: the longer side of a composer thumbnail
MESSAGE_THUMB = 120  # px: of a sent message's thumbnail


def _scaled(pixmap: QPixmap, side: int) -> QPixmap:
    return pixmap.scaled(
        QSize(side, side),
        Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation,
    )


class PendingThumb(QWidget):
    """One image waiting to be sent: its thumbnail and a remove button."""

    removeRequested = Signal(object)  # the PendingThumb

    def __init__(self, attachment: Attachment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attachment = attachment
        self.setObjectName("pendingImage")
        pixmap = QPixmap()
        pixmap.loadFromData(attachment.data)
        self.picture = QLabel(self)
        self.picture.setPixmap(_scaled(pixmap, THUMB))
        self.picture.setFixedSize(THUMB, THUMB)
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        tip = f"{attachment.name} ({attachment.width} × {attachment.height})"
        self.picture.setToolTip(tip + (f"\n{attachment.note}" if attachment.note else ""))
        self.remove_button = IconButton("close", f"Remove {attachment.name}", self, size=12)
        self.remove_button.setAccessibleName(f"Remove {attachment.name}")
        self.remove_button.clicked.connect(lambda: self.removeRequested.emit(self))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.picture)
        layout.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)


class AttachmentStrip(QWidget):
    """The images waiting to be sent with the next message (hidden when there are none)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentStrip")
        self.thumbs: list[PendingThumb] = []
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(theme.SPACE.S)
        self._row.addStretch(1)
        self.setVisible(False)

    def attachments(self) -> list[Attachment]:
        return [t.attachment for t in self.thumbs]

    def add(self, attachment: Attachment) -> None:
        thumb = PendingThumb(attachment, self)
        thumb.removeRequested.connect(self.remove)
        self._row.insertWidget(len(self.thumbs), thumb)
        self.thumbs.append(thumb)
        self.setVisible(True)
        self.changed.emit()

    def remove(self, thumb: PendingThumb) -> None:
        if thumb in self.thumbs:
            self.thumbs.remove(thumb)
            thumb.hide()
            thumb.deleteLater()
        self.setVisible(bool(self.thumbs))
        self.changed.emit()

    def clear(self) -> None:
        for thumb in list(self.thumbs):
            self.remove(thumb)


class ImageThumb(QLabel):
    """A sent picture's thumbnail; a click shows it full size."""

    def __init__(self, path: Path, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path, self.name = path, name
        self.setObjectName("messageImage")
        self.pixmap_full = QPixmap(str(path)) if path.is_file() else QPixmap()
        if self.pixmap_full.isNull():
            self.setText(f"{name} (the file is missing)")
            self.setToolTip(str(path))
        else:
            self.setPixmap(_scaled(self.pixmap_full, MESSAGE_THUMB))
            self.setToolTip(f"{name}: click to see it full size")
            self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAccessibleName(name)
        self.dialog: ImageDialog | None = None

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and not self.pixmap_full.isNull():
            self.dialog = ImageDialog(self.pixmap_full, self.name, self.window())
            self.dialog.open()
        super().mouseReleaseEvent(event)


class ImageThumbnails(QWidget):
    """A sent message's pictures, in order, aligned like its text."""

    def __init__(
        self, images: list[tuple[Path, str]], right: bool, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.thumbs = [ImageThumb(path, name, self) for path, name in images]
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(theme.SPACE.S)
        if right:
            row.addStretch(1)
        for thumb in self.thumbs:
            row.addWidget(thumb)
        if not right:
            row.addStretch(1)


class ImageDialog(QDialog):
    """A picture full size (scrolling when it is larger than the screen allows)."""

    def __init__(self, pixmap: QPixmap, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"{name} ({pixmap.width()} × {pixmap.height()})")
        self.picture = QLabel(self)
        self.picture.setPixmap(pixmap)
        area = QScrollArea(self)
        area.setWidget(self.picture)
        area.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(area)
        screen = self.screen().availableGeometry() if self.screen() else None
        width, height = pixmap.width() + 24, pixmap.height() + 24
        if screen is not None:
            width, height = (
                min(width, int(screen.width() * 0.9)),
                min(height, int(screen.height() * 0.9)),
            )
        self.resize(max(width, 200), max(height, 150))
