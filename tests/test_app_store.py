"""The app's SQLite store: schema versioning, message trees and branches, search, presets,
export, and durability across processes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.store import DB_NAME, ChatSettings, Store, ToolsConfig
from app.store.db import MIGRATIONS, SCHEMA_VERSION, connect
from app.store.export import to_json, to_markdown

REPO = Path(__file__).resolve().parents[1]


def test_schema_is_versioned_and_in_wal_mode(tmp_path):
    store = Store.open(tmp_path)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()
    raw = sqlite3.connect(tmp_path / DB_NAME)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(RuntimeError, match="newer than this app"):
        connect(tmp_path / DB_NAME)


def test_a_version_2_database_keeps_its_recorded_replies_under_the_logprobs_key(tmp_path):
    """Schema 2 counted a reply's recorded tokens under meta["inspect"]; opening it renames
    the key to "logprobs" in every row (so the reply still offers its token view) and
    leaves other meta, and a row whose meta is not JSON, as they were."""
    raw = sqlite3.connect(tmp_path / DB_NAME)
    for migration in MIGRATIONS[:2]:
        migration(raw)
    raw.execute("PRAGMA user_version = 2")
    raw.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'old', 0, 0)"
    )
    rows = [
        (1, "user", "Hi", "{}"),
        (
            2,
            "assistant",
            "Hello",
            json.dumps({"inspect": 3, "model": "tiny", "stop_reason": "stop"}),
        ),
        (3, "assistant", "Free", json.dumps({"model": "tiny"})),
        (4, "assistant", "Broken", '{"inspect": 2'),
    ]
    for message_id, role, content, meta in rows:
        raw.execute(
            "INSERT INTO messages (id, conversation_id, parent_id, role, content, meta,"
            " created_at, visited_at) VALUES (?, 1, NULL, ?, ?, ?, 0, 0)",
            (message_id, role, content, meta),
        )
    raw.execute("INSERT INTO token_logprobs (message_id, tokens) VALUES (2, '[]')")
    raw.commit()
    raw.close()

    store = Store.open(tmp_path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    metas = dict(store.db.execute("SELECT id, meta FROM messages").fetchall())
    assert json.loads(metas[2]) == {"logprobs": 3, "model": "tiny", "stop_reason": "stop"}
    assert json.loads(metas[3]) == {"model": "tiny"}
    assert metas[4] == '{"inspect": 2'  # not JSON: left for the store's repair to report
    assert store.message(2).meta["logprobs"] == 3
    store.close()


def test_branches_keep_every_version_and_remember_where_you_were(tmp_path):
    store = Store.open(tmp_path)
    conv = store.create_conversation()
    q1 = store.add_message(conv.id, None, "user", "q1")
    a1 = store.add_message(conv.id, q1.id, "assistant", "a1")
    q2 = store.add_message(conv.id, a1.id, "user", "q2")
    store.add_message(conv.id, q2.id, "assistant", "a2")
    a1b = store.add_message(conv.id, q1.id, "assistant", "a1 again")  # regenerate
    assert [m.content for m in store.active_path(conv.id)] == ["q1", "a1 again"]
    assert [m.id for m in store.siblings(a1b)] == [a1.id, a1b.id]
    store.select_branch(a1.id)  # back to the first reply: down to its last leaf
    assert [m.content for m in store.active_path(conv.id)] == ["q1", "a1", "q2", "a2"]
    q1b = store.add_message(conv.id, None, "user", "q1 edited")  # edit of a root message
    assert [m.content for m in store.active_path(conv.id)] == ["q1 edited"]
    assert len(store.siblings(q1b)) == 2
    store.select_branch(q1.id)
    assert store.active_path(conv.id)[-1].content == "a2"


def test_search_matches_titles_and_content(tmp_path):
    store = Store.open(tmp_path)
    a = store.create_conversation("Trip to Lyon")
    b = store.create_conversation("Other")
    store.add_message(b.id, None, "user", "what is 50% of a pangolin_ egg?")
    assert [c.id for c in store.conversations("lyon")] == [a.id]
    assert [c.id for c in store.conversations("PANGOLIN")] == [b.id]
    assert [c.id for c in store.conversations("50%")] == [b.id]  # LIKE wildcards escaped
    assert store.conversations("n_e") == []
    assert {c.id for c in store.conversations("")} == {a.id, b.id}


def test_settings_presets_constraint_and_tools_round_trip(tmp_path):
    store = Store.open(tmp_path)
    assert "Helpful assistant" in store.presets()  # bundled presets seeded once
    store.delete_preset("Helpful assistant")
    store.seed_presets()
    assert "Helpful assistant" not in store.presets()
    conv = store.create_conversation()
    settings = ChatSettings(system_prompt="Be brief", temperature=0.2, top_k=40, seed=7)
    store.set_chat_settings(conv.id, settings)
    store.set_constraint(conv.id, {"kind": "regex", "source": "yes|no", "name": "yn"})
    store.set_tools(conv.id, ToolsConfig(builtins=["calculator"], tool_choice="required"))
    again = Store.open(tmp_path).conversation(conv.id)
    assert again.settings == settings
    assert again.settings.to_sampling().top_k == 40
    assert again.constraint["source"] == "yes|no"
    assert again.tools.tool_choice == "required"


def test_export_markdown_and_json(tmp_path):
    store = Store.open(tmp_path)
    conv = store.create_conversation("Export me")
    store.set_chat_settings(conv.id, ChatSettings(system_prompt="sys"))
    q = store.add_message(conv.id, None, "user", "What's the weather?")
    a = store.add_message(
        conv.id,
        q.id,
        "assistant",
        "",
        {
            "constraint": "tools: required (hermes)",
            "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
    )
    store.add_message(
        conv.id, a.id, "tool", "rainy", {"tool_call_id": "call_1", "name": "get_weather"}
    )
    md = to_markdown(store, conv.id)
    assert md.startswith("# Export me") and "## System" in md
    assert "(constrained: tools: required (hermes))" in md and '"city": "Oslo"' in md
    assert "## Tool result: get_weather" in md and "rainy" in md
    data = json.loads(json.dumps(to_json(store, conv.id)))
    assert data["format"] == "corral.conversation/1"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool"]
    assert data["active_path"] == [m["id"] for m in data["messages"]]


def test_a_killed_writer_loses_nothing_it_committed(tmp_path):
    """Another process writes a conversation and is killed; a new process reads it all."""
    writer = textwrap.dedent(f"""
        import os, signal
        from app.store import Store
        store = Store.open({str(tmp_path)!r})
        conv = store.create_conversation("Survivor")
        parent = None
        for i in range(20):
            parent = store.add_message(conv.id, parent, "user" if i % 2 == 0 else "assistant",
                                       f"message {{i}}").id
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", writer], cwd=REPO, capture_output=True)
    assert proc.returncode == -9
    store = Store.open(tmp_path)
    conv = store.conversations("Survivor")[0]
    assert [m.content for m in store.active_path(conv.id)] == [f"message {i}" for i in range(20)]
