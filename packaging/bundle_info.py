"""What Corral.app declares to macOS: identity, version, and the grammar files it opens.

Corral.spec passes `info_plist()` to PyInstaller's BUNDLE; the tests read it without
PyInstaller. The version comes from pyproject.toml so there is one place to bump it.

Document types: `.json` files are the system's `public.json` (Corral is an alternate
viewer, never the default JSON app). `.lark`, `.gbnf` and `.regex` have no system type,
so Corral exports plain-text UTIs for them; they conform to `public.plain-text`, so text
editors and Quick Look still handle them.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
APP_NAME = "Corral"
BUNDLE_ID = "app.corral.Corral"
MIN_MACOS = "13.0"  # the oldest macOS that MLX publishes wheels for

# extension -> (UTI, description, exported by Corral)
GRAMMAR_TYPES: dict[str, tuple[str, str, bool]] = {
    "json": ("public.json", "JSON Schema", False),
    "lark": (f"{BUNDLE_ID}.lark-grammar", "Lark Grammar", True),
    "gbnf": (f"{BUNDLE_ID}.gbnf-grammar", "GBNF Grammar", True),
    "regex": (f"{BUNDLE_ID}.regex", "Regular Expression", True),
}


def project_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """`project.version` from pyproject.toml."""
    with open(pyproject, "rb") as f:
        data = tomllib.load(f)
    try:
        return str(data["project"]["version"])
    except KeyError as exc:
        raise ValueError(f"{pyproject}: no [project] version") from exc


def min_macos_for(wheel_tags: list[str], floor: str = MIN_MACOS) -> str:
    """The newest macOS any of these wheel tags needs (`...-macosx_14_0_arm64` -> "14.0").

    pip picks the wheel built for the build machine's macOS (mlx publishes 13, 14 and 15
    builds, each with its own Metal library), so the bundle needs what its wheels need.
    """
    best = tuple(int(x) for x in floor.split("."))
    for tag in wheel_tags:
        for major, minor in re.findall(r"macosx_(\d+)_(\d+)_", tag):
            best = max(best, (int(major), int(minor)))
    return f"{best[0]}.{best[1]}"


def installed_wheel_tags() -> list[str]:
    """The `Tag:` lines of every installed distribution's WHEEL file."""
    tags = []
    for dist in metadata.distributions():
        text = dist.read_text("WHEEL") or ""
        tags += [
            line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")
        ]
    return tags


def document_types() -> list[dict[str, Any]]:
    """CFBundleDocumentTypes: files Corral opens (dropped on the Dock icon or Open With)."""
    return [
        {
            "CFBundleTypeName": description,
            "CFBundleTypeRole": "Viewer",
            "LSHandlerRank": "Default" if exported else "Alternate",
            "LSItemContentTypes": [uti],
        }
        for uti, description, exported in GRAMMAR_TYPES.values()
    ]


def exported_types() -> list[dict[str, Any]]:
    """UTExportedTypeDeclarations for the grammar formats that have no system UTI."""
    return [
        {
            "UTTypeIdentifier": uti,
            "UTTypeDescription": description,
            "UTTypeConformsTo": ["public.plain-text"],
            "UTTypeTagSpecification": {"public.filename-extension": [ext]},
        }
        for ext, (uti, description, exported) in GRAMMAR_TYPES.items()
        if exported
    ]


def info_plist(version: str | None = None, min_macos: str = MIN_MACOS) -> dict[str, Any]:
    """The Info.plist entries PyInstaller merges into Corral.app/Contents/Info.plist."""
    version = version or project_version()
    return {
        "CFBundleName": APP_NAME,
        "CFBundleDisplayName": APP_NAME,
        "CFBundleIdentifier": BUNDLE_ID,
        "CFBundleShortVersionString": version,
        "CFBundleVersion": version,
        "LSMinimumSystemVersion": min_macos,
        "LSArchitecturePriority": ["arm64"],
        "LSApplicationCategoryType": "public.app-category.developer-tools",
        "NSHighResolutionCapable": True,
        "NSRequiresAquaSystemAppearance": False,  # follow the system's dark mode
        "NSHumanReadableCopyright": "Apache-2.0",
        "CFBundleDocumentTypes": document_types(),
        "UTExportedTypeDeclarations": exported_types(),
    }
