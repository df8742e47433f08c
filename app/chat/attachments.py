"""Images the user attaches to a message, checked the moment they arrive.

The check is the engine's own (`engine.prompt.images.check_image`: format, size,
corruption, decompression bombs, animations), so the window refuses exactly what the
engine would, with the engine's words. A picture in a format the engine does not read
but Qt does (HEIC on macOS, BMP, TIFF) is converted to PNG first; a picture pasted from
the clipboard arrives as a QImage and is stored as PNG.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QImage

from app.store import NewImage
from engine.files import FileRefused, read_limited
from engine.prompt.images import FORMATS, MAX_IMAGE_BYTES, BadImageError, check_image

# File suffixes taken as pictures when dropped or opened (anything else is a grammar,
# schema or tools file); the content decides whether it really is one.
IMAGE_SUFFIXES = frozenset(
    (".png", ".jpg", ".jpeg", ".webp", ".gif", ".heic", ".heif", ".avif", ".bmp", ".tif", ".tiff")
)
_STORED_AS = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp", "GIF": "gif"}
# A file that starts like a format the engine reads but that Pillow cannot open is broken:
# it is not handed to Qt as another format.
_ENGINE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"RIFF")


class AttachmentRefused(ValueError):
    """An image that cannot be attached; the message says which and why."""


@dataclass(frozen=True)
class Attachment:
    """A checked image waiting to be sent: its bytes (in a format the engine reads), the
    name it was attached under, its format's suffix, its size, and the engine's note (an
    animation's first frame, a picture scaled down)."""

    data: bytes
    name: str
    suffix: str
    width: int
    height: int
    note: str | None = None

    def __repr__(self) -> str:
        return f"Attachment({self.name!r}, {len(self.data)} bytes)"

    def to_new_image(self) -> NewImage:
        return NewImage(self.data, self.name, self.suffix)


def looks_like_image(path: str) -> bool:
    """Whether a dropped or opened file is meant as a picture (by its suffix)."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def _pil_format(data: bytes) -> str | None:
    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.format
    except Exception:  # not something Pillow identifies: check_image says what
        return None


def _png(image: QImage) -> bytes:
    raw = QByteArray()
    buffer = QBuffer(raw)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs say bytes; it takes str
    buffer.close()
    return bytes(raw.data())


def attachment_from_bytes(data: bytes, name: str) -> Attachment:
    """Check `data` as an image named `name`; AttachmentRefused with the engine's reason."""
    other = _pil_format(data) not in FORMATS and not data.startswith(_ENGINE_MAGIC)
    if other and data and len(data) <= MAX_IMAGE_BYTES:
        converted = QImage.fromData(data)  # HEIC, BMP, TIFF... where Qt reads them
        if not converted.isNull():
            data = _png(converted)
    try:
        checked = check_image(data, name)
    except BadImageError as exc:
        raise AttachmentRefused(str(exc)) from None
    suffix = _STORED_AS.get(_pil_format(data) or "", "png")
    return Attachment(data, name, suffix, checked.width, checked.height, checked.note)


def attachment_from_file(path: str) -> Attachment:
    """Read and check the picture at `path` (a regular file, at most the engine's limit)."""
    try:
        data = read_limited(path, MAX_IMAGE_BYTES, "image")
    except FileRefused as exc:
        raise AttachmentRefused(str(exc)) from None
    return attachment_from_bytes(data, Path(path).name)


def attachment_from_qimage(image: QImage, name: str = "pasted image.png") -> Attachment:
    """A picture pasted from the clipboard, kept as PNG."""
    if image.isNull():
        raise AttachmentRefused(f"{name}: the clipboard holds no picture Corral can read")
    return attachment_from_bytes(_png(image), name)
