"""Check a built bundle for things that must not ship, and say where its size goes.

    python packaging/audit.py dist/Corral          (Linux one-folder bundle)
    python packaging/audit.py dist/Corral.app      (macOS)

Exits 1 and lists the problems if the bundle holds virtual environments, caches, tests,
developer files, packages the app never imports, or lacks the default model.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# Folder names that mean a virtual environment, a cache, tests or a checkout.
BAD_DIRS = {
    ".venv",
    "venv",
    "site-packages",
    "__pycache__",
    ".git",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    "tests",
    "test",
    "testing",
    "benchmarks",
}
# Files that are developer or build-machine leftovers, or GPU runtimes of the build machine.
BAD_FILES = re.compile(
    r"(\.gguf|\.pyc|\.h|\.hpp|\.cmake|\.whl|corral_source\.json|\.DS_Store)$"
    r"|^lib(cudart|cuda|cublas|cudnn|nvrtc|nccl)[.-]"
)
# Top-level packages the app never imports (their modules, folders or libraries).
EXCLUDED_PACKAGES = (
    "torch",
    "triton",
    "tensorflow",
    "jax",
    "IPython",
    "matplotlib",
    "tkinter",
    "_tkinter",
    "pytest",
    "_pytest",
    "pytest_timeout",
    "pytest_qt",
    "PyInstaller",
    "setuptools",
    "pip",
    "rich",
    "typer",
    "benchmarks",
)
# PyInstaller ships Python's own pyconfig.h: sysconfig reads it at run time.
ALLOWED = {"pyconfig.h"}
MODEL = Path("models") / "default"


def content_root(bundle: Path) -> Path:
    """Where the collected files live: `_internal/` of a folder, `Contents/` of an .app."""
    if bundle.suffix == ".app":
        return bundle / "Contents"
    internal = bundle / "_internal"
    return internal if internal.is_dir() else bundle


def executable(bundle: Path) -> Path:
    """The program inside the bundle."""
    if bundle.suffix == ".app":
        return bundle / "Contents" / "MacOS" / "Corral"
    return bundle / "Corral"


def size_bytes(path: Path) -> int:
    """Bytes of all regular files under `path` (links not followed, as `du` counts them)."""
    if path.is_file():
        return path.lstat().st_size
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            p = Path(folder, name)
            if not p.is_symlink():
                total += p.lstat().st_size
    return total


def largest(bundle: Path, count: int = 12) -> list[tuple[int, str]]:
    """The biggest entries one level below the content root (Frameworks/ and Resources/ too)."""
    root = content_root(bundle)
    tops = [root / "Frameworks", root / "Resources"] if bundle.suffix == ".app" else [root]
    entries = [p for top in tops if top.is_dir() for p in top.iterdir() if not p.is_symlink()]
    sizes = sorted(((size_bytes(p), str(p.relative_to(bundle))) for p in entries), reverse=True)
    return sizes[:count]


def pyz_modules(bundle: Path) -> list[str] | None:
    """Module names in the executable's PYZ archive (None if PyInstaller cannot read it)."""
    try:
        from PyInstaller.archive.readers import CArchiveReader
    except ImportError:
        return None
    try:
        archive = CArchiveReader(str(executable(bundle)))
        names = [n for n in archive.toc if n.endswith(".pyz") or n == "PYZ-00.pyz"]
        return sorted(archive.open_embedded_archive(names[0]).toc) if names else None
    except Exception:  # an unknown archive layout: skip this check rather than guess
        return None


def problems(bundle: Path) -> list[str]:
    """Everything in `bundle` that should not ship, or is missing, as readable lines."""
    found: list[str] = []
    if not executable(bundle).is_file():
        found.append(f"{executable(bundle)}: no executable")
    root = content_root(bundle)
    model = next((p / MODEL for p in (root, root / "Resources") if (p / MODEL).is_dir()), None)
    if model is None or not (model / "config.json").exists():
        found.append(f"{bundle}: no default model in {MODEL}")
    elif not any(model.glob("*.safetensors")):
        found.append(f"{model}: no weights")
    tops = {root, root / "Frameworks", root / "Resources"}
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(bundle)
        for name in dirs:
            top_package = Path(folder) in tops and name.split("-")[0] in EXCLUDED_PACKAGES
            if top_package or name in BAD_DIRS and not name.endswith(".dist-info"):
                found.append(f"{rel / name}/: should not ship")
        dirs[:] = [d for d in dirs if not d.endswith(".dist-info")]  # metadata and licences
        for name in files:
            if BAD_FILES.search(name) and name not in ALLOWED:
                found.append(f"{rel / name}: should not ship")
    for name in pyz_modules(bundle) or []:
        if name.split(".")[0] in EXCLUDED_PACKAGES:
            found.append(f"module {name}: the app never imports it")
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    bundle = Path(args[0])
    print(f"{bundle}: {size_bytes(bundle) / 1e6:.0f} MB")
    for size, rel in largest(bundle):
        print(f"  {size / 1e6:8.1f} MB  {rel}")
    found = problems(bundle)
    for line in found:
        print(f"problem: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
