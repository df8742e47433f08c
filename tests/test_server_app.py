"""The local server inside the app: Preferences → Local server starts it over the window's
Engine, the status bar says where it serves and how many requests are active, and the
Server log lists each request."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import openai
from app_helpers import close_window, make_window, screenshot


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_preferences_start_the_server_and_the_log_shows_requests(qtbot, tmp_path, tiny_engine):
    from app.views.preferences.dialog import PreferencesDialog
    from app.views.server.log import COLUMNS

    window = make_window(qtbot, tmp_path, tiny_engine)
    server = window.server
    try:
        assert not server.status_label.isVisible()
        section = server.preferences_section()
        dialog = PreferencesDialog(
            window.prefs, presets={}, builtin_tools=[], parent=window, sections=[("", section)]
        )
        assert section.parent() is not None  # shown inside the dialog
        port = _free_port()
        section.enabled.setChecked(True)
        section.port.setValue(port)
        section.api_key.setText("app-key")
        server.apply(section)
        dialog.deleteLater()
        url = f"http://127.0.0.1:{port}"
        qtbot.waitUntil(lambda: server.status_label.text() == f"Serving on {url}", timeout=30_000)
        # One Engine for the window and the server: one model, one prompt cache.
        assert server.job._server.engine is window.bridge.engine is tiny_engine
        assert window.store.get_setting("server_enabled") is True
        assert window.store.get_setting("server_port") == port

        client = openai.OpenAI(base_url=url + "/v1", api_key="app-key", max_retries=0)
        model = tiny_engine.snapshot.model.name
        outcome: dict[str, Any] = {}
        opened = threading.Event()
        release = threading.Event()

        def long_stream() -> None:
            stream = client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "go"}],
                max_tokens=400,
                stream=True,
                extra_body={"grammar": {"type": "regex", "value": "[a-z ]{300,}"}},
            )
            next(iter(stream))
            opened.set()
            release.wait(30)
            stream.close()

        worker = threading.Thread(target=long_stream)
        worker.start()
        qtbot.waitUntil(opened.is_set, timeout=30_000)
        qtbot.waitUntil(lambda: "1 active request" in server.status_label.text(), timeout=10_000)
        screenshot(window, "server_serving")
        release.set()
        worker.join(30)

        def plain() -> None:
            reply = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3
            )
            outcome["usage"] = reply.usage

        thread = threading.Thread(target=plain)
        thread.start()
        log = server.log_view
        qtbot.waitUntil(lambda: log.rowCount() >= 2, timeout=30_000)
        thread.join(30)
        cells = {COLUMNS[c]: log.item(log.rowCount() - 1, c).text() for c in range(len(COLUMNS))}
        assert cells["Endpoint"] == "/v1/chat/completions" and cells["Status"] == "200"
        assert cells["Completion"] == "3" and cells["Result"] == "cut"  # the ending, in words
        first = {COLUMNS[c]: log.item(0, c).text() for c in range(len(COLUMNS))}
        assert first["Status"] == "499" and first["Constraint"] == "regex"
        assert server.status_label.text() == f"Serving on {url}"
        # A refused request is logged too, with its status and the reason.
        rows = log.rowCount()
        refused = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
            headers={"Authorization": "Bearer app-key"},
        )
        assert refused.status_code == 404
        qtbot.waitUntil(lambda: log.rowCount() == rows + 1, timeout=10_000)
        cells = {COLUMNS[c]: log.item(rows, c).text() for c in range(len(COLUMNS))}
        assert (
            cells["Status"] == "404" and "'gpt-4o' is not one this server serves" in cells["Result"]
        )
        server.log_dock.show()
        screenshot(window, "server_log")

        server.set_settings(False, port, "app-key")
        assert not server.status_label.isVisible()
    finally:
        server.shutdown()
        close_window(window)


def test_a_busy_port_is_shown_in_the_status_bar(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            window.server.set_settings(True, port, "")
            qtbot.waitUntil(
                lambda: "already in use" in window.server.status_label.text(), timeout=30_000
            )
    finally:
        window.server.shutdown()
        close_window(window)


def test_any_model_name_switch_serves_coding_agents(qtbot, tmp_path, tiny_engine):
    """Preferences → "Answer requests for any model name": an agent asking for its own
    default model (over Anthropic's API here) gets the loaded model, and the log lists it."""
    import anthropic

    from app.views.server.log import COLUMNS

    window = make_window(qtbot, tmp_path, tiny_engine)
    server = window.server
    try:
        port = _free_port()
        section = server.preferences_section()
        assert section.any_model.isChecked() is False
        section.enabled.setChecked(True)
        section.port.setValue(port)
        section.any_model.setChecked(True)
        server.apply(section)
        url = f"http://127.0.0.1:{port}"
        qtbot.waitUntil(lambda: server.status_label.text() == f"Serving on {url}", timeout=30_000)
        assert window.store.get_setting("server_any_model") is True
        assert server.preferences_section().any_model.isChecked()
        agent = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
        reply = agent.messages.create(
            model="claude-from-the-agent", max_tokens=2, messages=[{"role": "user", "content": "x"}]
        )
        assert reply.model == tiny_engine.snapshot.model.name
        log = server.log_view
        qtbot.waitUntil(lambda: log.rowCount() >= 1, timeout=10_000)
        cells = {COLUMNS[c]: log.item(log.rowCount() - 1, c).text() for c in range(len(COLUMNS))}
        assert cells["Endpoint"] == "/v1/messages" and cells["Status"] == "200"
    finally:
        server.shutdown()
        close_window(window)


def test_stored_responses_live_in_the_apps_data_folder(qtbot, tmp_path, tiny_engine):
    """A Responses API reply stored through the app's server is written beside the app's own
    database (its data folder), not into a default folder elsewhere."""
    import openai

    window = make_window(qtbot, tmp_path, tiny_engine)
    server = window.server
    try:
        port = _free_port()
        section = server.preferences_section()
        section.enabled.setChecked(True)
        section.port.setValue(port)
        server.apply(section)
        url = f"http://127.0.0.1:{port}"
        qtbot.waitUntil(lambda: server.status_label.text() == f"Serving on {url}", timeout=30_000)
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        model = tiny_engine.snapshot.model.name
        reply = client.responses.create(model=model, input="x", max_output_tokens=2, store=True)
        folder = Path(window.store.path).parent
        assert (folder / "responses.sqlite3").is_file()
        assert client.responses.retrieve(reply.id).id == reply.id
    finally:
        server.shutdown()
        close_window(window)
