"""Qt's platform plugins can open a window on a fresh Debian/Ubuntu desktop: every shared
library `ldd` lists for PySide6's xcb and wayland plugins resolves, and comes from a package
the bootstrap installs (or one those packages depend on). A Qt release that needs a new
library fails here, not on a user's first start."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from app_helpers import REPO

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("dpkg-query") is None,
    reason="the bootstrap installs Qt's libraries with apt on Debian/Ubuntu only",
)

PLUGINS = ("platforms/libqxcb.so", "platforms/libqwayland.so")


def bootstrap_packages() -> set[str]:
    """The packages in bootstrap.sh's apt list (the `pkgs=(...)` array)."""
    text = (REPO / "bootstrap.sh").read_text()
    match = re.search(r"^\s*pkgs=\(([^)]*)\)", text, re.MULTILINE)
    assert match, "bootstrap.sh has no pkgs=(...) list"
    return set(match.group(1).split())


@cache
def _depends(package: str) -> set[str]:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}", package],
        capture_output=True,
        text=True,
    )
    names = set()
    for clause in out.stdout.split(","):
        for alternative in clause.split("|"):
            name = alternative.strip().split(" ")[0].split(":")[0]
            if name:
                names.add(name)
    return names


def closure(packages: set[str]) -> set[str]:
    """`packages` and everything they depend on, as installed here."""
    seen: set[str] = set()
    todo = list(packages)
    while todo:
        package = todo.pop()
        if package not in seen:
            seen.add(package)
            todo += _depends(package)
    return seen


def owning_packages(libraries: list[str]) -> dict[str, str]:
    """The Debian package that installed each library (merged-/usr paths tried both ways)."""
    candidates = {}
    for library in libraries:
        for path in (str(Path(library).resolve()), library, "/usr" + library):
            candidates[path] = library
    out = subprocess.run(["dpkg-query", "-S", *candidates], capture_output=True, text=True)
    owners = {}
    for line in out.stdout.splitlines():
        package, _, path = line.partition(": ")
        if path in candidates:
            owners[candidates[path]] = package.split(":")[0]
    return owners


def linked_libraries(plugin: Path) -> tuple[list[str], list[str]]:
    """(resolved paths outside PySide6, names that did not resolve) from `ldd plugin`."""
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=True)
    qt_dir = str(plugin.parents[3])
    resolved, missing = [], []
    for line in out.stdout.splitlines():
        if "=> not found" in line:
            missing.append(line.split("=>")[0].strip())
        elif "=>" in line:
            path = line.split("=>")[1].split("(")[0].strip()
            if path and not path.startswith(qt_dir):
                resolved.append(path)
    return resolved, missing


@pytest.mark.parametrize("plugin_name", PLUGINS)
def test_platform_plugin_libraries_come_from_the_bootstrap(plugin_name):
    import PySide6

    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / plugin_name
    if not plugin.exists():
        pytest.skip(f"this PySide6 has no {plugin_name}")
    resolved, missing = linked_libraries(plugin)
    assert not missing, (
        f"{plugin_name} needs {', '.join(sorted(set(missing)))}, which no installed package "
        "provides: add its package to bootstrap.sh's apt list"
    )
    allowed = closure(bootstrap_packages())
    owners = owning_packages(resolved)
    outside = {lib: package for lib, package in owners.items() if package not in allowed}
    assert not outside, (
        f"{plugin_name} links libraries from packages bootstrap.sh does not install: "
        f"{outside}; add them to its apt list"
    )
