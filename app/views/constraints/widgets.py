"""The constraint chip in the composer, its "Format" menu, and the editor for pasted
schemas, grammars and regular expressions. What the chip says comes from the
controller's ChipState (the constraint, and how it goes with the tools when they are on)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QMouseEvent, QPainter, QPaintEvent, QTextCursor
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.formats import ChipState
from app.constraints import KIND_LABELS, Checked, Checker, check_source, describe_constraint
from app.jobs.thread import run_task
from app.views.common import theme
from app.views.common.fit import fit_to_screen
from app.views.common.icons import IconButton, icon
from app.views.common.keyboard import guard_text_boxes
from engine.constraints.validate import validate_constraint
from engine.types import ConstraintSpec, ConstraintUse


class ElidedLabel(QLabel):
    """One line for a chip in a narrow composer: the whole text where it fits, else
    `short` (the constraint's own name), cut with "…" if that does not fit either; the
    tooltip then shows the whole text, which `text()` keeps. It asks for its full width
    and accepts that of MIN_CHARS characters of `short`."""

    MIN_CHARS = 10

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.short = ""

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        short = self.short or self.text()
        if len(short) > self.MIN_CHARS:
            short = short[: self.MIN_CHARS] + "…"
        width = self.fontMetrics().horizontalAdvance(short)
        return QSize(min(hint.width(), width), hint.height())

    def shown_text(self) -> str:
        room = self.contentsRect().width()
        metrics = self.fontMetrics()
        if metrics.horizontalAdvance(self.text()) <= room:
            return self.text()
        return metrics.elidedText(self.short or self.text(), Qt.TextElideMode.ElideRight, room)

    def paintEvent(self, event: QPaintEvent) -> None:
        shown = self.shown_text()
        self.setToolTip(self.text() if shown != self.text() else "")
        self.style().drawItemText(
            QPainter(self),
            self.contentsRect(),
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            self.palette(),
            self.isEnabled(),
            shown,
            self.foregroundRole(),
        )


class ConstraintChip(QFrame):
    """ "Reply as: recipe.json (JSON schema) ✕": the active constraint, removable; a click
    on it asks for another (`clicked`)."""

    removeRequested = Signal()
    clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chip")
        self.setProperty("active", True)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.S, 1, 1, 1)
        layout.setSpacing(theme.SPACE.XXS)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.label = ElidedLabel(self)
        self.label.setObjectName("chipLabel")
        self.close_button = IconButton("close", "Remove (replies go back to free text)", self)
        self.close_button.setIconSize(QSize(14, 14))
        self.close_button.setObjectName("chipRemove")
        layout.addWidget(self.label)
        layout.addWidget(self.close_button)
        self.close_button.clicked.connect(self.removeRequested)
        self.spec: ConstraintSpec | None = None
        self.use: ConstraintUse | None = None
        self.tight: tuple[str, ...] = ()
        self.warnings: tuple[str, ...] = ()

    def set_spec(
        self,
        spec: ConstraintSpec | None,
        use: ConstraintUse | None = None,
        tight: tuple[str, ...] = (),
        warnings: tuple[str, ...] = (),
    ) -> None:
        """Show `spec`; `use` says how it goes with the tools, when they are on; `tight` what
        the tight defaults do to a JSON schema; `warnings` what Corral cannot enforce of it
        (a warning mark, listed in the tooltip)."""
        self.spec = spec
        self.use = use
        self.tight, self.warnings = tight, warnings
        if spec is not None:
            text = describe_constraint(spec.kind, spec.name)
            if tight:
                text += f" · tight: {tight[0]}"
            if warnings:
                text = f"⚠ {text}"
            self.label.setText(text)
            kind = KIND_LABELS.get(spec.kind, spec.kind)
            if use == "paused":
                self.label.setText(f"{text} — paused while tools are on")
                self.setToolTip(
                    f"While a tool call is required (or the model's calls could pass for text "
                    f"of this {kind}), replies are tool calls only, so it does not apply. "
                    "Let the model decide when to call a tool, or turn the tools off, to use "
                    "it again."
                )
            elif use == "with_tools":
                self.label.setText(f"{text}, or a tool call")
                self.setToolTip(f"Every reply must fit this {kind} or be a tool call.")
            else:
                self.setToolTip(f"Every reply must fit this {kind}, token by token.")
            extra = []
            if tight:
                extra.append(
                    "Tight defaults (replies still fit the schema as written): "
                    + "; ".join(tight)
                    + ". Preferences › Reply formats allows everything the schema allows."
                )
            if warnings:
                extra.append("Not enforced:\n" + "\n".join(f"• {w}" for w in warnings))
            if extra:
                self.setToolTip("\n\n".join([self.toolTip(), *extra]))
            self.label.short = (spec.name or kind) + (" (paused)" if use == "paused" else "")
        self.setProperty("paused", use == "paused")
        self.setVisible(spec is not None)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mousePressEvent(event)


class ConstraintBar(QWidget):
    """The chip and the "Format" menu (in the composer's row), and the last error (shown
    above the composer, in the window's layout). While a chip shows, the menu opens from
    a click on it and the button steps aside, leaving a narrow composer room for the
    tools chip too."""

    openFileRequested = Signal()
    editorRequested = Signal()
    anyJsonRequested = Signal()
    removeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(theme.SPACE.S)
        self.chip = ConstraintChip(self)
        self.chip.setVisible(False)
        self.chip.removeRequested.connect(self.removeRequested)
        self.chip.clicked.connect(self._menu_from_chip)
        self.button = QToolButton(self)
        self.button.setObjectName("constrainButton")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setToolTip(
            "Make replies follow a JSON schema, a grammar or a regular expression"
        )
        menu = QMenu(self.button)
        menu.addAction("Use a schema or grammar file…", self.openFileRequested.emit)
        menu.addAction("Write or paste one…", self.editorRequested.emit)
        menu.addAction("Any valid JSON", self.anyJsonRequested.emit)
        self.button.setMenu(menu)
        self.error = QLabel(parent)
        self.error.setObjectName("constraintError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setVisible(False)
        layout.addWidget(self.chip)
        layout.addWidget(self.button)
        self._refresh_button()

    def set_state(self, state: ChipState) -> None:
        """Show the conversation's constraint as the controller describes it."""
        self.chip.set_spec(
            state.constraint,
            state.constraint_use,
            state.constraint_tight,
            state.constraint_warnings,
        )
        if state.constraint is not None:
            self.chip.setToolTip(self.chip.toolTip() + "\n\nClick to choose another format.")
        self._refresh_button()

    def _refresh_button(self) -> None:
        self.button.setText("Format")
        self.button.setIcon(icon("braces", size=16))
        self.button.setIconSize(QSize(16, 16))
        self.button.setVisible(self.chip.spec is None)

    def _menu_from_chip(self) -> None:
        menu = self.button.menu()
        if menu is not None:
            menu.popup(self.chip.mapToGlobal(self.chip.rect().bottomLeft()))

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._refresh_button()


class ConstraintEditor(QDialog):
    """Write or paste a schema, grammar or regex; it is checked as you type and can only be
    applied once it is valid. Clicking an error moves the cursor to its line."""

    CHECK_DELAY_MS = 300

    def __init__(
        self,
        parent: QWidget | None = None,
        spec: ConstraintSpec | None = None,
        check: Checker | None = None,
    ) -> None:
        super().__init__(parent)
        self._check_fn: Checker = check or validate_constraint
        self.setWindowTitle("Reply format")
        self.resize(620, 460)
        self.checked: Checked | None = None
        self._generation = 0
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Replies must follow this", self))
        self.kind = QComboBox(self)
        for kind, label in KIND_LABELS.items():
            if kind != "any_json":
                self.kind.addItem(label, kind)
        row.addWidget(self.kind)
        row.addStretch(1)
        layout.addLayout(row)
        self.text = QPlainTextEdit(self)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText(
            '{"type": "object", "properties": {"answer": {"type": '
            '"string"}}, "required": ["answer"]}'
        )
        layout.addWidget(self.text, 1)
        self.problems = QListWidget(self)
        self.problems.setObjectName("constraintProblems")
        self.problems.setMaximumHeight(90)
        layout.addWidget(self.problems)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Apply | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.apply_button = self.buttons.button(QDialogButtonBox.StandardButton.Apply)
        self.apply_button.setEnabled(False)
        layout.addWidget(self.buttons)
        if spec is not None and spec.kind != "any_json":
            self.kind.setCurrentIndex(max(0, self.kind.findData(spec.kind)))
            self.text.setPlainText(spec.source)
        self._timer = QTimer(self, singleShot=True, interval=self.CHECK_DELAY_MS)
        self._timer.timeout.connect(self.check)
        self.text.textChanged.connect(self._changed)
        self.kind.currentIndexChanged.connect(self._changed)
        self.problems.itemActivated.connect(self._goto)
        self.problems.itemClicked.connect(self._goto)
        self.apply_button.clicked.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        if spec is not None:
            self.check()
        guard_text_boxes(self)  # Tab moves on to the problems and Apply
        fit_to_screen(self)

    def _changed(self) -> None:
        self.apply_button.setEnabled(False)
        self._timer.start()

    def check(self) -> None:
        """Validate on a worker thread; only the latest check's answer counts."""
        self._generation += 1
        generation = self._generation
        kind, source = self.kind.currentData(), self.text.toPlainText()
        check = self._check_fn
        run_task(
            lambda: check_source(kind, source, check=check),
            lambda result, error: self._checked(generation, result, error),
        )

    def _checked(
        self, generation: int, result: Checked | None, error: BaseException | None
    ) -> None:
        if generation != self._generation:
            return
        self.problems.clear()
        if error is not None or result is None:
            self.problems.addItem(f"Could not check: {error}")
            return
        self.checked = result
        for problem in result.errors + result.warnings:
            prefix = "Error" if problem in result.errors else "Warning"
            item = QListWidgetItem(f"{prefix}: {problem}")
            item.setData(Qt.ItemDataRole.UserRole, problem.line)
            self.problems.addItem(item)
        if result.ok:
            self.problems.insertItem(0, "✓ Valid")
        self.apply_button.setEnabled(result.ok)

    def _goto(self, item: QListWidgetItem) -> None:
        line = item.data(Qt.ItemDataRole.UserRole)
        if isinstance(line, int) and line > 0:
            block = self.text.document().findBlockByNumber(line - 1)
            cursor = QTextCursor(block)
            self.text.setTextCursor(cursor)
            self.text.setFocus()

    def spec(self) -> ConstraintSpec | None:
        return self.checked.spec if self.checked is not None and self.checked.ok else None
