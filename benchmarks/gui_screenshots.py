"""Screenshots of the main window for docs/screenshots/ (the README's and design.md's): a
real conversation with the bundled default model (its recommended sampling) — a reply held
to a JSON schema in the sidebar, then a question the model answers by calling the
Calculator, and a code block — at 800x500, 1024x700 and 1440x900, in light and dark.
Offscreen, no display needed; a few minutes on a laptop CPU.

    python benchmarks/gui_screenshots.py [--out docs/screenshots] [--seed N]

The replies are sampled with fixed seeds, so the pictures repeat from run to run; an answer
that gets the arithmetic wrong is never published (the next seed is tried). The run writes
`screenshots.json` beside the PNGs: each file's SHA-256, what the chat said, and the
fingerprint of the window's code (`views_fingerprint`). tests/test_docs_screenshots.py fails
when the window's code changed since, so the pictures cannot go stale unnoticed.

The PNGs are written with a 256-colour palette to keep them small.
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
SEED = 3  # the first seed tried
SEEDS_TRIED = 20  # seeds tried for right answers before the run gives up
ARITHMETIC = ("Calculate 17*23.", "391")  # the question, the right answer
CODE = ("Write a Python function that adds two numbers, in a code block.", 90)  # and tokens
MANIFEST = "screenshots.json"
# What the screenshots show of the code: the window's views and the words they use.
VIEW_SOURCES = ("app/views", "app/tools.py", "app/words.py")


def views_fingerprint(root: Path = REPO) -> str:
    """A hash of the window's code (VIEW_SOURCES): when it changes, the screenshots may
    no longer show the window as it is."""
    digest = hashlib.sha256()
    for name in VIEW_SOURCES:
        base = root / name
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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

    said = _shown_chat(app, window, args.seed)
    settings = ChatSettings()  # the panel as a user finds it: seed "Random"
    store.set_chat_settings(_open_id(window), settings)
    window.settings_panel.set_settings(settings)

    args.out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
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
            written[path.name] = file_digest(path)
            print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    manifest = {
        "made_by": "python benchmarks/gui_screenshots.py",
        "views": views_fingerprint(),
        "files": written,
        "chat": said,
    }
    (args.out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    theme.apply_appearance("system")
    window.close()
    bridge.close()
    store.close()
    return 0


def _answered_after_tool(window: MainWindow) -> bool:
    """The tool's result is in and the model's answer from it is written."""
    path = window.controller.path()
    roles = [m.role for m in path]
    return "tool" in roles and roles[-1] == "assistant" and not window.controller.busy


def _shown_chat(app: Any, window: MainWindow, first_seed: int) -> list[dict[str, str]]:
    """The shown chat: the model calls the Calculator (the chip says it must), the tool
    runs, and the model answers from its result; then, the tool switched off, a function
    in a code block. A seed whose chat gets either wrong is dropped and the next tried."""
    from dataclasses import replace

    from app.store import ChatSettings

    question, right = ARITHMETIC
    for seed in range(first_seed, first_seed + SEEDS_TRIED):
        window.new_chat()
        conv = window.controller.conversation
        assert conv is not None
        window.store.set_chat_settings(conv.id, ChatSettings(max_tokens=60, seed=seed))
        window.tools_chip_changed(
            replace(conv.tools, builtins=["calculator"], tool_choice="calculator")
        )
        window.send(question)
        _wait(app, lambda: not window.controller.busy)
        calls = window.controller.path()[-1].meta.get("tool_calls") or []
        if calls:
            call = calls[0]
            window.files.run_builtin_tool(call["id"], call["name"], call.get("arguments"))
            _wait(app, lambda: _answered_after_tool(window))
        path = window.controller.path()
        answer = path[-1].content if path and path[-1].role == "assistant" else ""
        results = [m.content for m in path if m.role == "tool"]
        if right in answer and results and right in results[0]:
            window.tools_chip_changed(replace(conv.tools, builtins=[], tool_choice="auto"))
            window.store.set_chat_settings(conv.id, ChatSettings(max_tokens=CODE[1], seed=seed))
            window.send(CODE[0])
            _wait(app, lambda: not window.controller.busy)
            code = window.controller.path()[-1].content
            if "```" in code:
                return [
                    {"role": "user", "text": question},
                    {"role": "tool", "text": results[0]},
                    {"role": "assistant", "text": answer},
                    {"role": "user", "text": CODE[0]},
                    {"role": "assistant", "text": code},
                ]
            print(f"seed {seed}: no code block ({code[:60]!r}); trying the next")
        else:
            print(f"seed {seed}: the answer was not {right} ({answer[:60]!r}); trying the next")
        window.controller.delete_conversation(conv.id)
    raise SystemExit(f"no seed of {SEEDS_TRIED} answered {question!r} with {right}")


if __name__ == "__main__":
    sys.exit(main())
