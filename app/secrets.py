"""Where Corral keeps its secrets (the local server's API key): the system's keychain through
`keyring` — the Keychain on macOS, the Secret Service (GNOME Keyring, KWallet) on a Linux
desktop that has one — and, where there is none, a file in the data folder that only the
user can read (mode 0600). Never the conversation database: a key stored there by an older
Corral is moved out the first time it is read (`migrate_setting`). The key never reaches
the log: whoever reads it tells engine.logs to mask it."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from engine.logs import remember_secrets

log = logging.getLogger(__name__)

SERVICE = "Corral"  # the keychain item's service, the same for every data folder's key
SERVER_API_KEY = "server-api-key"
FILE_NAME = "secrets.json"  # the fallback file, in the data folder
# Keyring backends that store nothing (keyring's "no keychain here" stand-ins).
_NOT_STORES = ("keyring.backends.fail", "keyring.backends.null", "keyring.backends.chainer")


def _system_keyring() -> Any:
    """keyring's backend if it really stores secrets here, else None (no keychain: a
    server without D-Bus, a container, a test session told so by PYTHON_KEYRING_BACKEND)."""
    try:
        import keyring

        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001 (a broken keyring install must not stop the app)
        return None
    if type(backend).__module__.startswith(_NOT_STORES) or getattr(backend, "priority", 0) <= 0:
        return None
    return backend


class SecretStore:
    """Secrets by name, for the data folder `data_dir` (its path names the keychain item's
    account, so two data folders keep two keys)."""

    def __init__(self, data_dir: Path, backend: Any = None) -> None:
        """`backend`: a keyring backend to use (keyring's own choice by default)."""
        self.data_dir = Path(data_dir)
        self.file = self.data_dir / FILE_NAME
        self.keyring = backend if backend is not None else _system_keyring()

    @property
    def where(self) -> str:
        """Where the secrets are kept, in words (Preferences says it under the key)."""
        if self.keyring is None:
            return "a file only you can read, in Corral's data folder"
        name = getattr(self.keyring, "name", type(self.keyring).__name__)
        if "macOS" in name or "Keychain" in name:
            return "the macOS Keychain"
        if "Secret" in name or "Libsecret" in name:
            return "the system keyring (Secret Service)"
        return f"the system keyring ({name})"

    def _account(self, name: str) -> str:
        return f"{name}@{self.data_dir.resolve()}"

    def get(self, name: str) -> str:
        """The secret `name`, or "" when none is kept."""
        value = ""
        if self.keyring is not None:
            try:
                value = self.keyring.get_password(SERVICE, self._account(name)) or ""
            except Exception as exc:  # noqa: BLE001 (a locked or gone keychain: say, go on)
                log.warning("the system keyring could not be read: %s", exc)
        if not value:
            value = str(self._read_file().get(name, ""))
        remember_secrets([value])
        return value

    def set(self, name: str, value: str) -> None:
        """Keep `value` as the secret `name` ("" removes it)."""
        remember_secrets([value])
        if self.keyring is not None:
            try:
                if value:
                    self.keyring.set_password(SERVICE, self._account(name), value)
                else:
                    self._delete_from_keyring(name)
                self._write_file(name, "")  # not in two places
                return
            except Exception as exc:  # noqa: BLE001
                log.warning("the system keyring could not store a secret: %s", exc)
        self._write_file(name, value)

    def _delete_from_keyring(self, name: str) -> None:
        try:
            self.keyring.delete_password(SERVICE, self._account(name))
        except Exception:  # noqa: BLE001 (nothing was stored: nothing to delete)
            pass

    def _read_file(self) -> dict[str, Any]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_file(self, name: str, value: str) -> None:
        data = self._read_file()
        if value:
            data[name] = value
        elif name in data:
            del data[name]
        else:
            return
        if not data:
            self.file.unlink(missing_ok=True)
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        temporary = self.file.with_suffix(".tmp")
        # created readable by the user alone, before a byte of the secret is written
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.file)


def migrate_setting(store: Any, secrets: SecretStore, setting: str, name: str) -> None:
    """Move a secret an older Corral kept in the conversation database's settings into
    `secrets`, and delete it there."""
    value = store.get_setting(setting)
    if value is None:
        return
    if isinstance(value, str) and value and not secrets.get(name):
        secrets.set(name, value)
    store.forget_setting(setting)
    log.info("moved a secret out of the conversation database")
