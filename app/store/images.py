"""The files of images sent in chats: kept in the data folder's `images/`, each named by the
SHA-256 of its bytes and its format's suffix (`<data>/images/<sha256>.png`), so a picture
sent twice is stored once. Every path written or removed is checked to lie inside that
folder (engine.files.is_inside, links and `..` resolved) and every name read back from the
database must have that shape: a damaged row cannot point Corral at another file."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from engine.files import OutsideFolder, is_inside

IMAGES_DIR = "images"
SUFFIXES = ("png", "jpg", "webp", "gif")  # what the engine reads; others arrive as PNG
_FILE_NAME = re.compile(r"^[0-9a-f]{64}\.(png|jpg|webp|gif)$")


class ImageFiles:
    """The `images/` folder of one data folder."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.folder = self.data_dir / IMAGES_DIR

    def _checked(self, file: str) -> Path:
        if not _FILE_NAME.match(file):
            raise OutsideFolder(f"{file!r}: not the name of an image Corral stored")
        path = self.folder / file
        if not is_inside(path, self.data_dir) or not is_inside(path, self.folder):
            raise OutsideFolder(f"{path}: refused, it is not inside {self.folder}")
        return path

    def path(self, file: str) -> Path:
        """Where the stored image `file` (a name from the database) lies."""
        return self._checked(file)

    def save(self, data: bytes, suffix: str) -> str:
        """Keep `data` (an image's bytes, of format `suffix`); return its file name. The
        same bytes saved again reuse the file."""
        if suffix not in SUFFIXES:
            raise ValueError(f"{suffix!r}: images are stored as one of {', '.join(SUFFIXES)}")
        file = f"{hashlib.sha256(data).hexdigest()}.{suffix}"
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._checked(file)
        if path.is_file() and path.stat().st_size == len(data):
            return file
        # written beside it, then renamed: a crash never leaves half a picture under the name
        temp = self._checked(file).with_name(f".{file}.{os.getpid()}.part")
        if not is_inside(temp, self.folder):
            raise OutsideFolder(f"{temp}: refused, it is not inside {self.folder}")
        temp.write_bytes(data)
        os.replace(temp, path)
        return file

    def read(self, file: str) -> bytes:
        return self._checked(file).read_bytes()

    def delete(self, file: str) -> None:
        """Remove the stored image `file` (nothing if it is gone already)."""
        path = self._checked(file)
        if path.is_symlink() or path.exists():
            path.unlink()
