"""Conversations as message trees, app settings and presets, kept in SQLite.

Images sent with a message are files in the data folder's `images/` (app.store.images),
listed in `message_images`; a file is deleted with the last conversation that uses it.

Every message has a parent; editing a message or regenerating a reply adds a sibling, so
old branches stay. A conversation points at its active leaf, and the active path is the
chain from the root to that leaf. Each message remembers when it was last on the active
path, so switching back to a branch returns to where the user left it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from app.store.db import (
    SCHEMA_VERSION,
    DamagedDatabaseError,
    NewerDatabaseError,
    connect,
    set_aside,
)
from app.store.images import ImageFiles
from app.store.records import (
    ChatSettings,
    Conversation,
    Message,
    MessageImage,
    NewImage,
    ToolsConfig,
)
from engine.files import OutsideFolder
from engine.types import TokenLogprob

DB_NAME = "corral.sqlite3"
DEFAULT_TITLE = "New chat"


def _like(query: str) -> str:
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Store:
    """The app's database. Use from one thread (the GUI thread)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.db: sqlite3.Connection = connect(path)
        self.images = ImageFiles(self.path.parent)  # the pictures sent in chats
        # For the user, once: where an unreadable database was moved to, and repairs made.
        self.notice: str | None = None
        self.warnings: list[str] = []
        self.closed = False  # work finishing after the window closed finds nothing to write

    @classmethod
    def open(cls, data_dir: str | Path) -> Store:
        """The store in `data_dir`. A database from a newer Corral, or one SQLite finds
        damaged, is never written to: it is moved aside to a dated name and a new one is
        started; `notice` then says where the old file is. DatabaseBusy if another program
        holds the database locked."""
        path = Path(data_dir) / DB_NAME
        notice = None
        try:
            store = cls(path)
        except NewerDatabaseError as exc:
            moved = set_aside(path, f"newer-v{exc.version}")
            notice = (
                f"Your conversations were saved by a newer version of Corral (database "
                f"version {exc.version}; this version reads up to {SCHEMA_VERSION}). The file "
                f"was not changed: it was moved to\n{moved}\nand Corral starts with an empty "
                f"list. Update Corral and move the file back to\n{path}\nto see them again."
            )
            store = cls(path)
        except DamagedDatabaseError as exc:
            moved = set_aside(path, "damaged")
            notice = (
                f"The conversation database could not be read ({exc}). The file was not "
                f"changed: it was moved to\n{moved}\nand Corral starts with a new, empty one. "
                "Tools such as `sqlite3 .recover` may get conversations back from the old file."
            )
            store = cls(path)
        store.notice = notice
        store.seed_presets()
        return store

    def close(self) -> None:
        self.closed = True
        self.db.close()

    # ---- conversations ----

    def _conversation(self, row: sqlite3.Row) -> Conversation:
        return Conversation(
            id=row["id"],
            title=row["title"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            active_leaf_id=row["active_leaf_id"],
            settings=ChatSettings.from_dict(json.loads(row["settings"])),
            constraint=json.loads(row["constraint_spec"]) if row["constraint_spec"] else None,
            tools=ToolsConfig.from_dict(json.loads(row["tools"])),
        )

    def create_conversation(
        self, title: str = DEFAULT_TITLE, settings: ChatSettings | None = None
    ) -> Conversation:
        now = time.time()
        cur = self.db.execute(
            "INSERT INTO conversations (title, created_at, updated_at, settings) VALUES (?,?,?,?)",
            (title, now, now, json.dumps((settings or ChatSettings()).to_dict())),
        )
        conversation = self.conversation(_row_id(cur))
        assert conversation is not None
        return conversation

    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self.db.execute(
            "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return self._conversation(row) if row else None

    def conversations(self, query: str = "") -> list[Conversation]:
        """All conversations, most recently changed first; `query` matches title or content."""
        if not query.strip():
            rows = self.db.execute(
                "SELECT * FROM conversations ORDER BY updated_at DESC, id DESC"
            ).fetchall()
        else:
            pattern = _like(query.strip())
            rows = self.db.execute(
                "SELECT * FROM conversations c WHERE c.title LIKE ?1 ESCAPE '\\' OR EXISTS ("
                " SELECT 1 FROM messages m WHERE m.conversation_id = c.id"
                " AND m.content LIKE ?1 ESCAPE '\\')"
                " ORDER BY updated_at DESC, id DESC",
                (pattern,),
            ).fetchall()
        return [self._conversation(r) for r in rows]

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self.db.execute(
            "UPDATE conversations SET title = ? WHERE id = ?",
            (title.strip() or DEFAULT_TITLE, conversation_id),
        )

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete the conversation, and each image file no other message still uses."""
        files = [
            r["file"]
            for r in self.db.execute(
                "SELECT DISTINCT i.file FROM message_images i JOIN messages m"
                " ON m.id = i.message_id WHERE m.conversation_id = ?",
                (conversation_id,),
            ).fetchall()
        ]
        self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        for file in files:
            used = self.db.execute(
                "SELECT 1 FROM message_images WHERE file = ? LIMIT 1", (file,)
            ).fetchone()
            if used is None:
                try:
                    self.images.delete(file)
                except (OSError, OutsideFolder) as exc:  # the chat is gone all the same
                    logging.getLogger(__name__).warning("image %s not deleted: %s", file, exc)

    def set_chat_settings(self, conversation_id: int, settings: ChatSettings) -> None:
        self.db.execute(
            "UPDATE conversations SET settings = ? WHERE id = ?",
            (json.dumps(settings.to_dict()), conversation_id),
        )

    def set_constraint(self, conversation_id: int, constraint: dict[str, Any] | None) -> None:
        self.db.execute(
            "UPDATE conversations SET constraint_spec = ? WHERE id = ?",
            (json.dumps(constraint) if constraint else None, conversation_id),
        )

    def set_tools(self, conversation_id: int, tools: ToolsConfig) -> None:
        self.db.execute(
            "UPDATE conversations SET tools = ? WHERE id = ?",
            (json.dumps(tools.to_dict()), conversation_id),
        )

    # ---- messages ----

    def _message(self, row: sqlite3.Row) -> Message:
        return Message(
            id=row["id"],
            conversation_id=row["conversation_id"],
            parent_id=row["parent_id"],
            role=row["role"],
            content=row["content"],
            meta=json.loads(row["meta"]),
            created_at=row["created_at"],
            images=self._message_images(row["id"]),
        )

    def _message_images(self, message_id: int) -> list[MessageImage]:
        out = []
        for r in self.db.execute(
            "SELECT file, name FROM message_images WHERE message_id = ? ORDER BY position",
            (message_id,),
        ).fetchall():
            try:
                out.append(MessageImage(r["file"], r["name"], self.images.path(r["file"])))
            except OutsideFolder as exc:  # a damaged row: the message shows without it
                self.warnings.append(f"Message {message_id}: an image was left out ({exc})")
        return out

    def image_bytes(self, image: MessageImage) -> bytes:
        """The stored bytes of a sent image (OSError if its file is gone)."""
        return self.images.read(image.file)

    def message(self, message_id: int) -> Message | None:
        row = self.db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        return self._message(row) if row else None

    def add_message(
        self,
        conversation_id: int,
        parent_id: int | None,
        role: str,
        content: str,
        meta: dict[str, Any] | None = None,
        images: list[NewImage] | None = None,
    ) -> Message:
        """Add a message under `parent_id` (None: a new root) and make it the active leaf;
        its `images` are written to the data folder first (OSError if they cannot be)."""
        now = time.time()
        files = [(self.images.save(i.data, i.suffix), i.name) for i in images or []]
        self.db.execute("BEGIN IMMEDIATE")
        try:
            cur = self.db.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, meta,"
                " created_at, visited_at) VALUES (?,?,?,?,?,?,?)",
                (conversation_id, parent_id, role, content, json.dumps(meta or {}), now, now),
            )
            message_id = _row_id(cur)
            self.db.executemany(
                "INSERT INTO message_images (message_id, position, file, name) VALUES (?,?,?,?)",
                [(message_id, n, file, name) for n, (file, name) in enumerate(files)],
            )
            self._set_leaf(conversation_id, message_id, now)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        message = self.message(message_id)
        assert message is not None
        return message

    def set_token_logprobs(self, message_id: int, tokens: list[TokenLogprob]) -> None:
        """Keep a reply's recorded tokens (its token view) with its message."""
        data = [_compact(t.to_dict()) for t in tokens]
        self.db.execute(
            "INSERT OR REPLACE INTO token_logprobs (message_id, tokens) VALUES (?, ?)",
            (message_id, json.dumps(data, ensure_ascii=False, separators=(",", ":"))),
        )

    def token_logprobs(self, message_id: int) -> list[TokenLogprob] | None:
        """A reply's recorded tokens, or None if none were recorded (or they cannot be read)."""
        row = self.db.execute(
            "SELECT tokens FROM token_logprobs WHERE message_id = ?", (message_id,)
        ).fetchone()
        if row is None:
            return None
        try:
            return [TokenLogprob.from_dict(t) for t in json.loads(row["tokens"])]
        except (ValueError, TypeError, KeyError) as exc:
            logging.getLogger(__name__).warning(
                "message %d: recorded tokens cannot be read (%s)", message_id, exc
            )
            return None

    def children(self, conversation_id: int, parent_id: int | None) -> list[Message]:
        rows = self.db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS ?"
            " ORDER BY created_at, id",
            (conversation_id, parent_id),
        ).fetchall()
        return [self._message(r) for r in rows]

    def siblings(self, message: Message) -> list[Message]:
        """The alternatives at `message`'s place in the tree (itself included), oldest first."""
        return self.children(message.conversation_id, message.parent_id)

    def active_path(self, conversation_id: int) -> list[Message]:
        """The messages from the root to the active leaf.

        A damaged row whose parent_id leads back to itself (a cycle) would make the path
        endless: the walk stops there, and the cycle is broken (that message becomes a
        root of its own branch) with a warning in `warnings`."""
        conv = self.conversation(conversation_id)
        if conv is None or conv.active_leaf_id is None:
            return []
        # UNION (not UNION ALL) drops repeated rows, so a cycle ends the recursion.
        rows = self.db.execute(
            "WITH RECURSIVE path(id) AS ("
            " SELECT ? UNION SELECT m.parent_id FROM messages m JOIN path ON m.id = path.id"
            " WHERE m.parent_id IS NOT NULL AND m.conversation_id = ?)"
            " SELECT messages.* FROM path JOIN messages ON messages.id = path.id"
            " WHERE messages.conversation_id = ?",
            (conv.active_leaf_id, conversation_id, conversation_id),
        ).fetchall()
        by_id = {row["id"]: self._message(row) for row in rows}
        chain: list[Message] = []
        seen: set[int] = set()
        node = by_id.get(conv.active_leaf_id)
        while node is not None:
            chain.append(node)
            seen.add(node.id)
            if node.parent_id in seen:
                self._break_cycle(node)
                break
            node = by_id.get(node.parent_id) if node.parent_id is not None else None
        return chain[::-1]

    def _break_cycle(self, message: Message) -> None:
        """Make `message`, whose parent is its own descendant, the root of its branch."""
        self.db.execute("UPDATE messages SET parent_id = NULL WHERE id = ?", (message.id,))
        message.parent_id = None
        warning = (
            f"Conversation {message.conversation_id}: message {message.id} was recorded as "
            "its own ancestor (a damaged record); it now starts its branch"
        )
        self.warnings.append(warning)
        logging.getLogger(__name__).warning(warning)

    def select_branch(self, message_id: int) -> None:
        """Make the branch through `message_id` active, down to its last visited leaf."""
        message = self.message(message_id)
        if message is None:
            return
        leaf = message.id
        seen = {leaf}
        while True:
            row = self.db.execute(
                "SELECT id FROM messages WHERE parent_id = ? ORDER BY visited_at DESC, id DESC"
                " LIMIT 1",
                (leaf,),
            ).fetchone()
            if row is None or row["id"] in seen:  # a damaged tree must not loop
                break
            leaf = row["id"]
            seen.add(leaf)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._set_leaf(message.conversation_id, leaf, time.time())
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def set_active_leaf(self, conversation_id: int, message_id: int | None) -> None:
        """Point the conversation at `message_id` (None: an empty path, e.g. before a new root)."""
        if message_id is None:
            self.db.execute(
                "UPDATE conversations SET active_leaf_id = NULL WHERE id = ?", (conversation_id,)
            )
        else:
            self.select_branch(message_id)

    def _set_leaf(self, conversation_id: int, leaf_id: int, now: float) -> None:
        self.db.execute(
            "WITH RECURSIVE path(id, parent_id) AS ("
            " SELECT id, parent_id FROM messages WHERE id = ?"
            " UNION SELECT m.id, m.parent_id FROM messages m"  # UNION: a cycle ends it
            " JOIN path ON m.id = path.parent_id)"
            " UPDATE messages SET visited_at = ? WHERE id IN (SELECT id FROM path)",
            (leaf_id, now),
        )
        self.db.execute(
            "UPDATE conversations SET active_leaf_id = ?, updated_at = ? WHERE id = ?",
            (leaf_id, now, conversation_id),
        )

    # ---- app settings ----

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(row["value"]) if row else default

    def forget_setting(self, key: str) -> None:
        """Delete a setting so its value leaves no trace in the files (a secret an older
        Corral kept here): its page overwritten, the write-ahead log emptied."""
        before = self.db.execute("PRAGMA secure_delete").fetchone()[0]
        self.db.execute("PRAGMA secure_delete = ON")
        try:
            self.db.execute("DELETE FROM settings WHERE key = ?", (key,))
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.db.execute(f"PRAGMA secure_delete = {int(before)}")

    def set_setting(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )

    # ---- presets ----

    def presets(self) -> dict[str, str]:
        rows = self.db.execute("SELECT name, system_prompt FROM presets ORDER BY name").fetchall()
        return {r["name"]: r["system_prompt"] for r in rows}

    def save_preset(self, name: str, system_prompt: str) -> None:
        self.db.execute(
            "INSERT INTO presets (name, system_prompt) VALUES (?, ?)"
            " ON CONFLICT(name) DO UPDATE SET system_prompt = excluded.system_prompt",
            (name, system_prompt),
        )

    def delete_preset(self, name: str) -> None:
        self.db.execute("DELETE FROM presets WHERE name = ?", (name,))

    def seed_presets(self) -> None:
        """Add the bundled presets once, on first run (a user may delete them later)."""
        if self.get_setting("presets_seeded"):
            return
        from app.paths import resources_dir

        for path in sorted((resources_dir() / "presets").glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.save_preset(str(data["name"]), str(data["system_prompt"]))
            except (OSError, ValueError, KeyError):
                continue  # a damaged bundled preset must not stop the app
        self.set_setting("presets_seeded", True)


def _compact(token: dict[str, Any]) -> dict[str, Any]:
    """A recorded token as stored: figures to 5 decimals, no bytes (the app shows text)."""
    out = {k: v for k, v in token.items() if k != "bytes"}
    for key in ("logprob", "model_logprob"):
        if isinstance(out.get(key), float):
            out[key] = round(out[key], 5)
    out["top"] = [
        {
            "token": a["token"],
            "text": a["text"],
            "logprob": round(a["logprob"], 5),
            "allowed": a["allowed"],
        }
        for a in token["top"]
    ]
    return out


def _row_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just added."""
    assert cursor.lastrowid is not None
    return cursor.lastrowid
