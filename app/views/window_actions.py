"""What the main window does with files and panels: constraint files, dropped or opened
(validated off the GUI thread, applied only when valid), the constraint editor, tools
files and built-in tool runs, and the changes made in the settings and tools panels and
the tools chip (all saved with the conversation)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QMainWindow

from app.constraints import KIND_LABELS, Checked, check_file, spec_from_dict
from app.jobs.mcp_job import looks_like_mcp_config
from app.jobs.thread import run_task
from app.store import ToolsConfig
from app.tools import looks_like_tools, run_builtin
from app.views.constraint_widgets import ConstraintEditor
from engine.types import ConstraintSpec


class WindowActions(QMainWindow):
    """MainWindow's file and panel actions; uses its store, controller, panels and bars."""

    store: Any
    bridge: Any
    controller: Any
    constraint_bar: Any
    settings_panel: Any
    tools_panel: Any
    tools_chip: Any
    shell: Any
    inspector_tabs: Any
    mcp_panel: Any
    notice: Any
    show_tools: Any

    def run_builtin_tool(self, call_id: str, name: str, arguments: object) -> None:
        args = arguments if isinstance(arguments, dict) else {}
        run_task(
            lambda: run_builtin(name, args),
            lambda result, error: self.controller.submit_tool_result(
                call_id, name, result if error is None else f"Error: {error}"
            ),
        )

    # ---- constraints ----

    def open_files(self, paths: list[str]) -> None:
        """Dropped or opened files: a tools list goes to the tools panel, anything else is
        checked as a constraint (a file that is neither gets a clear error)."""
        for path in paths[:1]:
            if path.lower().endswith(".json") and looks_like_mcp_config(path):
                self._bring_tools_forward()
                self.mcp_panel.import_file(path)
            elif path.lower().endswith(".json") and looks_like_tools(path):
                self.load_tools_file(path)
            else:
                self.open_constraint_file(path)

    def open_constraint_file(self, path: str, then: Callable[[], None] | None = None) -> None:
        """Check the file off the GUI thread; apply it if valid (then call `then`)."""
        self.constraint_bar.show_error(f"Checking {Path(path).name}…")
        check = self.bridge.check_constraint  # compiled for the loaded model, once
        run_task(
            lambda: check_file(path, check),
            lambda checked, error: self._constraint_checked(checked, error, then),
        )

    def _constraint_checked(
        self,
        checked: Checked | None,
        error: BaseException | None,
        then: Callable[[], None] | None = None,
    ) -> None:
        if error is not None or checked is None:
            self.constraint_bar.show_error(f"Could not check the file: {error}")
            return
        if not checked.ok:
            name = Path(checked.path).name if checked.path else "The constraint"
            problems = "; ".join(str(p) for p in checked.errors) or "not valid"
            self.constraint_bar.show_error(f"{name}: {problems} — nothing was applied.")
            return
        assert checked.spec is not None
        self.apply_constraint(checked.spec, checked.path)
        if then is not None:
            then()

    def apply_constraint(self, spec: ConstraintSpec, path: str | None = None) -> None:
        self.controller.set_constraint(spec, path)
        self.constraint_bar.show_error("")
        kind = KIND_LABELS.get(spec.kind, spec.kind)
        self.statusBar().showMessage(f"Replies now follow {spec.name or kind} ({kind}).", 5000)

    def remove_constraint(self) -> None:
        if self.controller.conversation_id is not None:
            self.controller.set_constraint(None)
        self.constraint_bar.show_error("")

    def choose_constraint_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Replies must follow",
            "",
            "Schemas and grammars (*.json *.lark *.gbnf *.regex *.re);;All files (*)",
        )
        if path:
            self.open_constraint_file(path)

    def open_constraint_editor(self) -> None:
        conv = self.controller.conversation
        current = spec_from_dict(conv.constraint) if conv and conv.constraint else None
        dialog = ConstraintEditor(self, current, self.bridge.check_constraint)
        dialog.accepted.connect(lambda: self._editor_accepted(dialog))
        dialog.open()  # window-modal, the event loop keeps running
        self.constraint_editor = dialog

    def _editor_accepted(self, dialog: ConstraintEditor) -> None:
        spec = dialog.spec()
        if spec is not None:
            name = "pasted " + KIND_LABELS[spec.kind]
            self.apply_constraint(replace(spec, name=name))

    # ---- tools and settings ----

    def choose_tools_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load tools", "", "Tool definitions (*.json)")
        if path:
            self.load_tools_file(path)

    def bring_forward(self, files: list[str]) -> None:
        """Another launch of Corral on this data folder: show this window, open its files."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()
        if files:
            self.open_files(files)

    def offer_shorter_prompt(self, message: str, tools_on: bool) -> None:
        """A prompt longer than the model reads: offer to leave out the oldest messages,
        or (when tools were offered) to turn tools off."""
        self.notice.show_message(
            f"{message}.",
            "error",
            action="Leave out oldest messages",
            callback=self.controller.drop_oldest_turns,
            second_action="Turn tools off" if tools_on else "",
            second_callback=self.controller.turn_tools_off if tools_on else None,
        )

    def load_tools_file(self, path: str) -> None:
        from engine.files import FileRefused, read_text_limited
        from engine.tools.definitions import MAX_FILE_BYTES

        try:
            text = read_text_limited(path, MAX_FILE_BYTES, "tools file")
        except FileRefused as exc:
            self.notice.show_message(str(exc), "error")
            return
        self._bring_tools_forward()
        self.tools_panel.load_text(text, Path(path).name)

    def _bring_tools_forward(self) -> None:
        if not (self.shell.inspector_open and self.inspector_tabs.currentIndex() == 1):
            self.show_tools()

    def _tools_changed(self, config: ToolsConfig) -> None:
        """The Tools panel changed the conversation's tools (saved with it)."""
        self.controller.set_tools(config)
        self.tools_chip.set_config(config)

    def _tools_chip_changed(self, config: ToolsConfig) -> None:
        """The chip's menu changed the conversation's tools."""
        self.controller.set_tools(config)
        self.tools_panel.set_config(config)
        self.tools_chip.set_config(config)

    def _settings_changed(self, settings: object) -> None:
        if self.controller.conversation_id is not None:
            self.store.set_chat_settings(self.controller.conversation_id, settings)

    def _save_preset(self, name: str, text: str) -> None:
        self.store.save_preset(name, text)
        self.settings_panel.set_presets(self.store.presets())

    def _delete_preset(self, name: str) -> None:
        self.store.delete_preset(name)
        self.settings_panel.set_presets(self.store.presets())
