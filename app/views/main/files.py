"""What the main window does with files: constraint files, dropped or opened (validated off
the GUI thread, applied only when valid), the constraint editor, tools files and built-in
tool runs, images attached to the next message (dropped, opened or pasted: checked off the
GUI thread by the engine's checker, refused at once with its reason), and exporting the
chat."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QFileDialog

from app.chat.attachments import (
    Attachment,
    AttachmentRefused,
    attachment_from_file,
    attachment_from_qimage,
    looks_like_image,
)
from app.constraints import KIND_LABELS, Checked, check_file, spec_from_dict
from app.jobs.mcp_job import looks_like_mcp_config
from app.jobs.thread import run_task
from app.store.export import to_json, to_markdown
from app.tools import looks_like_tools, run_builtin
from app.views.constraints.widgets import ConstraintEditor
from app.views.inspector.panel import TOOLS_TAB
from app.views.main.documents import is_document
from app.views.main.parts import WindowParts
from engine.types import ConstraintSpec, ModelInfo

_UNSAFE_FILENAME = re.compile(r'[\\/:*?"<>|\x00-\x1f]+')
IMAGE_PATTERNS = "*.png *.jpg *.jpeg *.webp *.gif *.heic *.heif"
DOCUMENT_PATTERNS = "*.pdf *.docx *.html *.htm *.md *.markdown *.txt"
FILES_FILTER = (
    f"Documents and images ({DOCUMENT_PATTERNS} {IMAGE_PATTERNS});;"
    f"Documents ({DOCUMENT_PATTERNS});;Images ({IMAGE_PATTERNS});;All files (*)"
)
DOCUMENTS_FILTER = f"Documents ({DOCUMENT_PATTERNS});;All files (*)"
# the engine's words for a model without a vision tower (engine.prompt.images)
NO_IMAGES = "{name} does not read images: load a vision model for them"


class FileActions:
    """The main window's files: what it opens, checks, applies and exports."""

    def __init__(self, window: WindowParts) -> None:
        self.window = window
        self.controller = window.controller
        self.constraint_editor: ConstraintEditor | None = None  # the one open, if any
        self.images_refused: str | None = None  # why the loaded model takes no images

    def run_builtin_tool(self, call_id: str, name: str, arguments: object) -> None:
        args = arguments if isinstance(arguments, dict) else {}

        def done(result: str, error: BaseException | None) -> None:
            text = result if error is None else f"Error: {error}"
            self.controller.submit_tool_result(call_id, name, text)

        run_task(lambda: run_builtin(name, args), done)

    # ---- constraints ----

    def open(self, paths: list[str]) -> None:
        """Dropped or opened files: pictures are attached to the next message, documents
        (PDF, Word, HTML, Markdown, text) too (the model reads their text), a tools list
        goes to the tools panel, MCP servers to the MCP panel, anything else is checked as
        a constraint (a file that is neither gets a clear error)."""
        images = [p for p in paths if looks_like_image(p)]
        if images:
            self.attach_files(images)
        documents = [p for p in paths if is_document(p)]
        for path in documents:  # chips in the draft: the model reads their text
            self.window.documents.attach(path)
        others = [p for p in paths if not looks_like_image(p) and p not in documents]
        for path in others[:1]:
            if path.lower().endswith(".json") and looks_like_mcp_config(path):
                self._bring_tools_forward()
                self.window.mcp_panel.import_file(path)
            elif path.lower().endswith(".json") and looks_like_tools(path):
                self.load_tools_file(path)
            else:
                self.open_constraint_file(path)

    def open_constraint_file(self, path: str, then: Callable[[], None] | None = None) -> None:
        """Check the file off the GUI thread; apply it if valid (then call `then`)."""
        self.window.constraint_bar.show_error(f"Checking {Path(path).name}…")
        check = self.window.bridge.check_constraint  # compiled for the loaded model, once
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
            self.window.constraint_bar.show_error(f"Could not check the file: {error}")
            return
        if not checked.ok:
            name = Path(checked.path).name if checked.path else "The constraint"
            problems = "; ".join(str(p) for p in checked.errors) or "not valid"
            self.window.constraint_bar.show_error(f"{name}: {problems} — nothing was applied.")
            return
        assert checked.spec is not None
        self.apply_constraint(checked.spec, checked.path)
        if then is not None:
            then()

    def apply_constraint(self, spec: ConstraintSpec, path: str | None = None) -> None:
        self.controller.set_constraint(spec, path)
        self.window.constraint_bar.show_error("")
        kind = KIND_LABELS.get(spec.kind, spec.kind)
        self.window.statusBar().showMessage(
            f"Replies now follow {spec.name or kind} ({kind}).", 5000
        )
        self.window.keys.focus_composer()  # the Format button it came from is now a chip

    def remove_constraint(self) -> None:
        if self.controller.conversation_id is not None:
            self.controller.set_constraint(None)
        self.window.constraint_bar.show_error("")
        self.window.keys.focus_composer()

    def choose_constraint_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.window.window(),
            "Replies must follow",
            "",
            "Schemas and grammars (*.json *.lark *.gbnf *.regex *.re);;All files (*)",
        )
        if path:
            # an mcpServers or tools file opened here is offered as what it is, not a schema
            self.open([path])

    def open_constraint_editor(self) -> None:
        conv = self.controller.conversation
        current = spec_from_dict(conv.constraint) if conv and conv.constraint else None
        dialog = ConstraintEditor(
            self.window.window(), current, self.window.bridge.check_constraint
        )
        dialog.accepted.connect(lambda: self._editor_accepted(dialog))
        dialog.text.setFocus()  # the keys go where the schema is typed or pasted
        dialog.open()  # window-modal, the event loop keeps running
        self.constraint_editor = dialog

    def _editor_accepted(self, dialog: ConstraintEditor) -> None:
        spec = dialog.spec()
        if spec is not None:
            name = "pasted " + KIND_LABELS[spec.kind]
            self.apply_constraint(replace(spec, name=name))

    # ---- images ----

    def model_loaded(self, info: ModelInfo) -> None:
        """Images are offered only for a model that reads them; documents for every one."""
        self.images_refused = None if info.vision else NO_IMAGES.format(name=info.name)
        self.window.composer.set_images_allowed(info.vision, self.images_refused or "")

    def choose_files(self) -> None:
        """The paperclip (Chat → Attach Files…): documents, and pictures for a model that
        reads them; each goes where a drop would put it."""
        title = "Attach documents or images" if not self.images_refused else "Attach documents"
        files = FILES_FILTER if not self.images_refused else DOCUMENTS_FILTER
        paths, _ = QFileDialog.getOpenFileNames(self.window.window(), title, "", files)
        if paths:
            self.open(paths)

    def attach_files(self, paths: list[str]) -> None:
        """Check the pictures off the GUI thread; attach the good ones, and say at once
        why each bad one was refused (the draft and the other images stay)."""
        self._attach(lambda: [_attempt(attachment_from_file, p) for p in paths])

    def attach_pasted(self, image: QImage) -> None:
        self._attach(lambda: [_attempt(attachment_from_qimage, image)])

    def _attach(self, check: Callable[[], list[Attachment | str]]) -> None:
        if self.images_refused:
            self.window.notice.show_message(self.images_refused + ".", "error")
            return
        run_task(check, self._attachments_checked)

    def _attachments_checked(
        self, results: list[Attachment | str] | None, error: BaseException | None
    ) -> None:
        problems = [str(error)] if error is not None else []
        notes = []
        for result in results or []:
            if isinstance(result, Attachment):
                self.window.composer.add_attachment(result)
                notes += [result.note] if result.note else []
            else:
                problems.append(result)
        if problems:
            self.window.notice.show_message("; ".join(problems) + " — not attached.", "error")
        elif notes:
            self.window.notice.show_message("; ".join(notes) + ".", "info")

    # ---- tools ----

    def choose_tools_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.window.window(), "Load tools", "", "Tool definitions (*.json)"
        )
        if path:
            self.load_tools_file(path)

    def load_tools_file(self, path: str) -> None:
        from engine.files import FileRefused, read_text_limited
        from engine.tools.definitions import MAX_FILE_BYTES

        try:
            text = read_text_limited(path, MAX_FILE_BYTES, "tools file")
        except FileRefused as exc:
            self.window.notice.show_message(str(exc), "error")
            return
        self._bring_tools_forward()
        self.window.tools_panel.load_text(text, Path(path).name)

    def _bring_tools_forward(self) -> None:
        window = self.window
        if not (window.shell.inspector_open and window.inspector_tabs.currentIndex() == TOOLS_TAB):
            window.show_tools()

    # ---- export ----

    def export(self, fmt: str) -> None:
        """Save the chat; the dialog suggests its title, in the folder used last time."""
        store = self.window.store
        cid = self.controller.conversation_id
        conv = self.controller.conversation
        if cid is None or conv is None:
            return
        suffix = ".md" if fmt == "md" else ".json"
        folder = store.get_setting("export_folder") or str(Path.home())
        name = _UNSAFE_FILENAME.sub("-", conv.title).strip(" .-") or "chat"
        path, _ = QFileDialog.getSaveFileName(
            self.window.window(),
            "Export chat",
            str(Path(folder) / (name + suffix)),
            "Markdown (*.md)" if fmt == "md" else "JSON (*.json)",
        )
        if not path:
            return
        text = (
            to_markdown(store, cid)
            if fmt == "md"
            else json.dumps(to_json(store, cid), indent=2, ensure_ascii=False)
        )
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            self.window.notice.show_message(f"Export failed: {exc}", "error")
            return
        store.set_setting("export_folder", str(Path(path).parent))
        self.window.statusBar().showMessage(f"Exported to {path}", 5000)


def _attempt(check: Callable[[Any], Attachment], source: Any) -> Attachment | str:
    """The attachment `check(source)` makes, or why it was refused."""
    try:
        return check(source)
    except AttachmentRefused as exc:
        return str(exc)
