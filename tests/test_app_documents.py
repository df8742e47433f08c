"""Documents dropped on the composer: their text with page markers goes into the draft and
the notice tells pages and tokens before sending; a hostile file is refused with the
reason; a document longer than the context says so and a page range attaches part."""

from __future__ import annotations

from pathlib import Path

from tests.app_helpers import close_window, drop_files, make_window
from tests.extract_support import invoice_text, make_pdf


def test_a_dropped_pdf_goes_into_the_draft_with_page_markers(
    qtbot, tiny_engine, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "invoice.pdf", [invoice_text(1), "Terms: 30 days."])
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    try:
        window.composer.edit.setPlainText("Who sent this?")
        assert drop_files(window.composer.edit, [pdf])
        qtbot.waitUntil(lambda: "[page 2]" in window.composer.text(), timeout=30_000)
        text = window.composer.text()
        assert text.startswith("[document: invoice.pdf, pages 1-2 of 2]")
        assert "[page 1]\nInvoice 1 from Vendor1 Ltd." in text
        assert text.endswith("[end of document]\n\nWho sent this?")
        notice = window.notice.label.text()
        assert notice.startswith("invoice.pdf attached: pages 1-2, ") and "tokens" in notice
    finally:
        close_window(window)


def test_a_binary_named_pdf_is_refused_with_the_reason(qtbot, tiny_engine, tmp_path: Path) -> None:
    fake = tmp_path / "fake.pdf"
    fake.write_bytes(b"\x00\x01\x02 not a pdf" * 50)
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    try:
        assert drop_files(window.composer.edit, [fake])
        qtbot.waitUntil(lambda: "not attached" in window.notice.label.text(), timeout=30_000)
        assert "fake.pdf: named as a PDF, but the file is binary" in window.notice.label.text()
        assert window.composer.text() == ""
    finally:
        close_window(window)


def test_longer_than_the_context_offers_a_page_range(
    qtbot, short_engine, tmp_path: Path, monkeypatch
) -> None:
    from PySide6.QtWidgets import QInputDialog

    pages = [invoice_text(i) + " " + "details " * 40 for i in range(6)]
    pdf = make_pdf(tmp_path / "long.pdf", pages)
    window = make_window(qtbot, tmp_path / "data", short_engine)
    try:
        window.documents.attach(str(pdf))
        qtbot.waitUntil(lambda: "Attach fewer pages" in window.notice.label.text(), timeout=30_000)
        assert "long.pdf: pages 1-6 of 6 are" in window.notice.label.text()
        assert window.composer.text() == ""
        monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("2-2", True))
        window.notice.action.click()
        qtbot.waitUntil(lambda: "[page 2]" in window.composer.text(), timeout=30_000)
        assert "[page 1]" not in window.composer.text()
        assert window.notice.label.text().startswith("long.pdf attached: page 2, ")
    finally:
        close_window(window)
