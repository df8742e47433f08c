"""Where the app keeps its data and finds its bundled resources."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "Corral"


def default_data_dir() -> Path:
    """The user's data folder (the conversation database lives here)."""
    return Path(platformdirs.user_data_dir(APP_NAME, APP_NAME))


def resources_dir() -> Path:
    """The `resources/` folder: next to the package, or inside a PyInstaller bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle and (Path(bundle) / "resources").is_dir():
        return Path(bundle) / "resources"
    return Path(__file__).resolve().parents[1] / "resources"


def app_icon_path() -> Path:
    """The app's icon (the same picture the packaged app's .icns/.ico are made from)."""
    return resources_dir() / "brand" / "corral.png"


def readme_path() -> Path:
    """The README (how to use Corral): inside a PyInstaller bundle, or the source tree's."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle and (Path(bundle) / "README.md").is_file():
        return Path(bundle) / "README.md"
    return Path(__file__).resolve().parents[1] / "README.md"


def display_path(path: str | Path) -> str:
    """`path` as the window and reports show it: the home folder written "~", so a file
    reads short and a report carries no user name ("~/Documents/rows.csv")."""
    text = str(path)
    home = str(Path.home())
    if home in ("", os.sep) or not (text == home or text.startswith(home + os.sep)):
        return text
    return "~" + text[len(home) :]
