"""The Extract window never calls a filled row valid (issue 44): generated PDFs whose replies
have no room to end as the tiny model writes them, so Corral fills them; the status column
names the fields ("filled: vendor, note"), and the summary and the progress bar count
filled rows apart."""

from __future__ import annotations

from pathlib import Path

from tests.extract_support import invoice_text, make_pdf


def test_filled_rows_are_named_and_counted_apart(qtbot, tiny_engine, tmp_path: Path) -> None:
    from app.jobs.engine_bridge import EngineBridge
    from app.views.extract.window import ExtractWindow
    from engine.extract.document import file_digest
    from engine.extract.store import JobSettings, JobStore

    # A job whose replies get 10 tokens (20 on the retry): no room to steer the tiny model to
    # an end of its own, so Corral fills them. The window opens on it, as after a quit.
    store = JobStore(tmp_path / "extract.sqlite3")
    schema = {
        "type": "object",
        "properties": {"vendor": {"type": "string"}, "note": {"type": "string"}},
        "required": ["vendor", "note"],
    }
    job = store.create_job(schema, name="extraction", settings=JobSettings(max_tokens=10))
    docs = tmp_path / "docs"
    docs.mkdir()
    paths = [make_pdf(docs / f"invoice{i}.pdf", [invoice_text(i)]) for i in range(2)]
    store.add_documents(job.id, [(str(p), file_digest(p)) for p in paths])
    window = ExtractWindow(EngineBridge(tiny_engine), store)
    qtbot.addWidget(window)
    window.show()
    assert window.pause_button.text() == "Resume"
    window.pause_button.click()
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
