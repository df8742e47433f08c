"""Assistive technology is told (app/views/common/announce.py): a finished reply is announced
politely with its start, an error at once; the window's text follows the system's size."""

from __future__ import annotations

from app_helpers import TINY_TEMPERATURE, close_window, make_window, set_sampling, wait_idle
from PySide6.QtGui import QAccessible, QAccessibleAnnouncementEvent
from PySide6.QtWidgets import QApplication

from app.views.common import theme

POLITENESS = QAccessible.AnnouncementPoliteness


def _spoken(monkeypatch) -> list[tuple[str, object]]:
    """What reaches the accessibility layer (passed on to Qt as well)."""
    heard: list[tuple[str, object]] = []
    real = QAccessible.updateAccessibility

    def record(event):
        if isinstance(event, QAccessibleAnnouncementEvent):
            heard.append((event.message(), event.politeness()))
        real(event)

    monkeypatch.setattr(QAccessible, "updateAccessibility", record)
    return heard


def test_a_finished_reply_and_an_error_are_announced(qtbot, tmp_path, tiny_engine, monkeypatch):
    heard = _spoken(monkeypatch)
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=6)
    window.send("Say something")
    wait_idle(qtbot, window)
    reply = window.controller.path()[-1].content
    finished = [(m, p) for m, p in heard if m.startswith("Reply finished: ")]
    assert finished == [(f"Reply finished: {' '.join(reply.split())}", POLITENESS.Polite)]

    window.notice.show_message("The model could not be loaded: no such folder.", "error")
    assert heard[-1] == ("The model could not be loaded: no such folder.", POLITENESS.Assertive)
    window.notice.show_message("Exported to chat.md", "info")
    assert heard[-1][0] != "Exported to chat.md"  # only errors interrupt
    close_window(window)


def test_text_size_follows_the_system(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    app = QApplication.instance()
    original = app.font()
    bigger = app.font()
    bigger.setPointSizeF(original.pointSizeF() + 4)
    try:
        app.setFont(bigger)
        QApplication.processEvents()
        assert window.composer.edit.font().pointSizeF() == theme.default_chat_pt()
        assert theme.default_chat_pt() > round(original.pointSizeF())
        assert f"font-size: {theme.type_scale().secondary}pt" in window.styleSheet()
    finally:
        app.setFont(original)
        QApplication.processEvents()
    assert window.composer.edit.font().pointSizeF() == theme.default_chat_pt()
    close_window(window)
