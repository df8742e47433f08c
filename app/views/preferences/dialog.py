"""The Preferences window, in pages: General (appearance, chat text size, the log), Chat
defaults (what new chats start from, showing the loaded model's own sampling where they
follow it), Models (the model to start with, memory, replies at once, where it runs),
Server, Tools (what new chats may use) and Advanced (speed and precision settings and how
JSON schemas are followed, each with a one-line explanation). Every change applies at once
and is remembered (there is no OK button to forget); `changed` carries the new Preferences.

Other parts of the app add their own sections (the local server, distributed models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.preferences import MAX_ROWS_LIMIT, Preferences
from app.tools import tool_title
from app.views.common import theme
from app.views.common.fit import fit_to_screen
from app.views.common.forms import hint, section
from engine.types import ToolDefinition

APPEARANCES = (("system", "Match the system"), ("light", "Light"), ("dark", "Dark"))
PAGES = ("General", "Chat defaults", "Models", "Server", "Tools", "Advanced")  # in order
LAST_USED = ""
BUNDLED = "default"


class PreferencesDialog(QDialog):
    changed = Signal(object)  # Preferences

    def __init__(
        self,
        prefs: Preferences,
        *,
        presets: dict[str, str],
        builtin_tools: list[ToolDefinition],
        current_model: str = "",
        parent: QWidget | None = None,
        sections: Sequence[tuple[str, QWidget]] = (),
        model_sections: Sequence[QWidget] = (),
        model_defaults: Mapping[str, float] | None = None,
        model_name: str = "",
    ) -> None:
        """`sections`: (title, widget) sections other parts of the app provide (the local
        server, on the Server page), `model_sections` widgets that belong under Models
        (where the model runs); they apply their own values (the window reads them when
        this closes). `model_defaults`: the loaded model's recommended sampling, shown where
        new chats follow it."""
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.setObjectName("preferences")
        self.prefs = replace(prefs)
        self._presets = presets
        self._forms: list[QFormLayout] = []
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, theme.SPACE.S, 0, theme.SPACE.M)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        outer.addWidget(self.tabs, 1)
        self.pages: dict[str, QVBoxLayout] = {}

        # General
        self._page("General")
        form = self._section("Appearance")
        self.appearance = QComboBox(self)
        for value, label in APPEARANCES:
            self.appearance.addItem(label, value)
        self.appearance.setCurrentIndex(max(0, self.appearance.findData(prefs.appearance)))
        form.addRow("Colours", self.appearance)
        self.chat_size = QSpinBox(self, minimum=9, maximum=28, suffix=" pt")
        self.chat_size.setValue(round(prefs.chat_font_pt or theme.default_chat_pt()))
        self.chat_size.setToolTip("The size of the conversation's text")
        form.addRow("Chat text", self.chat_size)

        # Models
        self._page("Models")
        form = self._section("Model")
        self.default_model = QComboBox(self)
        self.default_model.addItem("The last one used", LAST_USED)
        self.default_model.addItem("SmolLM2-135M-Instruct (comes with Corral)", BUNDLED)
        if current_model and current_model not in (BUNDLED, LAST_USED):
            self.default_model.addItem(current_model, current_model)
        if prefs.default_model and self.default_model.findData(prefs.default_model) < 0:
            self.default_model.addItem(prefs.default_model, prefs.default_model)
        self.default_model.setCurrentIndex(max(0, self.default_model.findData(prefs.default_model)))
        form.addRow("Start with", self.default_model)
        self.kv_budget = QSpinBox(self, minimum=0, maximum=1024 * 1024, singleStep=256)
        self.kv_budget.setSuffix(" MB")
        self.kv_budget.setSpecialValueText("Automatic")
        self.kv_budget.setValue(prefs.kv_budget_mb)
        form.addRow("Memory for reuse", self.kv_budget)
        form.addRow(
            hint(
                "Memory kept for reusing what the model already read (earlier turns, shared "
                "system prompts), so replies start sooner. Automatic sizes it to the free "
                "memory.",
                self,
            )
        )
        self.max_rows = QSpinBox(self, minimum=1, maximum=MAX_ROWS_LIMIT, suffix=" replies")
        self.max_rows.setValue(prefs.max_rows)
        form.addRow("Write at once", self.max_rows)
        form.addRow(
            hint(
                "Replies the model writes side by side (Versions, and apps using the local "
                "server): together they take far less time than one after another. Each "
                "needs its own memory; 1 writes them one at a time.",
                self,
            )
        )
        for widget in model_sections:
            self.page.addSpacing(theme.SPACE.S)
            self.page.addWidget(widget)

        # Chat defaults
        self._page("Chat defaults")
        form = self._section("New chats start with")
        self.new_prompt = QComboBox(self)
        self.new_prompt.addItem("No system prompt", "")
        for name in sorted(presets):
            self.new_prompt.addItem(name, presets[name])
        current = prefs.new_chat.system_prompt
        index = self.new_prompt.findData(current)
        if index < 0 and current:
            self.new_prompt.addItem("Custom prompt", current)
            index = self.new_prompt.count() - 1
        self.new_prompt.setCurrentIndex(max(0, index))
        form.addRow("System prompt", self.new_prompt)
        self.follow_model = QCheckBox("Each model's recommended sampling", self)
        custom = prefs.new_chat.custom_fields()
        self.follow_model.setChecked(not custom)
        form.addRow("Sampling", self.follow_model)
        effective = prefs.new_chat.effective(model_defaults)
        self._model_defaults = dict(model_defaults or {})
        self.temperature = QDoubleSpinBox(self, minimum=0.0, maximum=2.0, singleStep=0.05)
        self.temperature.setValue(effective["temperature"])
        self.top_p = QDoubleSpinBox(self, minimum=0.01, maximum=1.0, singleStep=0.01)
        self.top_p.setValue(effective["top_p"])
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        follows = (
            f"Following the model: {model_name}'s recommended values."
            if model_name and model_defaults
            else "Following the model: its recommended values once it is loaded."
        )
        self.follow_hint = hint(follows, self)
        self.follow_hint.setObjectName("followHint")
        form.addRow(self.follow_hint)
        self.max_tokens = QSpinBox(self, minimum=1, maximum=32768, suffix=" tokens")
        self.max_tokens.setValue(prefs.new_chat.max_tokens)
        form.addRow("Longest reply", self.max_tokens)

        # Server: the local server's own section
        self._page("Server")
        for title, widget in sections:
            if title:
                self.page.addWidget(section(title, self))
            self.page.addWidget(widget)

        # Tools
        self._page("Tools")
        form = self._section("New chats can use")
        self.tool_boxes: dict[str, QCheckBox] = {}
        for tool in builtin_tools:
            name = tool["function"]["name"]
            box = QCheckBox(tool_title(name), self)
            box.setToolTip(f"{name}: {tool['function'].get('description', '')}")
            box.setChecked(name in prefs.new_chat_tools.builtins)
            form.addRow("Built-in tools" if not self.tool_boxes else "", box)
            self.tool_boxes[name] = box

        # Advanced: speed and precision, how schemas are followed
        self._page("Advanced")
        form = self._section("Speed and memory")
        self.speculative = QCheckBox("Guess ahead from the conversation", self)
        self.speculative.setChecked(prefs.speculative)
        self.speculative.setToolTip(
            "Guess the next tokens from the conversation and check them in one pass; the reply"
            " is the same. Replies that record token probabilities (Inspect) do not guess."
        )
        form.addRow("Speculative decoding", self.speculative)
        form.addRow(
            hint(
                "The model checks several guessed words at once (guesses copied from the "
                "conversation): the same replies, sooner where they repeat what was said. "
                "It stops guessing by itself where guesses do not pay.",
                self,
            )
        )
        self.kv_bits = QComboBox(self)
        for label, bits in (("Full", None), ("8 bits", 8), ("4 bits", 4)):
            self.kv_bits.addItem(label, bits)
        self.kv_bits.setCurrentIndex(max(0, self.kv_bits.findData(prefs.kv_bits)))
        self.kv_bits.setToolTip(
            "Hold what the model read at lower precision: 8 bits takes about half the memory "
            "(replies nearly always the same), 4 bits about a quarter, so longer chats fit."
        )
        form.addRow("KV cache precision", self.kv_bits)
        form.addRow(
            hint(
                "How exactly the memory for reuse holds what the model read: 8 bits takes "
                "about half the memory, 4 bits a quarter, so longer chats fit.",
                self,
            )
        )
        form = self._section("Reply formats")
        self.allow_extra = QCheckBox("Allow keys and values a schema does not declare", self)
        self.allow_extra.setChecked(prefs.allow_extra_properties)
        form.addRow("JSON schemas", self.allow_extra)
        form.addRow(
            hint(
                "Off (the default), replies use only the keys a schema declares, numbers "
                "of a sensible size and shallow free-form values: still valid, and they end.",
                self,
            )
        )
        self.strict_schema = QCheckBox("Refuse schemas Corral cannot fully enforce", self)
        self.strict_schema.setChecked(prefs.strict_schema)
        form.addRow("", self.strict_schema)
        self.close_loops = QCheckBox("Move a reply on when it repeats itself inside a value", self)
        self.close_loops.setChecked(prefs.close_loops)
        form.addRow("", self.close_loops)
        self.record_logprobs = QCheckBox("Record token probabilities (Inspect a reply)", self)
        self.record_logprobs.setToolTip(
            "Keep what the model wanted at each token and what the constraint allowed, "
            "shown by a reply's Inspect action"
        )
        self.record_logprobs.setChecked(prefs.record_logprobs)
        form.addRow("", self.record_logprobs)
        self._page_general_log()
        self._sampling_enabled()
        for page in self.pages.values():
            page.addStretch(1)
        self._align_labels()
        # Made last, so Tab reaches Close after the page's controls, not before them.
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.buttons.rejected.connect(self.close)
        self.buttons.setContentsMargins(theme.SPACE.XL, 0, theme.SPACE.XL, 0)
        outer.addWidget(self.buttons)
        self.resize(520, 620)
        fit_to_screen(self)  # a short screen scrolls the page instead

        self.appearance.currentIndexChanged.connect(self._edited)
        self.chat_size.valueChanged.connect(self._edited)
        self.default_model.currentIndexChanged.connect(self._edited)
        self.kv_budget.valueChanged.connect(self._edited)
        self.max_rows.valueChanged.connect(self._edited)
        self.speculative.toggled.connect(self._edited)
        for box in (self.allow_extra, self.strict_schema, self.close_loops, self.record_logprobs):
            box.toggled.connect(self._edited)
        self.log_level.currentIndexChanged.connect(self._edited)
        self.new_prompt.currentIndexChanged.connect(self._edited)
        self.follow_model.toggled.connect(self._edited)
        for w in (self.temperature, self.top_p):
            w.valueChanged.connect(self._edited)
        self.max_tokens.valueChanged.connect(self._edited)
        for box in self.tool_boxes.values():
            box.toggled.connect(self._edited)

    def _page_general_log(self) -> None:
        """The log's level, on the General page (built after the others: its section goes
        below Appearance)."""
        self.page = self.pages["General"]
        form = self._section("Log")
        self.log_level = QComboBox(self)
        for label, value in (
            ("Warnings and errors", "warnings"),
            ("Info", "info"),
            ("Debug (includes message text)", "debug"),
        ):
            self.log_level.addItem(label, value)
        self.log_level.setCurrentIndex(max(0, self.log_level.findData(self.prefs.log_level)))
        self.log_level.setAccessibleName("Log level")
        self.log_level.setToolTip(
            "What Corral writes to its log file (Help → Show Logs). Keys and MCP secrets are "
            "never written; what you and the model write is logged only at Debug."
        )
        form.addRow("Log holds", self.log_level)
        form.addRow(
            hint(
                "What the log file holds (Help → Show Logs). What you and the model write is "
                "logged only at Debug; API keys and MCP secrets never are.",
                self,
            )
        )

    def _page(self, title: str) -> None:
        """Start a page (a tab whose content scrolls vertically, never sideways)."""
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # its controls take focus
        page = QWidget(scroll)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(theme.SPACE.XL, theme.SPACE.L, theme.SPACE.XL, theme.SPACE.L)
        layout.setSpacing(theme.SPACE.S)
        scroll.setWidget(page)
        before = PAGES[: PAGES.index(title)]
        self.tabs.insertTab(sum(t in self.pages for t in before), scroll, title)
        self.pages[title] = layout
        self.page = layout

    def _align_labels(self) -> None:
        """One label column across the sections, so the fields line up."""
        labels: list[QWidget] = []
        for form in self._forms:
            for row in range(form.rowCount()):
                item = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
                label = item.widget() if item is not None else None
                if label is not None:
                    labels.append(label)
        width = max((label.sizeHint().width() for label in labels), default=0)
        for label in labels:
            label.setMinimumWidth(width)

    def _section(self, title: str) -> QFormLayout:
        if self.page.count():
            self.page.addSpacing(theme.SPACE.M)
        self.page.addWidget(section(title, self))
        form = QFormLayout()
        form.setSpacing(theme.SPACE.S)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        self.page.addLayout(form)
        self._forms.append(form)
        return form

    def add_section(self, title: str, widget: QWidget) -> None:
        """Settings from another part of the app, under their own title on the Advanced
        page."""
        page = self.pages["Advanced"]
        page.insertSpacing(page.count() - 1, theme.SPACE.M)
        page.insertWidget(page.count() - 1, section(title, self))
        page.insertWidget(page.count() - 1, widget)

    def _sampling_enabled(self) -> None:
        """Following the model, the boxes show (greyed) the values the model uses."""
        follow = self.follow_model.isChecked()
        for w, name in ((self.temperature, "temperature"), (self.top_p, "top_p")):
            w.setEnabled(not follow)
            if follow:
                effective = replace(self.prefs.new_chat, temperature=None, top_p=None)
                with QSignalBlocker(w):
                    w.setValue(effective.effective(self._model_defaults)[name])
        self.follow_hint.setVisible(follow)

    def _edited(self, *_args: object) -> None:
        self._sampling_enabled()
        size = float(self.chat_size.value())
        new_chat = replace(
            self.prefs.new_chat,
            system_prompt=str(self.new_prompt.currentData() or ""),
            max_tokens=self.max_tokens.value(),
            temperature=None if self.follow_model.isChecked() else self.temperature.value(),
            top_p=None if self.follow_model.isChecked() else self.top_p.value(),
        )
        tools = replace(
            self.prefs.new_chat_tools,
            builtins=[name for name, box in self.tool_boxes.items() if box.isChecked()],
        )
        self.prefs = replace(
            self.prefs,
            appearance=str(self.appearance.currentData()),
            chat_font_pt=None if size == round(theme.default_chat_pt()) else size,
            default_model=str(self.default_model.currentData() or ""),
            kv_budget_mb=self.kv_budget.value(),
            max_rows=self.max_rows.value(),
            speculative=self.speculative.isChecked(),
            kv_bits=self.kv_bits.currentData(),
            new_chat=new_chat,
            new_chat_tools=tools,
            allow_extra_properties=self.allow_extra.isChecked(),
            strict_schema=self.strict_schema.isChecked(),
            close_loops=self.close_loops.isChecked(),
            record_logprobs=self.record_logprobs.isChecked(),
            log_level=str(self.log_level.currentData()),
        )
        self.changed.emit(self.prefs)

    def kv_budget_mb(self) -> int:
        return self.kv_budget.value()
