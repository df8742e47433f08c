"""The Extract window: choose a schema (a file, or field names with types), drop files or
folders, start; rows fill the table as they finish, each marked valid, filled (with the
fields Corral wrote: "filled: date, amount") or why not, counted apart; pause,
resume, cancel; click a row to see its source text beside the reply; export CSV, JSONL or
XLSX. The job lives in the data folder's extract.sqlite3, so it survives a quit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.jobs.engine_bridge import EngineBridge
from app.jobs.extract_job import ExtractJob
from app.jobs.thread import run_task
from engine.extract.document import (
    document_keys,
    documents_in,
    read_document,
)
from engine.extract.export import cell, schema_columns, write_csv, write_jsonl, write_xlsx
from engine.extract.fields import schema_from_fields
from engine.extract.runner import Progress
from engine.extract.store import JobStore, Row
from engine.files import FileRefused, read_text_limited

FIXED = ("file", "pages", "status")
SOURCE_CHARS = 20_000  # source text shown beside a reply


class ExtractWindow(QWidget):
    """One extraction at a time over the bridge's engine, kept in `store`."""

    def __init__(self, bridge: EngineBridge, store: JobStore, parent: QWidget | None = None):
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Extract from Documents")
        self.setAcceptDrops(True)
        self.bridge, self.store = bridge, store
        self.files: list[Path] = []
        self.schema: dict[str, Any] | None = None
        self.job: ExtractJob | None = None
        self.job_id: str | None = None
        self.rows: dict[int, Row] = {}
        self._source_row: int | None = None  # the row whose source is being shown

        self.fields = QLineEdit()
        self.fields.setPlaceholderText("vendor: string, total: number, paid: boolean")
        self.fields.setAccessibleName("Fields")
        schema_button = _button("Schema File…", self.choose_schema)
        editor_button = _button("Write Schema…", self.open_schema_editor)
        self.schema_label = QLabel("Schema: the fields typed here")
        self.instruction = QLineEdit()
        self.instruction.setPlaceholderText("Optional: what to do with each document")
        self.instruction.setAccessibleName("Instruction")
        self.file_list = QListWidget()
        self.file_list.setAccessibleName("Documents")
        add_files = _button("Add Files…", self.choose_files)
        add_folder = _button("Add Folder…", self.choose_folder)
        self.start_button = _button("Start", self.start)
        self.pause_button = _button("Pause", self.toggle_pause, enabled=False)
        self.cancel_button = _button("Cancel", self.cancel, enabled=False)
        self.export_buttons = [
            _button(f"Export {kind.upper()}…", lambda k=kind: self.export(k))
            for kind in ("csv", "jsonl", "xlsx")
        ]
        self.progress = QProgressBar()
        self.status = QLabel("Drop documents or folders here.")
        self.table = QTableWidget(0, len(FIXED))
        self.table.setHorizontalHeaderLabels(list(FIXED))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.itemSelectionChanged.connect(self.show_source)
        self.source = QPlainTextEdit()
        self.source.setReadOnly(True)
        self.source.setAccessibleName("Source and reply")

        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        for widget in (QLabel("Fields:"), self.fields, schema_button, editor_button):
            top.addWidget(widget)
        layout.addLayout(top)
        layout.addWidget(self.schema_label)
        layout.addWidget(self.instruction)
        files_row = QHBoxLayout()
        files_row.addWidget(self.file_list, 1)
        side = QVBoxLayout()
        for widget in (add_files, add_folder, self.start_button, self.pause_button,
                       self.cancel_button, *self.export_buttons):  # fmt: skip
            side.addWidget(widget)
        side.addStretch()
        files_row.addLayout(side)
        layout.addLayout(files_row)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        split = QSplitter()
        split.addWidget(self.table)
        split.addWidget(self.source)
        split.setSizes([700, 300])
        layout.addWidget(split, 1)
        self.resize(1000, 700)
        self._restore_last()

    def _restore_last(self) -> None:
        """Show the last job (after a quit or a crash: Resume goes on where it stopped)."""
        jobs = self.store.jobs()
        if not jobs:
            return
        job = jobs[0]
        self.job_id, self.schema = job.id, job.schema
        self.schema_label.setText("Schema: the last job's (type fields or choose a file)")
        self.instruction.setText(job.instruction)
        self._show_table(job.schema)
        counts = self.store.counts(job.id)
        self._on_finished(Progress(counts))

    # ---- documents and schema ----

    def add_paths(self, paths: list[Path]) -> None:
        for path in paths:
            found = documents_in(path) if path.is_dir() else [path]
            for item in found:
                if item not in self.files:
                    self.files.append(item)
                    self.file_list.addItem(str(item))
        self.status.setText(f"{len(self.files)} documents.")

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt's name)
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls() if u.isLocalFile()]
        self.add_paths(paths)
        event.acceptProposedAction()

    def choose_files(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self, "Documents")
        self.add_paths([Path(n) for n in names])

    def choose_folder(self) -> None:
        name = QFileDialog.getExistingDirectory(self, "A folder of documents")
        if name:
            self.add_paths([Path(name)])

    def choose_schema(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "JSON Schema", "", "JSON (*.json)")
        if name:
            self.use_schema_file(Path(name))

    def use_schema_file(self, path: Path) -> None:
        try:
            schema = json.loads(read_text_limited(path, 1 << 20, "JSON schema"))
        except (FileRefused, json.JSONDecodeError) as exc:
            QMessageBox.warning(self, "Schema", str(exc))
            return
        self.schema = schema
        self.fields.clear()
        self.schema_label.setText(f"Schema: {path.name}")

    def open_schema_editor(self) -> None:
        """The constraint editor (checked as it is typed), for a JSON schema."""
        from app.views.constraint_widgets import ConstraintEditor
        from engine.types import ConstraintSpec

        current = (
            ConstraintSpec("json_schema", json.dumps(self.schema, indent=2))
            if self.schema
            else None
        )
        dialog = ConstraintEditor(self, current, self.bridge.check_constraint)
        dialog.accepted.connect(lambda: self._schema_written(dialog))
        dialog.open()
        self.schema_editor = dialog

    def _schema_written(self, dialog: Any) -> None:
        spec = dialog.spec()
        if spec is None or spec.kind != "json_schema":
            self.status.setText("Extraction needs a JSON schema (the editor held another kind).")
            return
        self.schema = json.loads(spec.source)
        self.fields.clear()
        self.schema_label.setText("Schema: written in the editor")

    def current_schema(self) -> dict[str, Any]:
        """The typed fields' schema, else the file chosen (or the last job's); ValueError
        says what is wrong."""
        if self.fields.text().strip() or self.schema is None:
            return schema_from_fields(self.fields.text())
        return self.schema

    # ---- the job ----

    def start(self) -> None:
        if self.bridge.model_info is None:
            self.status.setText("Load a model first.")
            return
        try:
            schema = self.current_schema()
        except ValueError as exc:
            self.status.setText(f"Fields: {exc}")
            return
        if not self.files:
            self.status.setText("Drop documents or folders here first.")
            return
        job = self.store.create_job(schema, name="extraction", instruction=self.instruction.text())
        self.store.add_documents(job.id, document_keys(self.files))
        self.job_id = job.id
        self._show_table(schema)
        self._run()

    def _show_table(self, schema: dict[str, Any]) -> None:
        """The job's rows as they stand, one column per property of `schema`."""
        assert self.job_id is not None
        self.rows.clear()
        columns = [*FIXED, *schema_columns(schema)]
        self.table.setColumnCount(len(columns))
        self.table.setHorizontalHeaderLabels(columns)
        self.table.setRowCount(0)
        for row in self.store.rows(self.job_id):
            self._show_row(row)

    def _run(self) -> None:
        assert self.job_id is not None
        self.job = ExtractJob(self.bridge.engine, self.store, self.job_id, self)
        self.job.rowFinished.connect(self._on_row)
        self.job.finished.connect(self._on_finished)
        self.start_button.setEnabled(False)
        self.pause_button.setEnabled(True)
        self.pause_button.setText("Pause")
        self.cancel_button.setEnabled(True)
        self.job.start()

    def toggle_pause(self) -> None:
        if self.job is not None and self.job.running:
            self.job.pause()
            self.pause_button.setEnabled(False)  # until the rows decoding have finished
        elif self.job_id is not None:
            self._run()

    def cancel(self) -> None:
        if self.job is not None and self.job.running:
            self.job.cancel()

    def _on_row(self, row: Row, progress: Progress) -> None:
        self._show_row(row)
        self._show_progress(progress)

    def _on_finished(self, outcome: Progress | str) -> None:
        self.cancel_button.setEnabled(False)
        self.start_button.setEnabled(True)
        if isinstance(outcome, str):
            self.status.setText(outcome)
            self.pause_button.setEnabled(False)
            return
        self._show_progress(outcome)
        pending = outcome.counts.get("pending", 0)
        self.pause_button.setText("Resume" if pending else "Pause")
        self.pause_button.setEnabled(bool(pending))
        counts = outcome.counts
        self.status.setText(
            ("Paused: " if pending else "Done: ")
            + f"{counts['valid']} valid, {counts.get('filled', 0)} filled, "
            f"{counts['incomplete']} incomplete, {counts['unreadable']} unreadable, "
            f"{counts['failed']} failed" + (f", {pending} to do." if pending else ".")
        )
        # Rows split into page windows appear only now (their ids are new).
        for row in self.store.rows(self.job_id or ""):
            self._show_row(row)

    def _show_progress(self, progress: Progress) -> None:
        self.progress.setRange(0, max(1, progress.total))
        self.progress.setValue(progress.done)
        counts = progress.counts  # filled rows apart: never counted as valid
        self.progress.setFormat(
            f"%v/%m: {counts.get('valid', 0)} valid, {counts.get('filled', 0)} filled"
        )
        left = progress.seconds_left
        self.status.setText(
            f"{progress.done} of {progress.total} done, {progress.per_minute:.1f} a minute"
            + (f", about {left:.0f} s left" if left is not None else "")
        )

    def _show_row(self, row: Row) -> None:
        place = list(self.rows).index(row.id) if row.id in self.rows else self.table.rowCount()
        if row.id not in self.rows:
            self.table.insertRow(place)
        self.rows[row.id] = row
        data = row.result if isinstance(row.result, dict) else {}
        values = [Path(row.path).name, row.pages or "", row.status_text]
        for c in range(len(FIXED), self.table.columnCount()):
            header = self.table.horizontalHeaderItem(c)
            values.append("" if header is None else _text(data.get(header.text())))
        for c, value in enumerate(values):
            item = QTableWidgetItem(str(value))
            if c == 2 and row.error:
                item.setToolTip(row.error)
            self.table.setItem(place, c, item)

    def show_source(self) -> None:
        selected = self.table.selectionModel().selectedRows()
        if not selected:
            return
        row = list(self.rows.values())[selected[0].row()]
        self._source_row = row.id
        reply = json.dumps(row.result, indent=2, ensure_ascii=False) if row.result else ""
        why = f"\n\n{row.status}: {row.error}" if row.error else ""

        def read() -> str:  # off the GUI thread: a document may be a large PDF
            return read_document(row.path, pages=row.page_range).text[:SOURCE_CHARS]

        def show(text: str | None, error: BaseException | None) -> None:
            if self._source_row != row.id:
                return  # another row was chosen meanwhile
            shown = text if text is not None else str(error)
            self.source.setPlainText(f"{shown}\n\n— reply —\n{reply}{why}")

        run_task(read, show)

    def export(self, kind: str, path: Path | None = None) -> None:
        if self.job_id is None:
            return
        if path is None:
            name, _ = QFileDialog.getSaveFileName(self, "Export", f"extraction.{kind}")
            if not name:
                return
            path = Path(name)
        job = self.store.job(self.job_id)
        rows = self.store.rows(self.job_id)
        assert job is not None
        if kind == "csv":
            write_csv(path, job.schema, rows)
        elif kind == "xlsx":
            write_xlsx(path, job.schema, rows)
        else:
            write_jsonl(path, rows)

    def closeEvent(self, event: Any) -> None:  # noqa: N802
        if self.job is not None and self.job.running:
            self.job.pause()  # rows written so far stay; the job can be resumed
        super().closeEvent(event)


def _button(text: str, slot: Any, *, enabled: bool = True) -> QPushButton:
    button = QPushButton(text)
    button.clicked.connect(lambda _checked=False: slot())
    button.setEnabled(enabled)
    return button


def _text(value: Any) -> str:
    shown = cell(value)
    return "" if shown is None else str(shown)
