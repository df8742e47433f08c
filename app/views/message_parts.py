"""The pieces a message is made of besides its text: the note that says how a reply ended
(with its action), the branch switcher, and the card for a tool call."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.store import Message
from app.tools import tool_title
from app.views import theme
from app.views.icons import IconButton
from engine.types import Ending, StopReason, decide_ending, ending_note


@dataclass(frozen=True)
class Note:
    """How a reply ended, in plain words, and the action that moves on from it."""

    text: str
    kind: str = "quiet"  # quiet | warning | error
    action: str = ""  # "" | "retry" | "continue"


def message_ending(meta: dict[str, Any]) -> Ending:
    """How a saved reply ended: as stored, or for a reply saved before endings were, decided
    the engine's way from what was stored."""
    if meta.get("error"):
        return Ending.FAILED
    stored = meta.get("ending")
    if stored in set(Ending):
        return Ending(stored)
    try:
        stop = StopReason(meta.get("stop_reason") or "eos")
    except ValueError:
        stop = StopReason.EOS
    stats = meta.get("stats") or {}
    return decide_ending(
        stop,
        closed_to_fit=bool(stats.get("closed_to_fit")),
        incomplete=bool(meta.get("incomplete")),
    )


def reply_note(message: Message, *, can_continue: bool = True) -> Note | None:
    """The note under a saved reply, from how it ended (`message_ending`)."""
    meta = message.meta
    ending = message_ending(meta)
    if ending == Ending.FAILED:
        return Note(f"The reply failed: {meta.get('error') or 'no reply'}", "error", "retry")
    if ending == Ending.CANCELLED:
        return Note("Stopped")
    if ending == Ending.CUT and meta.get("constraint"):
        return Note("Incomplete: the reply ended before it matched the format", "warning", "retry")
    as_written = meta.get("as_written") or {}
    if as_written.get("valid") is False:
        where = f" at {as_written['path']}" if as_written.get("path") else ""
        return Note(
            f"Not valid against your schema as written ({as_written.get('keyword')}{where}): "
            f"{as_written.get('message', '')}",
            "warning",
            "retry",
        )
    stats = meta.get("stats") or {}
    if ending == Ending.FILLED:
        note = ending_note(
            Ending.FILLED,
            close_reason=stats.get("close_reason") or "",
            budget=int(stats.get("budget_tokens") or 0),
            filled=list(meta.get("filled_paths") or []),
        )
        return Note(note, "warning", "retry")
    if ending == Ending.CUT:
        tokens = int(stats.get("generated_tokens") or 0)
        limit = f"the {tokens}-token limit" if tokens else "the length limit"
        if can_continue and not meta.get("tool_calls") and not meta.get("constraint"):
            return Note(f"Stopped at {limit}", "quiet", "continue")
        return Note(f"Stopped at {limit}")
    if not message.content and not meta.get("tool_calls"):
        return Note("The model ended its reply without any text", "warning", "retry")
    return None


def is_tool_error(result: str) -> bool:
    """Whether a built-in tool's result is an error: "error: …" from the tool itself
    (engine.tools.builtins), "Error: …" when running it failed (main/files.py)."""
    return result[:6].lower() == "error:"


def label(text: str, name: str, parent: QWidget, selectable: bool = True) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class BranchSwitcher(QWidget):
    """ "‹ 2/3 ›": step between the versions of a message."""

    stepped = Signal(int)

    def __init__(self, index: int, count: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("branchSwitcher")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.previous = IconButton("left", "Previous version", self, size=16)
        self.label = QLabel(f"{index}/{count}", self)
        self.label.setObjectName("branchLabel")
        self.next = IconButton("right", "Next version", self, size=16)
        self.previous.setEnabled(index > 1)
        self.next.setEnabled(index < count)
        for w in (self.previous, self.label, self.next):
            layout.addWidget(w)
        self.previous.clicked.connect(lambda: self.stepped.emit(-1))
        self.next.clicked.connect(lambda: self.stepped.emit(1))


class ToolCallCard(QFrame):
    """A tool call: its name and arguments, then its result or a field to give one."""

    resultSubmitted = Signal(str, str, str)  # call id, tool name, result text
    runRequested = Signal(str, str, object)  # call id, tool name, arguments

    def __init__(
        self,
        call: dict[str, Any],
        result: str | None,
        *,
        builtin: bool,
        interactive: bool,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.call = call
        self.setObjectName("toolCard")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.M, theme.SPACE.S, theme.SPACE.M, theme.SPACE.M)
        layout.setSpacing(theme.SPACE.XS)
        name = call["name"]
        shown = tool_title(name) if builtin else name
        title = label(f"Calls the tool {shown}", "toolTitle", self, selectable=False)
        if shown != name:
            title.setToolTip(f"The model calls it {name}")
        layout.addWidget(title)
        args = label(
            json.dumps(call.get("arguments", {}), indent=2, ensure_ascii=False),
            "toolArguments",
            self,
        )
        args.setFont(theme.mono_font(theme.type_scale().secondary))
        layout.addWidget(args)
        self.result_field: QLineEdit | None = None
        self.run_button: QPushButton | None = None
        if result is not None:
            if is_tool_error(result):  # red and said as an error, not grey like a result
                failed = result.split(":", 1)[1].strip() if ":" in result else result
                layout.addWidget(label(f"The tool reported an error: {failed}", "toolError", self))
            else:
                layout.addWidget(label(f"Result: {result}", "toolResult", self))
            return
        row = QHBoxLayout()
        row.setSpacing(theme.SPACE.S)
        self.result_field = QLineEdit(self)
        self.result_field.setPlaceholderText("Type the tool's result, then Enter")
        self.result_field.setEnabled(interactive)
        self.result_field.setMinimumWidth(120)
        send = QPushButton("Send result", self)
        send.setEnabled(interactive)
        row.addWidget(self.result_field, 1)
        row.addWidget(send)
        if builtin:
            self.run_button = QPushButton("Run it", self)
            self.run_button.setToolTip(f"Run the built-in {call['name']} tool on this machine")
            self.run_button.setEnabled(interactive)
            self.run_button.clicked.connect(
                lambda: self.runRequested.emit(call["id"], call["name"], call.get("arguments"))
            )
            row.addWidget(self.run_button)
        layout.addLayout(row)
        self.result_field.returnPressed.connect(self._submit)
        send.clicked.connect(self._submit)

    def set_interactive(self, enabled: bool) -> None:
        for w in self.findChildren(QPushButton) + self.findChildren(QLineEdit):
            w.setEnabled(enabled)

    def _submit(self) -> None:
        if self.result_field is not None and self.result_field.text().strip():
            self.resultSubmitted.emit(
                self.call["id"], self.call["name"], self.result_field.text().strip()
            )
