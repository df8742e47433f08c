"""The local server in the window: its Preferences section, the status-bar text and the
Server log dock, wired to a ServerJob. MainWindow holds one and calls it from a few hooks
(build, preferences, close)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDockWidget,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QSpinBox,
    QWidget,
)

from app.jobs.server_job import DEFAULT_PORT, ServerJob
from app.secrets import SERVER_API_KEY, SecretStore
from app.views.server.agent_instructions import AGENT_BUTTONS, AgentDialog
from app.views.server.log import ServerLogView


class ServerSettingsGroup(QGroupBox):
    """Preferences → Local server: on/off, port, API key, whether any model name is
    answered (coding agents send their own default names), and a button per coding agent
    (`agentRequested(agent)`)."""

    agentRequested = Signal(str)

    def __init__(
        self,
        enabled: bool,
        port: int,
        api_key: str,
        any_model: bool = False,
        parent: QWidget | None = None,
    ):
        super().__init__("Local server", parent)
        self.setObjectName("serverSettings")
        form = QFormLayout(self)
        self.enabled = QCheckBox(
            "Serve the model to other apps (OpenAI- and Anthropic-compatible APIs)", self
        )
        self.enabled.setChecked(enabled)
        self.port = QSpinBox(self, minimum=1024, maximum=65535)
        self.port.setValue(port)
        self.api_key = QLineEdit(api_key, self)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("None")
        form.addRow(self.enabled)
        form.addRow("Port", self.port)
        form.addRow("API key", self.api_key)
        self.any_model = QCheckBox("Answer requests for any model name with this model", self)
        self.any_model.setToolTip(
            "Coding agents such as Claude Code and Codex ask for their own default models; "
            "with this on, the loaded model answers them. Off, another name is refused."
        )
        self.any_model.setChecked(any_model)
        form.addRow(self.any_model)
        self.hint = QLabel(self)
        self.hint.setWordWrap(True)
        self.hint.setObjectName("hint")
        form.addRow(self.hint)
        # one button per coding agent: the server started, its setup written, one command
        agents = QWidget(self)
        row = QHBoxLayout(agents)
        row.setContentsMargins(0, 0, 0, 0)
        self.agent_buttons: dict[str, QPushButton] = {}
        for agent, name in AGENT_BUTTONS:
            button = QPushButton(name, agents)
            button.setToolTip(
                f"Start the server if needed, set {name} up in Corral's folder, and show the "
                "command that runs it"
            )
            button.clicked.connect(lambda _checked=False, a=agent: self.agentRequested.emit(a))
            row.addWidget(button)
            self.agent_buttons[agent] = button
        row.addStretch(1)
        form.addRow("Use with", agents)
        self.port.valueChanged.connect(self._update_hint)
        self._update_hint()

    def _update_hint(self) -> None:
        self.hint.setText(
            f"Only programs on this Mac can connect (127.0.0.1). Point OpenAI clients at "
            f"http://127.0.0.1:{self.port.value()}/v1 and Anthropic clients at "
            f"http://127.0.0.1:{self.port.value()}. With a key, clients must send it as "
            "Authorization: Bearer KEY (or x-api-key: KEY)."
        )

    def values(self) -> tuple[bool, int, str, bool]:
        return (
            self.enabled.isChecked(),
            self.port.value(),
            self.api_key.text().strip(),
            self.any_model.isChecked(),
        )


class ServerControls(QObject):
    """Starts and stops the server from the stored settings and shows what it does."""

    def __init__(
        self, window: QMainWindow, store: Any, engine: Callable[[], Any], secrets: SecretStore
    ) -> None:
        super().__init__(window)
        self.store = store
        self.secrets = secrets  # the API key lives there, never in the database
        self.engine = engine
        self.agent_dialog: AgentDialog | None = None
        # Stored Responses live beside the app's own database (its data folder).
        self.job = ServerJob(
            engine, self, responses_db=Path(store.path).parent / "responses.sqlite3"
        )
        self.status_label = QLabel(window)
        self.status_label.setObjectName("serverLabel")
        self.status_label.hide()
        window.statusBar().addPermanentWidget(self.status_label)
        self.log_view = ServerLogView(window)
        self.log_dock = QDockWidget("Server Log", window)
        self.log_dock.setObjectName("serverLogDock")
        self.log_dock.setWidget(self.log_view)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        self.log_dock.hide()
        self._error: str | None = None
        self.job.started.connect(lambda _url: self._refresh())
        self.job.stopped.connect(self._refresh)
        self.job.failed.connect(self._failed)
        self.job.activeChanged.connect(lambda _n: self._refresh())
        self.job.requestLogged.connect(self.log_view.add_record)

    # ---- settings ----

    def settings(self) -> tuple[bool, int, str, bool]:
        return (
            bool(self.store.get_setting("server_enabled", False)),
            int(self.store.get_setting("server_port", DEFAULT_PORT)),
            self.secrets.get(SERVER_API_KEY),
            bool(self.store.get_setting("server_any_model", False)),
        )

    def preferences_section(self) -> ServerSettingsGroup:
        section = ServerSettingsGroup(*self.settings())
        section.api_key.setToolTip(f"Kept in {self.secrets.where}")
        section.agentRequested.connect(lambda agent: self.use_with(agent, section))
        return section

    def use_with(self, agent: str, section: ServerSettingsGroup | None = None) -> AgentDialog:
        """One agent's button: the server started (or restarted) with the section's port
        and key, answering any model name as agents ask for their own; then the dialog
        writes the agent's setup into Corral's folder and shows the command to run."""
        _enabled, port, api_key, _any = section.values() if section else self.settings()
        if section is not None:  # what the section shows is what runs (and is kept)
            section.enabled.setChecked(True)
            section.any_model.setChecked(True)
        parent = section.window() if section is not None else None
        dialog = AgentDialog(
            agent,
            Path(self.store.path).parent / "agents",
            api_key,
            self._model,
            parent,
        )
        self.job.started.connect(dialog.ready)
        self.job.failed.connect(dialog.failed)
        dialog.finished.connect(lambda _r: self._forget(dialog))
        self.agent_dialog = dialog
        wanted = (True, port, api_key, True)
        answering = self.job.running and self.settings() == wanted
        self.set_settings(*wanted)  # starts or restarts it only if it must
        if answering and self.job.url:
            dialog.ready(self.job.url)
        dialog.open()
        return dialog

    def _model(self) -> Any:
        """The model the server answers with now (a ModelInfo), or None."""
        engine = self.engine()
        return engine.snapshot.model if engine is not None else None

    def _forget(self, dialog: AgentDialog) -> None:
        for signal, slot in ((self.job.started, dialog.ready), (self.job.failed, dialog.failed)):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):
                pass

    def apply(self, section: ServerSettingsGroup) -> None:
        """Store the section's values and start, restart or stop the server to match."""
        self.set_settings(*section.values())

    def set_settings(self, enabled: bool, port: int, api_key: str, any_model: bool = False) -> None:
        before = self.settings()
        self.store.set_setting("server_enabled", enabled)
        self.store.set_setting("server_port", port)
        self.secrets.set(SERVER_API_KEY, api_key)
        self.store.set_setting("server_any_model", any_model)
        if not enabled:
            self.job.stop()
        elif (enabled, port, api_key, any_model) != before or not self.job.running:
            self._error = None
            self.job.start(port, api_key, any_model)
        self._refresh()

    def restore(self) -> None:
        """Start the server at launch if the user left it on."""
        enabled, port, api_key, any_model = self.settings()
        if enabled:
            self.job.start(port, api_key, any_model)

    def shutdown(self) -> None:
        self.job.stop()

    # ---- display ----

    def _failed(self, message: str) -> None:
        self._error = message
        self._refresh()

    def _refresh(self) -> None:
        if self.job.running:
            active = self.job.active
            text = f"Serving on {self.job.url}"
            if active:
                text += f" · {active} active request{'s' if active != 1 else ''}"
            self.status_label.setText(text)
            self.status_label.setToolTip(
                f"OpenAI-compatible API at {self.job.url}/v1; Anthropic-compatible at "
                f"{self.job.url}"
            )
            self.status_label.show()
        elif self._error:
            self.status_label.setText(f"Server not running: {self._error}")
            self.status_label.setToolTip(self._error)
            self.status_label.show()
        else:
            self.status_label.hide()
