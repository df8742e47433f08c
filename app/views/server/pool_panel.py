"""Preferences → Server: the models the server offers, loaded or not, with Load, Unload and
Pin, what each holds in memory and the limit they share.

These are the local model pool's models (engine.pool, through EngineBridge.pool): the
chat's model is one of them, so a model loaded here or by a request to the server is the
one the chat uses. What the table shows comes from the snapshot the pool publishes, read
every half second while the panel is shown; Load, Unload and Pin ask the pool, which does
the work on its own threads (adding a model reads its files: off the GUI thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core import MODEL_MEMORY_SETTING
from app.jobs.thread import run_task
from app.views.common.format import format_bytes
from engine.types import PooledModel

if TYPE_CHECKING:
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store

COLUMNS = ("Model", "Kind", "State", "Memory", "Pinned")
STATES = {
    "unloaded": "Not loaded",
    "loading": "Loading…",
    "loaded": "Loaded",
    "unloading": "Unloading…",
    "failed": "Failed to load",
}
REFRESH_MS = 500
SETTINGS_TEMPLATE = """\
# Corral's per-model settings (read again whenever this file changes).
# Each [models.NAME] table names a model requests may ask for; `model` says what to load.
#
# [models.coder]
# model = "mlx-community/Qwen3-8B-4bit"   # a folder, a .gguf file or a repo id
# pin = true                              # never unloaded to make room
# idle_unload_minutes = 30                # unloaded after this long without a request
# context_length = 16384
# kv_cache_gb = 2
# chat_template_kwargs = { enable_thinking = false }
# sampling = { temperature = 0.6, top_p = 0.95, max_tokens = 4096 }
#
# [models.embed]                          # served at /v1/embeddings
# model = "mlx-community/all-MiniLM-L6-v2-4bit"
# kind = "embedding"                      # or "rerank": a cross-encoder at /v1/rerank
"""


class PoolPanel(QGroupBox):
    """The local pool's models, their memory and the limit; Load, Unload, Pin, Add."""

    def __init__(self, bridge: EngineBridge, store: Store, parent: QWidget | None = None) -> None:
        super().__init__("Models the server offers", parent)
        self.setObjectName("poolPanel")
        self.bridge = bridge
        self.store = store
        layout = QVBoxLayout(self)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("poolModels")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(120)
        layout.addWidget(self.table)
        buttons = QHBoxLayout()
        self.load = QPushButton("Load", self)
        self.unload = QPushButton("Unload", self)
        self.pin = QPushButton("Pin", self)
        self.pin.setToolTip("A pinned model stays loaded: it is never unloaded for another")
        for button in (self.load, self.unload, self.pin):
            buttons.addWidget(button)
        buttons.addStretch(1)
        self.recent = QComboBox(self)
        self.recent.setObjectName("poolRecent")
        self.add = QPushButton("Add", self)
        self.add.setToolTip("Offer this model too (it loads on its first request)")
        buttons.addWidget(self.recent)
        buttons.addWidget(self.add)
        layout.addLayout(buttons)
        form = QFormLayout()
        self.limit = QDoubleSpinBox(self, minimum=0.0, maximum=4096.0, decimals=1)
        self.limit.setSuffix(" GB")
        self.limit.setSingleStep(1.0)
        self.limit.setSpecialValueText("Automatic")
        gb = store.get_setting(MODEL_MEMORY_SETTING, 0)
        self.limit.setValue(float(gb) if isinstance(gb, int | float) else 0.0)
        self.limit.setToolTip(
            "What the loaded models may hold together (weights and prompt caches). When the "
            "next model would not fit, the one used least recently is unloaded first, never "
            "one answering a request. Automatic: what this Mac's memory leaves."
        )
        form.addRow("Memory for models", self.limit)
        self.usage = QLabel(self)
        self.usage.setObjectName("poolUsage")
        form.addRow(self.usage)
        settings = QHBoxLayout()
        self.settings_label = QLabel(self)
        self.settings_label.setObjectName("hint")
        self.settings_label.setWordWrap(True)
        self.open_settings = QPushButton("Open model settings…", self)
        self.open_settings.setToolTip(
            "Each model's sampling defaults, template switches, context, idle time and pin, "
            "in a small TOML file applied as soon as it is saved"
        )
        settings.addWidget(self.settings_label, 1)
        settings.addWidget(self.open_settings)
        form.addRow(settings)
        layout.addLayout(form)
        self.load.clicked.connect(self._load)
        self.unload.clicked.connect(self._unload)
        self.pin.clicked.connect(self._pin)
        self.add.clicked.connect(self._add)
        self.limit.valueChanged.connect(self._set_limit)
        self.open_settings.clicked.connect(self._open_settings)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self._models: tuple[PooledModel, ...] = ()
        self._fill_recent()
        self.refresh()

    # ---- what is shown ----

    def refresh(self) -> None:
        """Show the pool as it last published itself."""
        pool = self.bridge.pool
        snap = pool.snapshot.pool if pool is not None else None
        models = snap.models if snap is not None else ()
        if models != self._models:
            self._fill(models)
        if snap is None:
            self.usage.setText(
                "Load a model first: the server offers the models loaded on this Mac"
                if self.bridge.current_engine is None
                else "The server offers the model of the group this Mac belongs to"
            )
        else:
            self.usage.setText(
                f"Loaded models hold {format_bytes(snap.held_bytes)} of "
                f"{format_bytes(snap.limit_bytes)}"
            )
            where = snap.settings_file or "none"
            error = f"\n{snap.settings_error}" if snap.settings_error else ""
            self.settings_label.setText(f"Each model's settings: {where}{error}")
        enabled = pool is not None
        self.limit.setEnabled(enabled)
        self.open_settings.setEnabled(enabled)
        offer = enabled and self.recent.count() > 0  # the models used lately, to offer too
        self.add.setEnabled(offer)
        self.recent.setEnabled(offer)
        self._update_buttons()

    def _fill(self, models: tuple[PooledModel, ...]) -> None:
        selected = self.selected()
        self._models = models
        self.table.setRowCount(len(models))
        for row, model in enumerate(models):
            name = model.id + (" (chat)" if model.default else "")
            memory = format_bytes(model.memory_bytes) if model.memory_bytes else "—"
            if model.waiting:
                state = f"Waiting for memory ({model.waiting} requests)"
            else:
                state = STATES.get(model.state, model.state)
            cells = (name, model.kind, state, memory, "Pinned" if model.pinned else "")
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, model.id)
                if column == 0:
                    item.setToolTip(model.spec + (f"\n{model.error}" if model.error else ""))
                self.table.setItem(row, column, item)
            if model.id == (selected.id if selected else None):
                self.table.selectRow(row)

    def selected(self) -> PooledModel | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or rows[0].row() >= len(self._models):
            return None
        return self._models[rows[0].row()]

    def _update_buttons(self) -> None:
        model = self.selected()
        busy = model is not None and model.state in ("loading", "unloading")
        self.load.setEnabled(model is not None and not model.loaded and not busy)
        self.unload.setEnabled(model is not None and model.loaded)
        self.pin.setEnabled(model is not None)
        self.pin.setText("Unpin" if model is not None and model.pinned else "Pin")

    def _fill_recent(self) -> None:
        self.recent.clear()
        recents = self.store.get_setting("recent_models", [])
        for item in recents if isinstance(recents, list) else []:
            if isinstance(item, dict) and isinstance(item.get("spec"), str):
                self.recent.addItem(str(item.get("name") or item["spec"]), item["spec"])

    # ---- actions (the pool does the work on its own threads) ----

    def _load(self) -> None:
        pool, model = self.bridge.pool, self.selected()
        if pool is not None and model is not None:
            pool.ensure_loaded(model.id)
            self.refresh()

    def _unload(self) -> None:
        pool, model = self.bridge.pool, self.selected()
        if pool is not None and model is not None:
            pool.unload_model(model.id)
            self.refresh()

    def _pin(self) -> None:
        pool, model = self.bridge.pool, self.selected()
        if pool is not None and model is not None:
            pool.pin_model(model.id, not model.pinned)
            self.refresh()

    def _add(self) -> None:
        pool, spec = self.bridge.pool, self.recent.currentData()
        if pool is None or not isinstance(spec, str):
            return

        def added(_id: Any, error: BaseException | None) -> None:
            if error is not None:
                self.usage.setText(f"Could not add it: {error}")
            self.refresh()

        run_task(lambda: pool.add_model(spec), added)

    def _set_limit(self, gb: float) -> None:
        self.store.set_setting(MODEL_MEMORY_SETTING, gb)
        self.bridge.set_model_memory_limit(int(gb * (1 << 30)) if gb > 0 else None)
        self.refresh()

    def _open_settings(self) -> None:
        pool = self.bridge.pool
        snap = pool.snapshot.pool if pool is not None else None
        if snap is None or not snap.settings_file:
            return
        path = snap.settings_file

        def ready(_result: Any, error: BaseException | None) -> None:
            if error is None:
                QDesktopServices.openUrl(QUrl.fromLocalFile(path))
            else:
                self.settings_label.setText(f"Could not write {path}: {error}")

        run_task(lambda: _ensure_settings_file(path), ready)


def _ensure_settings_file(path: str) -> None:
    """Write the commented template where no settings file is yet (never over one, and
    only at Corral's own settings path)."""
    from pathlib import Path

    from engine.pool.settings import default_settings_path

    target = Path(path)
    if target.exists():
        return
    if target != default_settings_path():
        raise ValueError("Corral writes only its own settings file")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "x", encoding="utf-8") as f:
        f.write(SETTINGS_TEMPLATE)
