"""Import a GGUF file into an MLX model folder.

The weights are converted tensor by tensor by `engine.library.convert` (the architectures
it knows, and how each quantization is stored, live in `engine.library`). This module opens
the file and checks its header once (`engine.library.gguf_file`: a crafted file must never
reach native code), converts from that one memory map, adds the tokenizer and writes the
folder to a temporary sibling that is renamed into place, so a failure never leaves a
half-written model behind. An existing folder is replaced only when it is Corral's own
import of the same file: nothing else is ever deleted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from engine.errors import ModelLoadError
from engine.files import remove_tree
from engine.library.convert import convert_gguf
from engine.library.gguf_file import MappedGGUF, open_gguf
from engine.library.gguf_tokenizer import build_tokenizer_files
from engine.library.import_cache import (
    OWNER,
    clean_stale_temp_folders,
    file_sha256,
    holds_only_import_files,
    is_import_of,
    make_temp_folder,
    marker_data,
    read_marker,
    write_marker,
)

ProgressFn = Callable[[str, float], None]


def import_gguf(
    gguf: str | os.PathLike[str] | MappedGGUF,
    out_dir: str | os.PathLike[str],
    on_progress: ProgressFn | None = None,
    *,
    sha256: str | None = None,
) -> Path:
    """Convert a GGUF file into an MLX model folder at `out_dir` and return its path.

    `out_dir` must be new, an empty folder, or an earlier Corral import of the same file
    (which is replaced; a complete one is returned as it is): a folder holding anything
    else is refused, never deleted. It is written atomically: a temporary folder beside it
    is renamed into place.

    Args:
        gguf: the file, or the file already opened by `open_gguf` (not read again).
        out_dir: the folder to write.
        on_progress: callback (stage, fraction 0..1).
        sha256: the file's digest, if the caller has it.
    """
    if isinstance(gguf, MappedGGUF):
        return _import(gguf, out_dir, on_progress, sha256)
    # The header is checked here: a bad file is refused before anything is written.
    with open_gguf(Path(gguf).expanduser().resolve()) as opened:
        return _import(opened, out_dir, on_progress, sha256)


def _import(
    gguf: MappedGGUF,
    out_dir: str | os.PathLike[str],
    on_progress: ProgressFn | None,
    sha256: str | None,
) -> Path:
    source = gguf.header.path
    out = Path(out_dir).expanduser().absolute()
    report = on_progress or (lambda stage, fraction: None)
    parent = out.parent.resolve()
    out = parent / out.name
    if out.name in ("", ".", "..") or out == parent:
        raise ModelLoadError(f"{out_dir}: not a folder name an import can be written to")
    if sha256 is None:
        sha256 = file_sha256(source, report)
    previous = _existing_output(out, source, sha256)
    if previous == "current":
        report("Imported", 1.0)
        return out

    report("Reading GGUF", 0.0)
    parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temp_folders(parent)
    tmp = make_temp_folder(parent)
    aside: Path | None = None
    try:
        config, meta = convert_gguf(gguf, tmp, report)
        build_tokenizer_files(meta, tmp, source)
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        write_marker(tmp, marker_data(source, sha256))
        (tmp / OWNER).unlink()
        if previous == "replace":  # an earlier import of this file: moved aside, then removed
            aside = make_temp_folder(parent)
            os.replace(out, aside / "old")
        os.replace(tmp, out)  # onto a missing or empty folder only: never over files
    except BaseException as exc:
        remove_tree(tmp, parent)
        if aside is not None and (aside / "old").exists() and not out.exists():
            os.replace(aside / "old", out)
        elif isinstance(exc, OSError) and is_import_of(out, sha256):
            report("Imported", 1.0)  # another process imported the same file meanwhile
            return out
        raise
    finally:
        if aside is not None:
            remove_tree(aside, parent)
    report("Imported", 1.0)
    return out


def _existing_output(out: Path, source: Path, sha256: str) -> str:
    """What is at `out` now: "new" (nothing, or an empty folder), "current" (a complete
    import of this file), "replace" (an unfinished import of it); else ModelLoadError."""
    if out.is_symlink():
        raise ModelLoadError(f"{out}: is a link; choose a new or empty folder")
    if out.exists() and not out.is_dir():
        raise ModelLoadError(f"{out}: exists and is not a folder; choose a new or empty folder")
    if not out.exists():
        return "new"
    try:
        empty = not any(out.iterdir())
    except OSError as exc:
        raise ModelLoadError(f"{out}: cannot be read ({exc.strerror or exc})") from None
    if empty:
        return "new"
    if is_import_of(out, sha256):
        return "current"
    marker = read_marker(out)
    if marker is not None and marker.get("sha256") == sha256 and holds_only_import_files(out):
        return "replace"
    raise ModelLoadError(
        f"{out}: the folder exists and is not empty, and it is not Corral's import of "
        f"{source.name}; Corral never replaces a folder it did not write. Choose a new or "
        "empty folder."
    )
