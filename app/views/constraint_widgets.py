"""The constraint and tools chips above the composer, the "Constrain…" menu, and the
editor for pasted grammars. What the chips say comes from the controller's ChipState."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QTextCursor
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
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.constraints import KIND_LABELS, Checked, Checker, check_source
from app.controller import ChipState
from app.jobs.thread import run_task
from engine.constraints.validate import validate_constraint
from engine.types import ConstraintSpec, ConstraintUse


class ConstraintChip(QFrame):
    """ "Constraint: name · kind ✕": the active constraint, removable."""

    removeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("constraintChip")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 2, 2)
        layout.setSpacing(4)
        self.label = QLabel(self)
        self.label.setObjectName("chipLabel")
        self.close_button = QToolButton(self, autoRaise=True)
        self.close_button.setText("✕")
        self.close_button.setObjectName("chipRemove")
        self.close_button.setToolTip("Remove the constraint")
        layout.addWidget(self.label)
        layout.addWidget(self.close_button)
        self.close_button.clicked.connect(self.removeRequested)
        self.spec: ConstraintSpec | None = None

    def set_spec(self, spec: ConstraintSpec | None, use: ConstraintUse | None = None) -> None:
        """Show `spec`; `use` says how it goes with the tools, when they are on."""
        self.spec = spec
        self.use = use
        if spec is not None:
            kind = KIND_LABELS.get(spec.kind, spec.kind)
            name = spec.name or kind
            shown = f"{name} · {kind}" if name != kind else kind
            if use == "paused":
                self.label.setText(f"Constraint: {shown} — paused while tools are on")
                self.setToolTip(
                    f"While tools are on, replies are tool calls only (or the model's calls "
                    f"could pass for text of this {kind}), so it does not apply. Turn the "
                    "tools off, or set tool choice to auto, to use it again."
                )
            elif use == "with_tools":
                self.label.setText(f"Constraint: {shown} — or a tool call")
                self.setToolTip(f"Every reply must fit this {kind} or be a tool call.")
            else:
                self.label.setText(f"Constraint: {shown}")
                self.setToolTip(f"Every reply must fit this {kind}. Click ✕ to remove it.")
        self.setProperty("paused", use == "paused")
        self.setVisible(spec is not None)


class ToolsChip(QLabel):
    """ "Tools: calculator, clock (auto)", with ⚠ and the reasons when Corral cannot enforce
    all of a tool's schema."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolsChip")
        self.warnings: tuple[str, ...] = ()
        self.setVisible(False)

    def set_tools(self, names: tuple[str, ...], choice: str, warnings: tuple[str, ...]) -> None:
        self.warnings = warnings
        shown = ", ".join(names)
        self.setText(f"Tools: {shown} ({choice})" + (" ⚠" if warnings else ""))
        tip = f"The model may call: {shown} (tool choice: {choice})."
        if warnings:
            tip += "\n\nNot enforced:\n" + "\n".join(f"• {w}" for w in warnings)
        self.setToolTip(tip)
        self.setVisible(bool(names))


class ConstraintBar(QWidget):
    """The row above the composer: the chip, a "Constrain…" menu and the last error."""

    openFileRequested = Signal()
    editorRequested = Signal()
    anyJsonRequested = Signal()
    removeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.chip = ConstraintChip(self)
        self.chip.setVisible(False)
        self.chip.removeRequested.connect(self.removeRequested)
        self.tools_chip = ToolsChip(self)
        self.button = QToolButton(self)
        self.button.setText("Constrain…")
        self.button.setObjectName("constrainButton")
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.button)
        menu.addAction("Open grammar or schema file…", self.openFileRequested.emit)
        menu.addAction("Write or paste a grammar…", self.editorRequested.emit)
        menu.addAction("Any JSON", self.anyJsonRequested.emit)
        self.button.setMenu(menu)
        self.error = QLabel(self)
        self.error.setObjectName("constraintError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setVisible(False)
        layout.addWidget(self.chip)
        layout.addWidget(self.tools_chip)
        layout.addWidget(self.button)
        layout.addWidget(self.error, 1)
        layout.addStretch(0)

    def set_state(self, state: ChipState) -> None:
        """Show the conversation's constraint and tools as the controller describes them."""
        self.chip.set_spec(state.constraint, state.constraint_use)
        self.tools_chip.set_tools(state.tools, state.tool_choice, state.tool_warnings)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))


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
        self.setWindowTitle("Constrain replies")
        self.resize(620, 460)
        self.checked: Checked | None = None
        self._generation = 0
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Kind:", self))
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
