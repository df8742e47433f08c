"""Documents dropped on the composer: a chip in the draft with the name, pages and tokens
before sending; sent, the question stays the message (and the chat's title) with the
document as a chip whose text the model reads first; the paperclip and the placeholder
offer documents; a hostile file is refused with the reason; a document longer than the
context says so and a page range attaches part."""

from __future__ import annotations

from pathlib import Path

from tests.app_helpers import close_window, drop_files, make_window, set_sampling
from tests.extract_support import invoice_text, make_pdf


def test_a_dropped_pdf_is_an_attachment_chip_with_its_text_behind_it(
    qtbot, tiny_engine, tmp_path: Path
) -> None:
    from app.views.chat.attachments import DocumentChip

    pdf = make_pdf(tmp_path / "invoice.pdf", [invoice_text(1), "Terms: 30 days."])
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    try:
        composer = window.composer
        assert "document" in composer.edit.placeholderText()
        assert "documents" in composer.attach_button.toolTip()
        assert window.actions_by_name["attach"].text() == "&Attach Files…"
        composer.edit.setPlainText("Who sent this?")
        assert drop_files(composer.edit, [pdf])
        qtbot.waitUntil(lambda: bool(composer.pending_documents()), timeout=30_000)
        (chip,) = composer.attachments.documents
        summary = chip.button.text()
        assert summary.startswith("invoice.pdf · 2 pages · ") and summary.endswith(" tokens")
        assert composer.text() == "Who sent this?"  # the draft is only the question
        set_sampling(window, max_tokens=8)
        window.send(composer.text())
        qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
        assert composer.pending_documents() == [] and not composer.attachments.isVisible()
        question = window.chat.message_widgets()[0]
        assert question.body.toPlainText() == "Who sent this?"
        (sent,) = question.findChildren(DocumentChip)
        assert sent.remove_button is None and sent.button.text() == summary
        sent.button.click()  # the text behind the chip: what the model read
        text = sent.dialog.text.toPlainText()
        assert text.startswith("[document: invoice.pdf, pages 1-2 of 2]")
        assert "[page 2]\nTerms: 30 days." in text
        sent.dialog.close()
        assert window.controller.conversation.title == "Who sent this?"
        conv = window.controller.conversation
        request = window.controller.build_request(window.controller.path(), conv)
        read = request.messages[0]["content"]
        assert read.startswith("[document: invoice.pdf") and read.endswith("Who sent this?")
        from app.store.export import to_markdown

        assert f"*Documents: {summary}*" in to_markdown(window.store, conv.id)
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
        assert window.composer.text() == "" and window.composer.pending_documents() == []
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
        assert "long.pdf: pages 1\u20136 of 6 are" in window.notice.label.text()
        assert window.composer.text() == ""
        monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("2-2", True))
        window.notice.action.click()
        qtbot.waitUntil(lambda: bool(window.composer.pending_documents()), timeout=30_000)
        (document,) = window.composer.pending_documents()
        assert "[page 2]" in document.text and "[page 1]" not in document.text
        assert (
            window.composer.attachments.documents[0]
            .button.text()
            .startswith("long.pdf · page 2 of 6 · ")
        )
    finally:
        close_window(window)
