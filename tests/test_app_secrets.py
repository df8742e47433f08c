"""The server's API key (app/secrets.py): in the system keychain through keyring where there
is one, else in a file only the user can read; never in the conversation database (an older
Corral's key is moved out, leaving no trace in the file), never in diagnostics."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend

from app.secrets import FILE_NAME, SERVER_API_KEY, SERVICE, SecretStore, migrate_setting
from app.store import Store

KEY = "staple-horse-battery-42"


class MemoryKeyring(KeyringBackend):
    """A keyring backend that keeps passwords in memory: keyring's own backend interface,
    standing in for the Keychain or the Secret Service this machine lacks."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.passwords.pop((service, username))


def test_without_a_keychain_the_key_is_a_file_only_the_user_reads(tmp_path: Path) -> None:
    secrets = SecretStore(tmp_path)  # the test session has no keychain (conftest.py)
    assert secrets.keyring is None and "a file only you can read" in secrets.where
    assert secrets.get(SERVER_API_KEY) == ""
    secrets.set(SERVER_API_KEY, KEY)
    path = tmp_path / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert SecretStore(tmp_path).get(SERVER_API_KEY) == KEY
    secrets.set(SERVER_API_KEY, "")
    assert not path.exists() and secrets.get(SERVER_API_KEY) == ""


def test_with_a_keychain_the_key_goes_there_and_nowhere_else(tmp_path: Path) -> None:
    keychain = MemoryKeyring()
    secrets = SecretStore(tmp_path, backend=keychain)
    secrets.set(SERVER_API_KEY, KEY)
    ((service, account),) = keychain.passwords
    assert service == SERVICE and account.startswith(SERVER_API_KEY + "@")
    assert str(tmp_path.resolve()) in account  # one key per data folder
    assert not (tmp_path / FILE_NAME).exists()
    assert SecretStore(tmp_path, backend=keychain).get(SERVER_API_KEY) == KEY
    assert SecretStore(tmp_path / "other", backend=keychain).get(SERVER_API_KEY) == ""
    secrets.set(SERVER_API_KEY, "")
    assert keychain.passwords == {}


def test_an_older_corrals_key_leaves_the_database_without_a_trace(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.set_setting("server_api_key", KEY)  # where Corral kept it before
    store.set_setting("server_port", 8123)
    keychain = MemoryKeyring()
    secrets = SecretStore(tmp_path, backend=keychain)
    migrate_setting(store, secrets, "server_api_key", SERVER_API_KEY)
    assert store.get_setting("server_api_key") is None
    assert store.get_setting("server_port") == 8123
    assert secrets.get(SERVER_API_KEY) == KEY
    files = [p for p in tmp_path.iterdir() if p.name.startswith("corral.sqlite3")]
    assert files and all(KEY.encode() not in p.read_bytes() for p in files)
    store.close()


def test_the_window_keeps_the_key_out_of_the_database_and_diagnostics(
    qtbot, tmp_path: Path, tiny_engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app_helpers import close_window, make_window
    from PySide6.QtWidgets import QApplication

    store = Store.open(tmp_path / "data")
    store.set_setting("server_api_key", KEY)  # an older Corral's
    store.close()
    monkeypatch.setenv("HOME", str(tmp_path))
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    try:
        assert window.store.get_setting("server_api_key") is None  # moved at start
        assert window.server.settings()[2] == KEY
        section = window.server.preferences_section()
        assert section.api_key.text() == KEY
        assert "a file only you can read" in section.api_key.toolTip()
        section.api_key.setText("a-new-key-77")
        section.enabled.setChecked(False)
        window.server.apply(section)
        assert window.core.secrets.get(SERVER_API_KEY) == "a-new-key-77"
        assert window.store.get_setting("server_api_key") is None
        window.actions_by_name["copy_diagnostics"].trigger()
        text = QApplication.clipboard().text()
        assert "a-new-key-77" not in text
        assert "Data folder: ~/data" in text and str(tmp_path) not in text  # home is "~"
    finally:
        close_window(window)
