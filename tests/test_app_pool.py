"""The app over a model pool: Preferences → Server lists the models the server offers,
loaded or not, with Load, Unload and Pin, their memory and the limit; and the chat's model
is the server's: a model the chat loaded answers the server's requests, never a second
copy."""

from __future__ import annotations

import socket
from pathlib import Path

import openai
import pytest
from app_helpers import close_window, screenshot

from tests.pool_support import make_pool


@pytest.fixture
def pool(tiny_model_dir: Path, thinking_model_dir: Path):
    pool = make_pool(tiny_model_dir, thinking_model_dir)
    yield pool
    pool.close()


def _rows(panel) -> list[list[str]]:
    table = panel.table
    return [
        [table.item(r, c).text() for c in range(table.columnCount())]
        for r in range(table.rowCount())
    ]


def test_the_panel_lists_loads_unloads_and_pins_the_pools_models(
    qtbot, tmp_path, pool, tiny_model_dir, thinking_model_dir
) -> None:
    from app.core import MODEL_MEMORY_SETTING
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store
    from app.views.server.pool_panel import PoolPanel

    store = Store.open(tmp_path)
    bridge = EngineBridge(pool)
    panel = PoolPanel(bridge, store)
    qtbot.addWidget(panel)
    panel.show()
    tiny, thinking = tiny_model_dir.name, thinking_model_dir.name
    assert [row[:3] for row in _rows(panel)] == [
        [f"{tiny} (chat)", "chat", "Not loaded"],
        [thinking, "chat", "Not loaded"],
    ]
    assert not panel.load.isEnabled()  # nothing selected
    panel.table.selectRow(1)
    assert panel.load.isEnabled() and not panel.unload.isEnabled()
    panel.load.click()
    qtbot.waitUntil(lambda: _rows(panel)[1][2] == "Loaded", timeout=60_000)
    assert _rows(panel)[1][3] != "—" and panel.unload.isEnabled()
    assert "Loaded models hold" in panel.usage.text()
    panel.pin.click()
    qtbot.waitUntil(lambda: _rows(panel)[1][4] == "Pinned", timeout=10_000)
    assert panel.pin.text() == "Unpin"
    screenshot(panel, "pool_panel")
    panel.pin.click()
    qtbot.waitUntil(lambda: _rows(panel)[1][4] == "", timeout=10_000)
    panel.unload.click()
    qtbot.waitUntil(lambda: _rows(panel)[1][2] == "Not loaded", timeout=60_000)
    panel.limit.setValue(3.0)
    assert pool.memory_limit_bytes == 3 << 30 and store.get_setting(MODEL_MEMORY_SETTING) == 3.0
    qtbot.waitUntil(lambda: "of 3.0" in panel.usage.text(), timeout=10_000)
    panel.limit.setValue(0.0)  # automatic: the machine's budget
    assert pool.memory_limit_bytes > 3 << 30
    panel.close()
    store.close()


def test_the_chats_model_is_the_one_the_server_serves(
    qtbot, tmp_path, tiny_model_dir, thinking_model_dir, caplog
) -> None:
    import logging

    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store

    caplog.set_level(logging.INFO, logger="engine.pool")
    pool = make_pool(thinking_model_dir)  # another model is listed already
    bridge = EngineBridge(pool)
    window = build_window(Store.open(tmp_path), bridge)
    qtbot.addWidget(window)
    window.show()
    try:
        window.models.load(str(tiny_model_dir))  # the chat's model picker
        qtbot.waitUntil(lambda: bridge.model_info is not None, timeout=60_000)
        tiny = tiny_model_dir.name
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        window.server.set_settings(True, port, "")
        qtbot.waitUntil(lambda: window.server.job.running, timeout=30_000)
        assert window.server.job._server.engine is pool  # one pool for both
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        listed = [m.id for m in client.models.list().data]
        assert listed == [thinking_model_dir.name, tiny]
        loaded = pool.snapshot.pool.find(tiny)  # type: ignore[union-attr]
        reply = client.chat.completions.create(
            model=tiny, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
        assert reply.model == tiny
        after = pool.snapshot.pool.find(tiny)  # type: ignore[union-attr]
        # the chat's copy answered: loaded once, never unloaded or loaded again
        assert loaded is not None and after is not None and after.state == "loaded"
        loads = [r for r in caplog.records if r.getMessage().startswith(f"loading model {tiny}")]
        assert len(loads) == 1
        assert [m.id for m in pool.snapshot.pool.models].count(tiny) == 1  # type: ignore[union-attr]
        # the chat's replies go to the same model, the pool's default
        assert pool.snapshot.find_model(None).id == tiny  # type: ignore[union-attr]
        assert pool.snapshot.pool.find(thinking_model_dir.name).state == "unloaded"  # type: ignore[union-attr]
    finally:
        window.server.shutdown()
        close_window(window)
        pool.close()
