"""Several Macs in the window: the Preferences section *Distributed* (a hostfile, how to split
the model), the status-bar text, and the offer to go on with this Mac alone when the group
fails. MainWindow holds one DistributedControls and calls it from a few hooks (build,
preferences, start)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QWidget,
)

from engine.distributed import DistributedConfig, DistributedEngine, HostfileError, read_hostfile

SHARD_LABELS = (
    ("auto", "Automatic (tensor parallel where the model allows)"),
    ("tensor", "Tensor parallel (every Mac holds a slice of every layer)"),
    ("pipeline", "Pipeline (every Mac holds whole layers)"),
)
FALL_BACK = "Use this Mac only"


def describe_hostfile(path: str) -> str:
    """One sentence about a hostfile: its machines, or what is wrong with it."""
    if not path.strip():
        return "Choose the hostfile that lists the Macs (see the README's example)."
    try:
        hf = read_hostfile(path)
    except HostfileError as exc:
        return str(exc)
    names = ", ".join(hf.host_name(r) for r in range(hf.size))
    return f"{hf.size} machines over {hf.backend}: {names}. Rank 0 runs here."


class DistributedSettingsGroup(QGroupBox):
    """Preferences → Distributed: on/off, the hostfile, the split."""

    def __init__(
        self, enabled: bool, hostfile: str, shard: str, parent: QWidget | None = None
    ) -> None:
        super().__init__("Distributed", parent)
        self.setObjectName("distributedSettings")
        form = QFormLayout(self)
        self.enabled = QCheckBox("Split the model across several Macs (MLX distributed)", self)
        self.enabled.setChecked(enabled)
        self.hostfile = QLineEdit(hostfile, self)
        self.hostfile.setPlaceholderText("hostfile.json")
        browse = QPushButton("Choose…", self)
        row = QHBoxLayout()
        row.addWidget(self.hostfile, 1)
        row.addWidget(browse)
        self.shard = QComboBox(self)
        for value, label in SHARD_LABELS:
            self.shard.addItem(label, value)
        self.shard.setCurrentIndex(max(0, self.shard.findData(shard)))
        self.hint = QLabel(self)
        self.hint.setWordWrap(True)
        self.hint.setObjectName("hint")
        form.addRow(self.enabled)
        form.addRow("Hostfile", row)
        form.addRow("Split", self.shard)
        form.addRow(self.hint)
        browse.clicked.connect(self._choose)
        self.hostfile.textChanged.connect(self._update_hint)
        self._update_hint()

    def _choose(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Hostfile", "", "Hostfiles (*.json)")
        if path:
            self.hostfile.setText(path)

    def _update_hint(self) -> None:
        self.hint.setText(describe_hostfile(self.hostfile.text()))

    def values(self) -> tuple[bool, str, str]:
        return self.enabled.isChecked(), self.hostfile.text().strip(), str(self.shard.currentData())


class DistributedControls(QObject):
    """Switches the window's engine between this Mac and a group, from the stored settings."""

    def __init__(
        self, window: QMainWindow, store: Any, bridge: Any, reload: Callable[[], None]
    ) -> None:
        super().__init__(window)
        self.window = window
        self.store = store
        self.bridge = bridge
        self._reload = reload
        self.status_label = QLabel(window)
        self.status_label.setObjectName("distributedLabel")
        self.status_label.hide()
        window.statusBar().addPermanentWidget(self.status_label)
        bridge.groupFailed.connect(self._group_failed)
        bridge.modelLoaded.connect(lambda _info: self.refresh())

    def settings(self) -> tuple[bool, str, str]:
        return (
            bool(self.store.get_setting("distributed_enabled", False)),
            str(self.store.get_setting("distributed_hostfile", "") or ""),
            str(self.store.get_setting("distributed_shard", "auto") or "auto"),
        )

    def preferences_section(self) -> DistributedSettingsGroup:
        return DistributedSettingsGroup(*self.settings())

    def apply(self, section: DistributedSettingsGroup) -> None:
        """Store the section's values; switch engines (and reload the model) if they changed."""
        before = self.settings()
        enabled, hostfile, shard = section.values()
        if enabled:
            try:
                read_hostfile(hostfile)
            except HostfileError as exc:
                self._notice(f"Distributed stays off: {exc}")
                enabled = False
        self.store.set_setting("distributed_enabled", enabled)
        self.store.set_setting("distributed_hostfile", hostfile)
        self.store.set_setting("distributed_shard", shard)
        if (enabled, hostfile, shard) != before and (enabled or before[0]):
            self.bridge.use_engine(self._factory() if enabled else None)
            self._reload()
        self.refresh()

    def restore(self) -> None:
        """At launch, before the first model loads: serve from the group if the user left it
        on (and the hostfile still reads)."""
        enabled, hostfile, _ = self.settings()
        if not enabled or self.bridge.model_info is not None:
            return
        try:
            read_hostfile(hostfile)
        except HostfileError as exc:
            self._notice(f"Distributed is off for now: {exc}")
            return
        self.bridge.use_engine(self._factory())

    def fall_back(self) -> None:
        """Turn the group off and load the model on this Mac alone."""
        self.store.set_setting("distributed_enabled", False)
        self.bridge.use_engine(None)
        self._reload()
        self.refresh()

    def _factory(self) -> Callable[[], DistributedEngine]:
        _, hostfile, shard = self.settings()
        return lambda: DistributedEngine(DistributedConfig(hostfile, shard=shard))

    def _group_failed(self, message: str) -> None:
        self.refresh()
        self._notice(f"{message} Go on with this Mac alone?", FALL_BACK, self.fall_back)

    def _notice(
        self, text: str, action: str = "", callback: Callable[[], None] | None = None
    ) -> None:
        notice = getattr(self.window, "notice", None)
        if notice is not None:
            notice.show_message(text, "error", action, callback)

    def refresh(self) -> None:
        info = getattr(self.bridge.current_engine, "group_info", None)
        failure = self.bridge.group_failure
        if failure is not None:
            self.status_label.setText("Distributed group stopped")
            self.status_label.setToolTip(failure)
            self.status_label.show()
        elif info is not None:
            self.status_label.setText(f"Split over {info.size} machines ({info.mode})")
            self.status_label.setToolTip(info.summary())
            self.status_label.show()
        else:
            self.status_label.hide()
