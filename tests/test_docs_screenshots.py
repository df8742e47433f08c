"""The docs' screenshots are the window as it is: every picture README.md and docs/ show is
one `benchmarks/gui_screenshots.py` made (listed with its SHA-256 in screenshots.json), the
chat they show answers right, and the window opened today on the chats they were taken of
shows what each picture shows (the same words, buttons, menus and status bar at the same
size). When the window changes what it shows, this fails until the script is run again.
No token is generated here: the chats are the ones saved with the pictures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app_helpers import close_window

from benchmarks.gui_screenshots import (
    APPEARANCES,
    ARITHMETIC,
    CODE,
    MANIFEST,
    SIZES,
    arrange,
    file_digest,
    open_shown,
    picture_name,
    scene,
)

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "docs" / "screenshots"
RERUN = (
    "run `python benchmarks/gui_screenshots.py --keep-chats` (the same chats, new pictures; "
    "without --keep-chats, new chats too) and commit docs/screenshots/"
)


def _manifest() -> dict:
    return json.loads((FOLDER / MANIFEST).read_text(encoding="utf-8"))


def _shown() -> set[str]:
    """The screenshots the docs show (by file name)."""
    names: set[str] = set()
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        names |= set(re.findall(r"screenshots/([\w.-]+\.png)", text))
    return names


def test_every_screenshot_shown_was_made_by_the_script() -> None:
    manifest = _manifest()
    shown = _shown()
    assert shown, "the README shows no screenshot"
    for name in sorted(shown | set(manifest["files"])):
        path = FOLDER / name
        assert path.is_file(), f"{name} is missing: {RERUN}"
        assert manifest["files"].get(name) == file_digest(path), f"{name} changed by hand: {RERUN}"
    made = {picture_name(size, look) for size in SIZES for look in APPEARANCES}
    assert set(manifest["files"]) == made == set(manifest["scenes"]), RERUN


def test_the_chat_they_show_answers_right() -> None:
    question, right = ARITHMETIC
    manifest = _manifest()
    chat = manifest["chat"]
    assert chat[0] == {"role": "user", "text": question}
    assert right in chat[1]["text"] and right in chat[2]["text"]  # the tool's and the model's
    assert chat[3] == {"role": "user", "text": CODE[0]} and "```" in chat[4]["text"]
    # ...and it is the chat the pictures were taken of (the newest, open in the window)
    shown = manifest["chats"][-1]["messages"]
    said = {(m["role"], m["content"]) for m in shown}
    assert all((turn["role"], turn["text"]) in said for turn in chat)


def test_the_window_shows_what_the_screenshots_show(qtbot, tmp_path, default_engine) -> None:
    from app.jobs.engine_bridge import EngineBridge
    from app.views.common import theme

    manifest = _manifest()
    window = open_shown(tmp_path, manifest["chats"], EngineBridge(default_engine))
    qtbot.addWidget(window)
    try:
        for look in APPEARANCES:
            for size in SIZES:
                name = picture_name(size, look)
                arrange(window, size, look)
                now, then = scene(window), manifest["scenes"][name]
                gone = sorted(set(then) - set(now))
                new = sorted(set(now) - set(then))
                assert now == then, (
                    f"{name} no longer shows the window: it shows {gone} that the window no "
                    f"longer does, and the window now shows {new}; {RERUN}"
                )
    finally:
        theme.apply_appearance("system")
        close_window(window)
