"""The Server log: one row per request the local server answered, newest last."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

COLUMNS = (
    "Time",
    "Endpoint",
    "Status",
    "Prompt",
    "Cached",
    "Completion",
    "TTFT",
    "tok/s",
    "Constraint",
    "Result",
)
MAX_ROWS = 500


def record_cells(record: Any) -> list[str]:
    """The texts of one row for an engine.server.RequestRecord."""
    ttft = f"{record.ttft_ms:.0f} ms" if record.ttft_ms is not None else "—"
    result = record.error or getattr(record, "ending", None) or record.stop_reason or ""
    if record.status == 499:
        result = "cancelled (client left)"
    return [
        time.strftime("%H:%M:%S", time.localtime(record.time)),
        record.endpoint + (" (stream)" if record.stream else ""),
        str(record.status),
        str(record.prompt_tokens),
        str(record.cached_tokens),
        str(record.completion_tokens),
        ttft,
        f"{record.decode_tps:.1f}" if record.decode_tps else "—",
        record.constraint or "—",
        result,
    ]


class ServerLogView(QTableWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("serverLog")
        self.setHorizontalHeaderLabels(COLUMNS)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)

    def add_record(self, record: Any) -> None:
        """Append a row (dropping the oldest beyond MAX_ROWS) and keep the newest in view."""
        if self.rowCount() >= MAX_ROWS:
            self.removeRow(0)
        row = self.rowCount()
        self.insertRow(row)
        for column, text in enumerate(record_cells(record)):
            item = QTableWidgetItem(text)
            if column == len(COLUMNS) - 1:
                item.setToolTip(text)
            self.setItem(row, column, item)
        self.scrollToBottom()
