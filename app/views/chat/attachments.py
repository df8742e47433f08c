"""Attachments in the chat: the thumbnails of images and the chips of documents waiting to
be sent (above the composer's text, each with a button that removes it), the thumbnails
and document chips of a sent message (a click opens the picture full size, or the text the
model reads, in a dialog), and those dialogs."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QMouseEvent, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.attachments import Attachment
from app.store.documents import AttachedDocument
from app.views.common import theme
from app.views.common.fit import fit_to_screen
from app.views.common.icons import IconButton, icon

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


class DocumentChip(QFrame):
    """A document attached to a message: "report.pdf · 2 pages · 1,234 tokens"; a click (or
    Enter) shows the text the model reads. `removable`: in the draft, with a remove button."""

    removeRequested = Signal(object)  # the DocumentChip

    def __init__(
        self, document: AttachedDocument, *, removable: bool, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.document = document
        self.setObjectName("documentChip")
        self.button = QToolButton(self)
        self.button.setObjectName("documentButton")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setIcon(icon("file", size=16))
        self.button.setText(document.summary())
        self.button.setToolTip(f"{document.path or document.name}\nClick to read the text sent")
        self.button.setAccessibleName(f"Document {document.summary()}")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.clicked.connect(self.show_text)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.button)
        self.remove_button: IconButton | None = None
        if removable:
            self.remove_button = IconButton("close", f"Remove {document.name}", self, size=12)
            self.remove_button.setAccessibleName(f"Remove {document.name}")
            self.remove_button.clicked.connect(lambda: self.removeRequested.emit(self))
            layout.addWidget(self.remove_button)
        self.dialog: DocumentDialog | None = None

    def show_text(self) -> None:
        self.dialog = DocumentDialog(self.document, self.window())
        self.dialog.open()


class DocumentDialog(QDialog):
    """The text of an attached document, as the model reads it (page markers included)."""

    def __init__(self, document: AttachedDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"{document.name} ({document.pages}, {document.tokens:,} tokens)")
        self.text = QPlainTextEdit(document.text, self)
        self.text.setReadOnly(True)
        self.text.setAccessibleName(f"Text of {document.name}")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
        self.resize(720, 560)
        fit_to_screen(self)


class DocumentChips(QWidget):
    """A sent message's documents, aligned like its text."""

    def __init__(
        self, documents: list[AttachedDocument], right: bool, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.chips = [DocumentChip(d, removable=False, parent=self) for d in documents]
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(theme.SPACE.S)
        if right:
            row.addStretch(1)
        for chip in self.chips:
            row.addWidget(chip)
        if not right:
            row.addStretch(1)


class AttachmentStrip(QWidget):
    """The images and documents waiting to be sent with the next message (hidden when
    there are none)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentStrip")
        self.thumbs: list[PendingThumb] = []
        self.documents: list[DocumentChip] = []
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

    def add_document(self, document: AttachedDocument) -> DocumentChip:
        chip = DocumentChip(document, removable=True, parent=self)
        chip.removeRequested.connect(self.remove)
        self._row.insertWidget(len(self.thumbs) + len(self.documents), chip)
        self.documents.append(chip)
        self.setVisible(True)
        self.changed.emit()
        return chip

    def items(self) -> list[QWidget]:
        """The pictures' thumbnails, then the documents' chips, as they are laid out."""
        return [*self.thumbs, *self.documents]

    def pending_documents(self) -> list[AttachedDocument]:
        return [chip.document for chip in self.documents]

    def remove(self, item: PendingThumb | DocumentChip) -> None:
        if item in self.thumbs or item in self.documents:
            self.thumbs = [t for t in self.thumbs if t is not item]
            self.documents = [d for d in self.documents if d is not item]
            item.hide()
            item.deleteLater()
        self.setVisible(bool(self.thumbs or self.documents))
        self.changed.emit()

    def clear(self) -> None:
        items: list[PendingThumb | DocumentChip] = [*self.thumbs, *self.documents]
        for item in items:
            self.remove(item)


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
