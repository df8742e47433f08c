"""Telling assistive technology what happened where nothing else would: a reply that has
finished, an error. Screen readers follow focus and text that changes under it; a reply
written into the chat while the user stays in the composer, or a notice shown above it,
would otherwise pass in silence. Qt's announcement event (Qt 6.8+) is spoken by VoiceOver,
Orca and NVDA; politeness is "polite" (after what is being read) for a finished reply and
"assertive" (at once) for an error."""

from __future__ import annotations

from PySide6.QtGui import QAccessible, QAccessibleAnnouncementEvent
from PySide6.QtWidgets import QWidget

SPOKEN_MAX = 160  # characters of a reply read out: enough to know which one it is


def announce(widget: QWidget, text: str, *, assertive: bool = False) -> None:
    """Ask assistive technology to speak `text`, on behalf of `widget`."""
    if not text:
        return
    event = QAccessibleAnnouncementEvent(widget, text)
    politeness = QAccessible.AnnouncementPoliteness
    event.setPoliteness(politeness.Assertive if assertive else politeness.Polite)
    QAccessible.updateAccessibility(event)


def reply_announcement(text: str, error: str | None = None) -> str:
    """What is spoken when a reply ends: its start, or why it failed."""
    if error:
        return f"The reply failed: {error}"
    words = " ".join(text.split())
    if not words:
        return "The reply is finished, without any text."
    if len(words) > SPOKEN_MAX:
        words = words[:SPOKEN_MAX].rsplit(" ", 1)[0] + "…"
    return f"Reply finished: {words}"
