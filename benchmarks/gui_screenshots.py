"""Screenshots of the main window for docs/screenshots/: a real conversation with the
bundled default model (its recommended sampling), at 800x500, 1024x700 and 1440x900, in
light and dark. Offscreen, no display needed; takes a minute or two on a laptop CPU.

    python benchmarks/gui_screenshots.py [--out docs/screenshots] [--seed N]

The replies are sampled with a fixed seed, so the pictures repeat from run to run.

The PNGs are written with a 256-colour palette to keep them small.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import engine  # noqa: E402,F401  (OpenBLAS before MLX)

if TYPE_CHECKING:
    from app.views.main.window import MainWindow

SIZES = ((800, 500), (1024, 700), (1440, 900))
SEED = 3  # a seed whose replies show prose and a code block
PROMPTS = (
    ("What is 17*23? Answer in one short sentence.", 40),
    ("Write a Python function that adds two numbers, in a code block.", 90),
)


def _wait(app: object, condition: object, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("the screenshot run timed out")
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.005)


def _palettized(image: Any) -> Any:
    """`image` with its 256 most frequent colours (a window's flat fills and most of its
    text), every other pixel mapped to the nearest: a fraction of the file size."""
    import numpy as np
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage

    rgb = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(rgb.constBits(), np.uint32, count=rgb.width() * rgb.height())
    values, counts = np.unique(pixels, return_counts=True)
    table = [int(v) for v in values[np.argsort(counts)[::-1][:256]]]
    return rgb.convertToFormat(
        QImage.Format.Format_Indexed8, table, Qt.ImageConversionFlag.ThresholdDither
    )


def _open_id(window: MainWindow) -> int:
    """The id of the window's open conversation (it always has one)."""
    cid = window.controller.conversation_id
    assert cid is not None
    return cid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--seed", type=int, default=SEED, help="sampling seed of the replies")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    from app.application import build_window, create_application
    from app.jobs.engine_bridge import EngineBridge
    from app.paths import resources_dir
    from app.store import ChatSettings, Store
    from app.views.common import theme

    app, _ = create_application([])
    store = Store.open(tempfile.mkdtemp())
    bridge = EngineBridge()
    window = build_window(store, bridge)
    window.resize(1180, 780)
    window.show()
    window.models.load("default")
    _wait(app, lambda: bridge.model_info is not None and window.models.defaults.values)
    _wait(app, lambda: "·" in window.model_bar.picker.text())  # its size on disk, measured

    # An earlier chat for the sidebar: a reply that must fit a JSON schema.
    window.files.open_constraint_file(str(resources_dir() / "grammars" / "recipe.json"))
    _wait(app, window.constraint_bar.chip.isVisible)
    settings = ChatSettings(max_tokens=160, seed=args.seed)
    store.set_chat_settings(_open_id(window), settings)
    window.send("A simple pancake recipe")
    _wait(app, lambda: not window.controller.busy)

    window.new_chat()
    for prompt, tokens in PROMPTS:
        settings = ChatSettings(max_tokens=tokens, seed=args.seed)
        store.set_chat_settings(_open_id(window), settings)
        window.send(prompt)
        _wait(app, lambda: not window.controller.busy)
    settings = ChatSettings()  # the panel as a user finds it: seed "Random"
    store.set_chat_settings(_open_id(window), settings)
    window.settings_panel.set_settings(settings)

    args.out.mkdir(parents=True, exist_ok=True)
    for appearance in ("light", "dark"):
        theme.apply_appearance(appearance)
        for width, height in SIZES:
            window.resize(width, height)
            window.shell.set_sidebar_open(True)
            window.shell.set_inspector_open(width >= 1024)
            for _ in range(8):
                QApplication.processEvents()
            bar = window.chat.verticalScrollBar()
            bar.setValue(bar.maximum())
            QApplication.processEvents()
            small = _palettized(window.grab().toImage())
            path = args.out / f"main-{width}x{height}-{appearance}.png"
            small.save(str(path), "PNG", 0)  # 0: the smallest file
            print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    theme.apply_appearance("system")
    window.close()
    bridge.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
