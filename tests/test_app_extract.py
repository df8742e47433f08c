"""The Extract window driven as a user drives it (pytest-qt, the tiny model): drop a folder,
type fields, start; rows fill the table as they finish, a hostile file marked unreadable
with the reason; a row's source beside its reply; pause and resume; export; and the menu
entry of the main window."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.app_helpers import close_window, drop_files, make_window
from tests.extract_support import mixed_folder


@pytest.fixture
def extract_window(qtbot, tiny_engine, tmp_path: Path):
    from app.jobs.engine_bridge import EngineBridge
    from app.views.extract.window import ExtractWindow
    from engine.extract.store import JobStore

    window = ExtractWindow(EngineBridge(tiny_engine), JobStore(tmp_path / "extract.sqlite3"))
    qtbot.addWidget(window)
    window.show()
    yield window
    if window.job is not None:
        window.job.cancel()
        window.job.wait()


def _done(window) -> int:
    """Rows the status line counts done and validating: valid (the model's) plus filled
    (Corral's, counted apart)."""
    found = re.match(r"Done: (\d+) valid, (\d+) filled, ", window.status.text())
    assert found is not None, window.status.text()
    return int(found.group(1)) + int(found.group(2))


def _finished(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.job is not None and not window.job.running, timeout=120_000)
    qtbot.waitUntil(lambda: window.start_button.isEnabled(), timeout=10_000)


def test_drop_a_folder_start_and_the_table_fills(qtbot, extract_window, tmp_path: Path) -> None:
    window = extract_window
    docs = tmp_path / "docs"
    mixed_folder(docs, 5)
    (docs / "fake.docx").write_bytes(b"\x00\x01binary, not a document" * 20)
    assert drop_files(window, [docs])
    assert window.file_list.count() == 6
    window.fields.setText("vendor: string, total: number, paid: boolean")
    seen: list[str] = []
    window.start_button.click()
    window.job.rowFinished.connect(lambda row, progress: seen.append(row.status))
    _finished(qtbot, window)
    headers = [
        window.table.horizontalHeaderItem(c).text() for c in range(window.table.columnCount())
    ]
    assert headers == ["file", "pages", "status", "vendor", "total", "paid"]
    statuses = {
        window.table.item(r, 0).text(): window.table.item(r, 2)
        for r in range(window.table.rowCount())
    }
    assert len(statuses) == 6
    assert statuses["fake.docx"].text() == "unreadable"
    assert "named as a Word document" in statuses["fake.docx"].toolTip()
    # the rambling tiny model's rows end valid, or filled by Corral: named so, never valid
    for name, item in statuses.items():
        if name != "fake.docx" and item.text() != "valid":
            assert item.text().startswith("filled: "), item.text()
            assert "Corral finished this reply" in item.toolTip()
    assert _done(window) == 5 and window.status.text().endswith("1 unreadable, 0 failed.")
    assert window.progress.value() == window.progress.maximum() == 6
    # Clicking a row shows its source text beside the reply.
    row = next(r for r in range(6) if window.table.item(r, 0).text() == "doc03.md")
    window.table.selectRow(row)
    qtbot.waitUntil(lambda: "— reply —" in window.source.toPlainText(), timeout=30_000)
    assert "Invoice 3 from Vendor3 Ltd." in window.source.toPlainText()
    assert "— reply —" in window.source.toPlainText()
    out = tmp_path / "rows.csv"
    window.export("csv", out)
    with out.open() as f:
        assert len(list(csv.reader(f))) == 7


def test_pause_then_resume_finishes_with_no_row_twice(
    qtbot, extract_window, tmp_path: Path
) -> None:
    window = extract_window
    window.add_paths(mixed_folder(tmp_path / "docs", 20))
    window.fields.setText("vendor, total: number")
    window.start_button.click()
    # Pause as the first row is written (on the job's thread, so no later row has started
    # by then: the Pause button calls the same job.pause).
    window.job.rowFinished.connect(window.job.pause, Qt.ConnectionType.DirectConnection)
    _finished(qtbot, window)
    assert window.status.text().startswith("Paused:")
    assert window.pause_button.text() == "Resume" and window.pause_button.isEnabled()
    window.pause_button.click()  # resume
    _finished(qtbot, window)
    assert _done(window) == 20
    rows = window.store.rows(window.job_id)
    assert len(rows) == 20 and all(r.completions == 1 for r in rows)


def test_bad_fields_say_what_is_wrong(extract_window, tmp_path: Path) -> None:
    window = extract_window
    window.add_paths(mixed_folder(tmp_path / "docs", 1))
    window.fields.setText("total: money")
    window.start_button.click()
    assert window.job is None
    assert "the type is one of" in window.status.text()


def test_the_main_window_opens_it_from_the_file_menu(qtbot, tiny_engine, tmp_path: Path) -> None:
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    try:
        window.actions_by_name["extract"].trigger()
        assert window.extract_window.isVisible()
        assert window.extract_window.store.path == tmp_path / "data" / "extract.sqlite3"
        window.extract_window.close()
    finally:
        close_window(window)


def test_a_window_opened_after_a_quit_resumes_the_last_job(
    qtbot, extract_window, tiny_engine, tmp_path: Path
) -> None:
    from app.jobs.engine_bridge import EngineBridge
    from app.views.extract.window import ExtractWindow
    from engine.extract.store import JobStore

    first = extract_window
    first.add_paths(mixed_folder(tmp_path / "docs", 12))
    first.fields.setText("vendor, total: number")
    first.start_button.click()
    first.job.rowFinished.connect(first.job.pause, Qt.ConnectionType.DirectConnection)
    _finished(qtbot, first)
    done_before = {r.id for r in first.store.rows(first.job_id) if r.status != "pending"}
    first.close()
    # As after a quit: a new window over the same database.
    again = ExtractWindow(EngineBridge(tiny_engine), JobStore(first.store.path))
    qtbot.addWidget(again)
    again.show()
    assert again.job_id == first.job_id and again.table.rowCount() == 12
    assert again.status.text().startswith("Paused:")
    assert again.pause_button.text() == "Resume" and again.pause_button.isEnabled()
    again.pause_button.click()
    _finished(qtbot, again)
    assert _done(again) == 12
    rows = again.store.rows(again.job_id)
    assert all(r.completions == 1 for r in rows) and done_before < {r.id for r in rows}


def test_a_schema_written_in_the_constraint_editor(qtbot, extract_window, tmp_path: Path) -> None:
    import json

    window = extract_window
    window.open_schema_editor()
    dialog = window.schema_editor
    schema = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 30}}}
    dialog.text.setPlainText(json.dumps(schema))
    qtbot.waitUntil(lambda: dialog.spec() is not None, timeout=30_000)
    dialog.accept()
    assert window.schema_label.text() == "Schema: written in the editor"
    window.add_paths(mixed_folder(tmp_path / "docs", 2))
    window.start_button.click()
    _finished(qtbot, window)
    headers = [
        window.table.horizontalHeaderItem(c).text() for c in range(window.table.columnCount())
    ]
    assert headers == ["file", "pages", "status", "title"]
    assert window.status.text().startswith("Done: 2 valid")
