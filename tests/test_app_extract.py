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


def _elided(table, row: int, column: int) -> Qt.TextElideMode:
    """How the cell at `row`, `column` is cut when narrow, as the table paints it."""
    from PySide6.QtWidgets import QStyleOptionViewItem

    index = table.model().index(row, column)
    option = QStyleOptionViewItem()
    table.initViewItemOption(option)
    table.itemDelegateForIndex(index).initStyleOption(option, index)
    return option.textElideMode


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


def test_a_run_says_pages_pace_and_where_it_exported(qtbot, extract_window, tmp_path: Path) -> None:
    """What a bookkeeper reads: the pages each row covers (also in the CSV), no rate until
    the model has answered a row and then one with its unit, long names elided in the
    middle with the full path in the tooltip, and an export that says where it wrote."""
    import re

    from app.paths import display_path

    window = extract_window
    docs = tmp_path / "docs"
    mixed_folder(docs, 4)
    (docs / "a-unreadable.docx").write_bytes(b"\x00\x01binary, not a document" * 20)
    window.add_paths([docs])
    assert window.file_list.textElideMode() == Qt.TextElideMode.ElideMiddle
    assert window.file_list.item(0).toolTip() == str(docs / "a-unreadable.docx")
    window.fields.setText("vendor: string, total: number")
    paces: list[tuple[str, str]] = []
    window.start_button.click()
    window.job.rowFinished.connect(lambda row, _p: paces.append((row.status, window.status.text())))
    _finished(qtbot, window)
    # the unreadable file is refused at once: no rate from it; after a model's row, a rate
    first_status, first_text = paces[0]
    assert first_status == "unreadable" and first_text.endswith("working on the first rows…")
    assert re.search(
        r"\d+(\.\d)? rows a minute(, about \S+ (s|min|h)( \S+ min)? left)?$", paces[-1][1]
    )
    table = {
        window.table.item(r, 0).text(): [window.table.item(r, c).text() for c in range(3)]
        for r in range(window.table.rowCount())
    }
    assert table["doc00.pdf"][1] == "1\u20132"  # a two-page PDF read as one window
    assert table["doc03.md"][1] == "1" and table["a-unreadable.docx"][1] == ""
    # a name loses its middle ("Amazo…1.pdf"), any other cell its end ("filled: vendor, t…")
    assert [_elided(window.table, 0, c) for c in range(3)] == [
        Qt.TextElideMode.ElideMiddle,
        Qt.TextElideMode.ElideRight,
        Qt.TextElideMode.ElideRight,
    ]
    pdf_row = next(r for r in range(5) if window.table.item(r, 0).text() == "doc00.pdf")
    assert window.table.item(pdf_row, 0).toolTip() == str(docs / "doc00.pdf")
    out = tmp_path / "rows.csv"
    assert not window.reveal_button.isVisibleTo(window)
    window.export("csv", out)
    assert window.export_note.text() == f"Wrote 5 rows to {display_path(out)}"
    assert window.reveal_button.isVisibleTo(window) and window.reveal_button.text() in (
        "Show in Folder",
        "Show in Finder",
    )
    with out.open(encoding="utf-8") as f:
        pages = {Path(line[0]).name: line[1] for line in list(csv.reader(f))[1:]}
    assert pages["doc00.pdf"] == "1\u20132" and pages["doc01.docx"] == "1"
    window.export("csv", tmp_path / "no such folder" / "rows.csv")
    assert window.export_note.text().startswith("Could not write ")
    assert not window.reveal_button.isVisibleTo(window)


def test_pause_says_how_many_rows_are_finishing(qtbot, extract_window, tmp_path: Path) -> None:
    import re

    window = extract_window
    window.add_paths(mixed_folder(tmp_path / "docs", 12))
    window.fields.setText("summary: string")  # long replies: rows stay in flight a while
    window.start_button.setFocus()
    window.start_button.click()
    assert window.pause_button.hasFocus()  # the keys go where the next press is
    qtbot.waitUntil(lambda: window.job.in_flight >= 2, timeout=60_000)
    seen: list[str] = []
    window.job.rowFinished.connect(lambda *_a: seen.append(window.status.text()))
    window.pause_button.click()
    assert window.pause_button.text() == "Pausing…" and not window.pause_button.isEnabled()
    first = window.status.text()
    assert first.startswith("Pausing — ") and first.endswith(" finishing…"), first
    _finished(qtbot, window)
    counts = [int(text.split()[2]) for text in [first, *seen] if text.startswith("Pausing — ")]
    assert counts == sorted(counts, reverse=True)  # it counts down as they finish
    assert window.status.text().startswith("Paused:")
    assert window.pause_button.text() == "Resume" and window.pause_button.isEnabled()
    # the keys were on Pause: they are on Resume now; Resume says at once that it works
    assert window.pause_button.hasFocus()
    window.pause_button.click()
    assert re.match(r"\d+ of 12 done, working on the first rows…$", window.status.text())
    window.job.cancel()
    _finished(qtbot, window)


def test_documents_come_off_the_list_with_delete(qtbot, extract_window, tmp_path: Path) -> None:
    from PySide6.QtCore import Qt as Keys

    window = extract_window
    made = mixed_folder(tmp_path / "docs", 3)
    window.add_paths(made)
    window.file_list.setFocus()
    window.file_list.item(1).setSelected(True)
    qtbot.keyClick(window.file_list, Keys.Key.Key_Delete)
    assert window.files == [made[0], made[2]] and window.file_list.count() == 2
    assert window.status.text() == "2 documents."
    assert not window.table.wordWrap()  # a row is one line: long names elided, not wrapped
