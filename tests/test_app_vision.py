"""Pictures in the window, on the tiny vision model: dropped on the composer and sent with a
JSON schema chip, the reply validates and a follow-up reuses the image's prefix; the
thumbnail survives a restart and opens full size; export carries it; deleting the chat
deletes the file; bad pictures are refused at once with the engine's reason (the draft
stays); pasted pictures attach; a text-only model disables the paperclip and refuses."""

from __future__ import annotations

import base64
import json

import jsonschema
from app_helpers import close_window, drop_files, make_window, screenshot, set_sampling, wait_idle
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage

from tests.vision_support import BAD_IMAGES, png

RECEIPT = {
    "type": "object",
    "properties": {
        "shop": {"type": "string", "maxLength": 12},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["shop", "total", "paid"],
    "additionalProperties": False,
}
PICTURE = png((80, 60), (10, 120, 240))


def _send(qtbot, window, text: str):
    window.composer.edit.setPlainText(text)
    window.composer.button.click()
    wait_idle(qtbot, window)
    return window.chat.message_widgets()[-1]


def _pending(window) -> int:
    return len(window.composer.pending_images())


def test_dropped_image_with_a_schema_gives_valid_json_and_is_kept(qtbot, tmp_path, vision_engine):
    window = make_window(qtbot, tmp_path, vision_engine)
    set_sampling(window, temperature=0.0, max_tokens=60)
    assert window.composer.attach_button.isEnabled()
    image, schema = tmp_path / "receipt.png", tmp_path / "receipt.json"
    image.write_bytes(PICTURE)
    schema.write_text(json.dumps(RECEIPT))
    assert drop_files(window.composer.edit.viewport(), [image])
    qtbot.waitUntil(lambda: _pending(window) == 1, timeout=10_000)
    assert window.composer.attachments.isVisible()
    assert window.controller.conversation.constraint is None  # a picture, not a constraint
    assert drop_files(window.composer.edit.viewport(), [schema])
    qtbot.waitUntil(window.constraint_bar.chip.isVisible, timeout=10_000)
    screenshot(window, "image_attached")

    reply = _send(qtbot, window, "Extract this receipt.")
    assert _pending(window) == 0 and window.composer.text() == ""
    jsonschema.validate(json.loads(reply.message.content), RECEIPT)
    question = window.chat.message_widgets()[-2]
    assert [t.name for t in question.images.thumbs] == ["receipt.png"]
    stored = question.message.images[0].path
    assert stored.parent == tmp_path / "images" and stored.read_bytes() == PICTURE
    first = reply.message.meta["stats"]

    # a follow-up about the same picture reuses its prefix (the image was not encoded again)
    window.files.remove_constraint()
    follow = _send(qtbot, window, "What colour is it?")
    assert follow.message.meta.get("error") is None
    assert follow.message.meta["stats"]["cached_tokens"] >= first["prompt_tokens"] - 1
    cid = window.controller.conversation_id
    close_window(window)

    # a new window over the same data folder shows the thumbnail, full size on a click
    window = make_window(qtbot, tmp_path, vision_engine)
    question = window.chat.message_widgets()[0]
    (thumb,) = question.images.thumbs
    assert not thumb.pixmap().isNull()
    qtbot.mouseClick(thumb, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: thumb.dialog is not None and thumb.dialog.isVisible(), timeout=5_000)
    assert thumb.dialog.picture.pixmap().size().toTuple() == (80, 60)
    thumb.dialog.close()
    screenshot(window, "image_in_message")

    from app.store.export import to_json

    exported = to_json(window.store, cid)
    (image_entry,) = [i for m in exported["messages"] for i in m.get("images", [])]
    assert base64.b64decode(image_entry["data"]) == PICTURE
    window.controller.delete_conversation(cid)
    assert not stored.exists()
    close_window(window)


def test_bad_images_are_refused_at_once_and_the_draft_stays(qtbot, tmp_path, vision_engine):
    window = make_window(qtbot, tmp_path, vision_engine)
    window.composer.edit.setPlainText("my draft")
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(BAD_IMAGES["truncated"][0])
    text = tmp_path / "notes.png"
    text.write_text("a text file, not a picture\n" * 5)
    good = tmp_path / "good.png"
    good.write_bytes(PICTURE)
    drop_files(window.composer.edit.viewport(), [truncated, text, good])
    notice = window.notice.label
    qtbot.waitUntil(lambda: "not attached" in notice.text(), timeout=10_000)
    assert "truncated.png: the image is corrupt or truncated" in notice.text()
    assert "notes.png: not an image Corral can read" in notice.text()
    assert [a.name for a in window.composer.pending_images()] == ["good.png"]  # the good one
    assert window.composer.text() == "my draft"
    assert window.controller.conversation.constraint is None
    screenshot(window, "image_refused")
    close_window(window)


def test_a_pasted_picture_is_attached(qtbot, tmp_path, vision_engine):
    window = make_window(qtbot, tmp_path, vision_engine)
    window.composer.edit.setPlainText("draft")
    picture = QImage(40, 30, QImage.Format.Format_RGB32)
    picture.fill(Qt.GlobalColor.darkGreen)
    QGuiApplication.clipboard().setImage(picture)
    window.composer.edit.paste()
    qtbot.waitUntil(lambda: _pending(window) == 1, timeout=10_000)
    (pasted,) = window.composer.pending_images()
    assert (pasted.width, pasted.height, pasted.suffix) == (40, 30, "png")
    assert window.composer.text() == "draft"
    window.composer.attachments.thumbs[0].remove_button.click()
    assert _pending(window) == 0
    close_window(window)


def test_a_text_only_model_offers_documents_and_refuses_images(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    button = window.composer.attach_button  # documents: any model reads them
    assert button.isEnabled() and window.actions_by_name["attach"].isEnabled()
    assert button.toolTip().startswith("Attach documents (Ctrl+Shift+A)")
    assert "does not read images" in button.toolTip()
    assert window.composer.edit.placeholderText() == "Ask anything, or drop a document here"
    image = tmp_path / "photo.png"
    image.write_bytes(PICTURE)
    drop_files(window.composer.edit.viewport(), [image])
    assert "does not read images" in window.notice.label.text() and _pending(window) == 0

    # a message with a picture (sent before switching models) gets the engine's error
    from app.chat.attachments import attachment_from_bytes

    set_sampling(window, max_tokens=4)
    assert window.controller.send("What is this?", [attachment_from_bytes(PICTURE, "a.png")])
    wait_idle(qtbot, window)
    question = window.chat.message_widgets()[-1]
    assert question.note is not None and "does not read images" in question.note.text
    close_window(window)
