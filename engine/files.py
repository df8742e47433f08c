"""Files Corral reads from the user and writes for itself, checked at the edge.

Reading: grammar, schema, tool and config files are regular files of bounded size, read
without following a device or a pipe (`/dev/zero` would be read until memory runs out, a
FIFO would block forever). Writing and removing: every path Corral creates or deletes is
checked to lie inside a folder Corral owns, after resolving links and `..`.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.errors import CorralError


class FileRefused(CorralError, ValueError):
    """A file cannot be used; the message names it and says why."""


class OutsideFolder(CorralError):
    """A path Corral was about to write or remove is not inside the folder it must be in."""


@contextmanager
def open_regular(path: str | os.PathLike[str], what: str = "file") -> Iterator[tuple[int, int]]:
    """Open the regular file at `path` for reading; yields (file descriptor, size).

    Opened without blocking and checked on the open file, so a path swapped for a FIFO or a
    device between a check and the read is refused all the same.

    Args:
        path: the file.
        what: what the file should be, for the messages ("grammar file", "GGUF file").

    Raises FileRefused naming the path when it is missing, a folder, a device, pipe or
    socket, or cannot be opened.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileRefused(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise FileRefused(f"{p}: is a folder, not a {what}") from None
    except OSError as exc:
        raise FileRefused(f"{p}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileRefused(f"{p}: is a folder, not a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{p}: not a regular file (a device, pipe or socket), not a {what}")
        yield fd, info.st_size
    finally:
        os.close(fd)


def read_limited(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file at `path` (see `open_regular`), refused (FileRefused,
    naming the path) when it is not one or is larger than `limit` bytes."""
    p = Path(path)
    with open_regular(p, what) as (fd, size):
        if size > limit:
            raise FileRefused(
                f"{p}: too large for a {what} ({size:,} bytes; the limit is {limit:,} bytes)"
            )
        chunks: list[bytes] = []
        left = limit + 1  # one byte more tells a file that grew past the limit
        try:
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as exc:
            raise FileRefused(f"{p}: cannot be read ({exc.strerror or exc})") from None
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileRefused(f"{p}: too large for a {what} (the limit is {limit:,} bytes)")
    return data


def read_text_limited(path: str | os.PathLike[str], limit: int, what: str = "file") -> str:
    """`read_limited` decoded as UTF-8 (a BOM is dropped); FileRefused if it is not."""
    data = read_limited(path, limit, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileRefused(
            f"{path}: not a UTF-8 text file (invalid byte at offset {exc.start})"
        ) from None


def is_inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether `path`, resolved (links and `..` followed), lies strictly inside `folder`,
    resolved: `folder` itself is not inside itself."""
    return Path(folder).resolve() in Path(path).resolve().parents


def check_inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path:
    """`path` resolved, if it lies strictly inside `folder` (is_inside); else OutsideFolder."""
    target = Path(path).resolve()
    root = Path(folder).resolve()
    if not is_inside(target, root):
        raise OutsideFolder(f"{target}: refused, it is not inside {root}")
    return target


def remove_tree(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> None:
    """The one guarded delete: remove the folder `path`, which must lie strictly inside
    `folder` (checked after resolving links and `..`); a symbolic link there is removed,
    never followed. (engine.library.paths.delete_own_copy decides which of Corral's models
    may be deleted at all, and deletes through this.)"""
    p = Path(path)
    parent, root = p.parent.resolve(), Path(folder).resolve()
    if p.name in ("", ".", "..") or not (parent == root or root in parent.parents):
        raise OutsideFolder(f"{p}: refused to remove it, it is not inside {root}")
    if p.is_symlink():
        p.unlink()
        return
    shutil.rmtree(check_inside(p, root))
