"""Where GGUF imports live, and how Corral knows an import is its own and current.

An imported model is a folder holding only the files an import writes, among them the
marker `corral_source.json`: the GGUF's path, size and SHA-256. The cache names each
folder from a sanitised file name plus that digest (`cache/models/NAME-DIGEST16`), so a
file named `..gguf` cannot point outside the cache and two different files with the same
name and size never share an import.

The key is the SHA-256 of the whole file, not a sample: a sample misses changes confined
to a few tensors (an abliterated or patched model differs from its original in some
layers only). Hashing costs about a second per 300 MB here (hashlib, 0.24-0.43 s for the
default model's 98 MB), so each marker also keeps the files it was computed for, by path,
size, inode, modification and status-change time: a file whose status has not changed is
not hashed again. (The status-change time cannot be set back by copying tools, unlike the
modification time, so a file rewritten in place with its old date still gets a new hash.)

Temporary folders are `.corral-import-*` beside the target, holding an owner file with the
process id: a process killed during an import leaves one, and the next import into that
folder (or the cache's first use in a process) removes those whose process is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.files import remove_tree
from engine.library.convert import IMPORT_FORMAT

MARKER = "corral_source.json"
# Every file an import writes: a folder holding anything else is not only Corral's.
IMPORT_FILES = frozenset(
    {
        MARKER,
        "config.json",
        "model.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    }
)
# Large imports are written in numbered shards (`engine.library.convert`).
_SHARD = re.compile(r"model-\d{5}-of-\d{5}\.safetensors\Z")
TEMP_PREFIX = ".corral-import-"
OWNER = ".corral-owner"
# Temporary folders of Corral versions before these checks: `.NAME.XXXXXXXX` (mkdtemp).
_LEGACY_TEMP = re.compile(r"\..+\.[a-z0-9_]{8}\Z")
_STALE_AFTER_S = 24 * 3600  # an owner process alive this long is not importing any more
_LEGACY_STALE_AFTER_S = 3600
_KEEP_FINGERPRINTS = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

ProgressFn = Callable[[str, float], None]


def safe_folder_name(stem: str) -> str:
    """A file stem as a folder name that stays inside its parent: letters, digits and
    `._-`, no leading dot or dash, at most 64 characters ("model" if nothing is left)."""
    name = _UNSAFE.sub("-", stem).lstrip(".-")[:64].rstrip(".-")
    return name or "model"


def fingerprint(path: Path) -> dict[str, Any]:
    """What tells whether the file at `path` may have changed since it was hashed."""
    info = path.stat()
    return {
        "path": str(path),
        "size": info.st_size,
        "inode": info.st_ino,
        "device": info.st_dev,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
    }


def file_sha256(path: Path, on_progress: ProgressFn | None = None) -> str:
    """SHA-256 of the whole file, reporting progress for big ones."""
    digest = hashlib.sha256()
    size = max(1, path.stat().st_size)
    done = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
            done += len(chunk)
            if on_progress is not None and size > 256 << 20:
                on_progress("Checking the GGUF file", min(0.3, 0.3 * done / size))
    return digest.hexdigest()


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The import marker in `folder`, or None if there is none (or it is damaged)."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def marker_data(source: Path, sha256: str) -> dict[str, Any]:
    """The marker an import of `source` (with digest `sha256`) writes."""
    return {
        "gguf": str(source),
        "size": source.stat().st_size,
        "sha256": sha256,
        "format": IMPORT_FORMAT,
        "seen": [fingerprint(source)],
    }


def _import_file(name: str) -> bool:
    # `.marker-*`: a marker write cut short
    return name in IMPORT_FILES or bool(_SHARD.match(name)) or name.startswith(".marker-")


def is_import_of(folder: Path, sha256: str | None) -> bool:
    """Whether `folder` is a complete Corral import (of the file with `sha256`, if given)
    that holds nothing but an import's files."""
    marker = read_marker(folder)
    if marker is None or (sha256 is not None and marker.get("sha256") != sha256):
        return False
    if marker.get("format") != IMPORT_FORMAT:  # written by an older Corral: redo it
        return False
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    weights = "model.safetensors" in names or "model.safetensors.index.json" in names
    return all(map(_import_file, names)) and "config.json" in names and weights


def holds_only_import_files(folder: Path) -> bool:
    """Whether every entry of `folder` is a plain file an import writes (or none is)."""
    try:
        return all(_import_file(p.name) and p.is_file() for p in folder.iterdir())
    except OSError:
        return False


def find_by_fingerprint(models: Path, source: Path) -> Path | None:
    """The cached import whose marker saw `source` as it is now (no hashing), or None."""
    try:
        now = fingerprint(source)
        folders = [p for p in models.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return None
    for folder in folders:
        marker = read_marker(folder) or {}
        seen = marker.get("seen")
        if isinstance(seen, list) and now in seen and is_import_of(folder, marker.get("sha256")):
            return folder
    return None


def remember_fingerprint(folder: Path, source: Path) -> None:
    """Record that `source`, as it is now, has the digest of the import in `folder`."""
    marker = read_marker(folder)
    if marker is None:
        return
    seen = [s for s in marker.get("seen", []) if isinstance(s, dict)]
    now = fingerprint(source)
    marker["seen"] = ([now] + [s for s in seen if s != now])[:_KEEP_FINGERPRINTS]
    write_marker(folder, marker)


def write_marker(folder: Path, marker: dict[str, Any]) -> None:
    """Write the marker atomically (a reader never sees half of it)."""
    fd, tmp = tempfile.mkstemp(prefix=".marker-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(marker, f, indent=2)
        os.replace(tmp, folder / MARKER)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_temp_folder(parent: Path) -> Path:
    """A new temporary folder in `parent` for one import, marked with this process."""
    tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=parent))
    (tmp / OWNER).write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
    return tmp


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    except OSError:
        return False
    return True


def _is_stale(folder: Path, legacy: bool) -> bool:
    now = time.time()
    if legacy:
        try:
            age = now - folder.stat().st_mtime
        except OSError:
            return False
        return age > _LEGACY_STALE_AFTER_S and holds_only_import_files(folder)
    try:
        owner = json.loads((folder / OWNER).read_text())
        pid, started = int(owner["pid"]), float(owner["started"])
    except (OSError, ValueError, KeyError, TypeError):
        # No owner file (yet, or no more: an import removes it just before its rename):
        # ours only by name, so it must be old and hold nothing but an import's files.
        try:
            age = now - folder.stat().st_mtime
        except OSError:
            return False
        return age > _STALE_AFTER_S and holds_only_import_files(folder)
    return not _alive(pid) or now - started > _STALE_AFTER_S


def clean_stale_temp_folders(parent: Path, *, legacy: bool = False) -> list[Path]:
    """Remove the temporary folders imports left in `parent` when their process died;
    return them. `legacy` also removes old versions' `.NAME.XXXXXXXX` folders (only in
    Corral's own cache, and only those holding nothing but import files)."""
    removed: list[Path] = []
    try:
        entries = [p for p in parent.iterdir() if p.name.startswith(".") and p.is_dir()]
    except OSError:
        return removed
    for folder in entries:
        if folder.is_symlink():
            continue
        ours = folder.name.startswith(TEMP_PREFIX)
        old = legacy and not ours and bool(_LEGACY_TEMP.match(folder.name))
        if (ours or old) and _is_stale(folder, legacy=old):
            try:
                remove_tree(folder, parent)
                removed.append(folder)
            except OSError:
                continue
    return removed
