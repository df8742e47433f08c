"""Keyboard use of the window: text boxes never trap Tab, a message shows its actions
while focus is inside it, and the composer gets focus back when an action leaves it.

Tab and Shift+Tab always move focus, in every multi-line text box (the system prompt, the
grammar editor, the tools editor, the composer): a box that took Tab as text trapped the
keyboard user and saved tab characters nobody asked for. A tab character is typed with
Ctrl+Tab or Alt+Tab (Option+Tab on a Mac) where the box is editable."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QTextEdit, QWidget

TAB_MODIFIERS = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier


class _TabInserter(QObject):
    """Types a tab character into an editable text box on Ctrl+Tab or Alt+Tab."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Tab
            and event.modifiers() & TAB_MODIFIERS
            and isinstance(watched, (QPlainTextEdit, QTextEdit))
            and not watched.isReadOnly()
        ):
            watched.textCursor().insertText("\t")
            return True
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Tab
            and event.modifiers() & TAB_MODIFIERS
        ):
            event.accept()  # the box takes it, not a window shortcut
            return True
        return super().eventFilter(watched, event)


_inserter: _TabInserter | None = None


def _tab_inserter() -> _TabInserter:
    global _inserter
    if _inserter is None:
        _inserter = _TabInserter(QApplication.instance())
    return _inserter


def guard_text_boxes(root: QWidget) -> int:
    """Make every multi-line text box under `root` (and `root` itself) pass Tab on as focus
    movement; return how many there are. Call it on each window or dialog once built."""
    boxes: list[QPlainTextEdit | QTextEdit] = [
        *root.findChildren(QPlainTextEdit),
        *root.findChildren(QTextEdit),
    ]
    if isinstance(root, (QPlainTextEdit, QTextEdit)):
        boxes.append(root)
    inserter = _tab_inserter()
    for box in boxes:
        if box.property("tabGuarded"):
            continue
        box.setTabChangesFocus(True)
        box.installEventFilter(inserter)
        box.setProperty("tabGuarded", True)
    return len(boxes)


def place_in_chain(widgets: list[QWidget], before: QWidget) -> None:
    """Put `widgets`, each with its descendants, in order just before `before` in the Tab
    order. Qt appends a widget made later (a message rendered, a chip attached) at the end
    of the window's chain, after the composer and the panels: Shift+Tab from the composer
    then skipped the chat; this puts them where they are seen."""
    moving = [w for w in widgets if w is not None]
    if not moving:
        return
    # Qt's setTabOrder leaves a widget that takes no focus where it is: only those that do
    chain = [x for x in _chain(before) if x.focusPolicy() != Qt.FocusPolicy.NoFocus]
    inside = {id(x) for w in moving for x in chain if x is w or w.isAncestorOf(x)}
    index = len(chain) - 1  # walking back from `before` to the first widget not moving
    while index > 0 and id(chain[index]) in inside:
        index -= 1
    anchor = chain[index]
    for widget in moving:
        for item in [x for x in chain if x is widget or widget.isAncestorOf(x)]:
            QWidget.setTabOrder(anchor, item)
            anchor = item


def _chain(start: QWidget) -> list[QWidget]:
    """The window's focus chain, once round, from `start` (`start` first)."""
    chain = [start]
    item = start.nextInFocusChain()
    while item is not start and item is not None and len(chain) < 100_000:
        chain.append(item)
        item = item.nextInFocusChain()
    return chain


def focus_within(widget: QWidget, focus: QWidget | None = None) -> bool:
    """Whether `focus` (the application's focus widget by default) is `widget` or inside it."""
    current = focus if focus is not None else QApplication.focusWidget()
    while current is not None:
        if current is widget:
            return True
        current = current.parentWidget()
    return False


def _holder(widget: QWidget | None) -> QWidget | None:
    """The nearest widget at or above `widget` that shows things while focus is inside it
    (a message: its Copy, Inspect and other actions)."""
    while widget is not None:
        if hasattr(widget, "set_focus_within"):
            return widget
        widget = widget.parentWidget()
    return None


class MessageFocus(QObject):
    """Tells a message when focus enters or leaves it, so its actions (shown on hover for
    the mouse) are in the Tab order while the keyboard is there."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._changed)

    def _changed(self, old: QWidget | None, new: QWidget | None) -> None:
        try:
            before = _holder(old)
        except RuntimeError:  # focus left a widget being deleted (the chat re-rendered)
            before = None
        after = _holder(new)
        if before is after:
            return
        try:
            if before is not None:
                before.set_focus_within(False)  # type: ignore[attr-defined]
        except RuntimeError:
            pass
        if after is not None:
            after.set_focus_within(True)  # type: ignore[attr-defined]
