"""What Corral may change on disk: only its own folders inside its cache.

Every path the library writes (downloads) or removes (deleting a copy) is resolved and
checked to lie inside one of Corral's own folders first, so neither a crafted name, a `..`,
nor a symbolic link can make it touch another app's files.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.errors import LibraryError
from engine.files import is_inside, remove_tree

OWN_FOLDERS = ("models", "downloads")


def own_folder(corral_root: Path, kind: str) -> Path:
    """Corral's folder for `kind` ("models" for GGUF imports, "downloads")."""
    if kind not in OWN_FOLDERS:
        raise ValueError(kind)
    return corral_root / kind


def check_own_copy(path: str | os.PathLike[str], corral_root: Path) -> Path:
    """`path` if it is a model Corral made (a direct child of its models/ or downloads/
    folder, itself not a link out), else a LibraryError saying what was refused."""
    target = Path(path).absolute()
    parents = {own_folder(corral_root, k).resolve() for k in OWN_FOLDERS}
    if target.name in ("", ".", "..") or target.parent.resolve() not in parents:
        raise LibraryError(
            f"{target}: not one of Corral's own copies; Corral deletes only the models it "
            f"imported or downloaded into {corral_root}"
        )
    if not target.is_symlink() and not is_inside(target, corral_root):
        raise LibraryError(f"{target}: resolves outside {corral_root}; not deleted")
    return target


def delete_own_copy(path: str | os.PathLike[str], corral_root: Path) -> int:
    """Delete a model Corral imported or downloaded; returns the bytes freed.

    A symbolic link is removed itself, never what it points to; anything outside Corral's
    own folders is refused with a LibraryError and left untouched.
    """
    target = check_own_copy(path, corral_root)
    if target.is_symlink() or target.is_file():
        size = target.lstat().st_size
        target.unlink()
        return size
    if not target.is_dir():
        raise LibraryError(f"{target}: no such model")
    size = sum(p.lstat().st_size for p in target.rglob("*") if not p.is_dir())
    remove_tree(target, target.parent)  # removes links inside, never follows them
    return size
