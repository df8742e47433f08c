"""Images kept with conversations (no model): files in the data folder named by their
content, listed in SQLite (migration 4, also on an old database), exported whole, and
deleted with the last chat that uses them; names from a damaged row never reach outside."""

from __future__ import annotations

import base64
import json
import sqlite3

import pytest

from app.store import DB_NAME, NewImage, Store
from app.store.db import MIGRATIONS, SCHEMA_VERSION
from app.store.export import to_json, to_markdown
from engine.files import OutsideFolder
from tests.vision_support import png

RED, BLUE = png(color=(255, 0, 0)), png(color=(0, 0, 255))


def _chat_with(store: Store, *images: tuple[bytes, str]) -> int:
    conv = store.create_conversation()
    store.add_message(
        conv.id, None, "user", "What is this?", images=[NewImage(d, n, "png") for d, n in images]
    )
    return conv.id


def test_a_version_3_database_gains_message_images_and_keeps_its_messages(tmp_path):
    raw = sqlite3.connect(tmp_path / DB_NAME)
    for migration in MIGRATIONS[:3]:
        migration(raw)
    raw.execute("PRAGMA user_version = 3")
    raw.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'old', 0, 0)"
    )
    raw.execute(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, meta,"
        " created_at, visited_at) VALUES (1, 1, NULL, 'user', 'Hi', '{}', 0, 0)"
    )
    raw.commit()
    raw.close()

    store = Store.open(tmp_path)
    assert SCHEMA_VERSION == 4
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == 4
    old = store.message(1)
    assert old is not None and old.content == "Hi" and old.images == []
    reply = store.add_message(1, 1, "user", "and this?", images=[NewImage(RED, "red.png", "png")])
    assert [i.name for i in store.message(reply.id).images] == ["red.png"]
    store.close()


def test_images_are_files_in_the_data_folder_in_order(tmp_path):
    store = Store.open(tmp_path)
    cid = _chat_with(store, (RED, "a.png"), (BLUE, "b.png"))
    (message,) = store.active_path(cid)
    assert [i.name for i in message.images] == ["a.png", "b.png"]
    for image, data in zip(message.images, (RED, BLUE), strict=True):
        assert image.path.parent == tmp_path / "images"
        assert image.path.read_bytes() == data
        assert image.file.startswith(__import__("hashlib").sha256(data).hexdigest())
    store.close()


def test_export_carries_each_image_as_base64(tmp_path):
    store = Store.open(tmp_path)
    cid = _chat_with(store, (RED, "receipt.png"))
    exported = json.loads(json.dumps(to_json(store, cid)))
    (image,) = exported["messages"][0]["images"]
    assert image["name"] == "receipt.png" and image["media_type"] == "image/png"
    assert base64.b64decode(image["data"]) == RED
    assert "*Images: receipt.png*" in to_markdown(store, cid)
    store.close()


def test_deleting_a_chat_deletes_its_images_unless_another_chat_uses_them(tmp_path):
    store = Store.open(tmp_path)
    first = _chat_with(store, (RED, "red.png"), (BLUE, "blue.png"))
    second = _chat_with(store, (RED, "same red.png"))
    red, blue = (i.path for i in store.active_path(first)[0].images)
    assert red == store.active_path(second)[0].images[0].path  # one file for both
    store.delete_conversation(first)
    assert red.exists() and not blue.exists()
    store.delete_conversation(second)
    assert not red.exists()
    assert store.db.execute("SELECT COUNT(*) FROM message_images").fetchone()[0] == 0
    store.close()


def test_a_damaged_row_cannot_point_outside_the_images_folder(tmp_path):
    store = Store.open(tmp_path)
    cid = _chat_with(store, (RED, "red.png"))
    (secret := tmp_path / "secret.txt").write_text("keep me")
    store.db.execute("UPDATE message_images SET file = '../secret.txt'")
    (message,) = store.active_path(cid)
    assert message.images == []
    assert any("left out" in w for w in store.warnings)
    store.delete_conversation(cid)  # must not delete what the row names
    assert secret.read_text() == "keep me"
    with pytest.raises(OutsideFolder):
        store.images.delete("../secret.txt")
    store.close()
