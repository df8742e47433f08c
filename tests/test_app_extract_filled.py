"""The Extract window never calls a filled row valid (issue 44): generated PDFs whose replies
the tiny model never ends, so Corral fills them; the status column names the fields
("filled: vendor, note"), and the summary and the progress bar count filled rows apart."""

from __future__ import annotations

from pathlib import Path

from tests.extract_support import invoice_text, make_pdf


def test_filled_rows_are_named_and_counted_apart(qtbot, tiny_engine, tmp_path: Path) -> None:
    from app.jobs.engine_bridge import EngineBridge
    from app.views.extract.window import ExtractWindow
    from engine.extract.store import JobStore

    window = ExtractWindow(EngineBridge(tiny_engine), JobStore(tmp_path / "extract.sqlite3"))
    qtbot.addWidget(window)
    window.show()
    docs = tmp_path / "docs"
    docs.mkdir()
    window.add_paths([make_pdf(docs / f"invoice{i}.pdf", [invoice_text(i)]) for i in range(2)])
    window.fields.setText("vendor: string, note: string")  # free strings: the model rambles
    window.start_button.click()
    try:
        qtbot.waitUntil(lambda: not window.job.running, timeout=120_000)
        qtbot.waitUntil(lambda: window.start_button.isEnabled(), timeout=10_000)
    finally:
        window.job.cancel()
        window.job.wait()
    statuses = [window.table.item(r, 2) for r in range(window.table.rowCount())]
    assert len(statuses) == 2
    for item in statuses:
        named = item.text().removeprefix("filled: ").split(", ")
        assert item.text().startswith("filled: ") and set(named) <= {"vendor", "note"}
        assert "were filled in" in item.toolTip() or "was filled in" in item.toolTip()
    assert window.status.text() == "Done: 0 valid, 2 filled, 0 incomplete, 0 unreadable, 0 failed."
    assert window.progress.text() == "2/2: 0 valid, 2 filled"
