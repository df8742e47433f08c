"""The chat logic between the store, the engine bridge and the views.

It decides what a user action means for the message tree (send, stop, regenerate, edit
and branch, switch branch, answer a tool call), builds the engine request from the active
path and the conversation's settings, and saves each reply when it finishes. Views only
call these methods and listen to the signals.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from app.constraints import spec_from_dict
from app.jobs.engine_bridge import EngineBridge, ReplyJob
from app.store import DEFAULT_TITLE, Conversation, Message, Store
from app.tools import enabled_tool_definitions
from engine.mcp.turn import DEFAULT_MAX_STEPS, tool_choice_for_step
from engine.types import ChatRequest, ChatResult, StopReason

TITLE_LENGTH = 48


def _steps_since_user(path: list[Message]) -> int:
    """Replies with tool calls since the last user message: the turn's steps so far."""
    steps = 0
    for message in reversed(path):
        if message.role == "user":
            break
        steps += message.role == "assistant" and bool(message.meta.get("tool_calls"))
    return steps


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


class ChatController(QObject):
    """One window's chat: the open conversation and the reply being generated."""

    conversationsChanged = Signal()  # titles, order or membership of the list changed
    conversationOpened = Signal(int)  # id; the views reload settings, chip and tools
    pathChanged = Signal()  # the active path changed; re-render the chat
    replyStarted = Signal()
    replyPrefill = Signal(int, int)
    replyText = Signal(str)  # the whole reply text so far
    replyFinished = Signal(object)  # ChatResult
    busyChanged = Signal(bool)
    notice = Signal(str)  # a message for the user (errors included)
    toolCallsReady = Signal(int, object)  # conversation id, the saved reply's tool calls
    stopRequested = Signal()  # Stop: tool calls in flight are cancelled too

    def __init__(self, store: Store, bridge: EngineBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.conversation_id: int | None = None
        self.job: ReplyJob | None = None
        self._reply_parent: Message | None = None
        self._reply_conversation: int | None = None
        # Where MCP tools come from (app.jobs.mcp_calls.McpCalls): tool_definitions(reserved)
        # and max_steps; None offers no MCP tools.
        self.tool_source: Any = None
        self._tools_running = False

    # ---- conversations ----

    @property
    def conversation(self) -> Conversation | None:
        return self.store.conversation(self.conversation_id) if self.conversation_id else None

    @property
    def busy(self) -> bool:
        """A reply is generated or a tool call runs (Stop applies, sending waits)."""
        return self.job is not None or self._tools_running

    def set_tools_running(self, running: bool) -> None:
        if running != self._tools_running:
            self._tools_running = running
            if self.job is None:
                self.busyChanged.emit(running)

    def new_conversation(self) -> int:
        current = self.conversation
        if current is not None and current.active_leaf_id is None:
            return current.id  # already on an empty chat: do not pile up empty ones
        settings = current.settings if current is not None else None
        conv = self.store.create_conversation(settings=settings)
        self.conversationsChanged.emit()
        self.open_conversation(conv.id)
        return conv.id

    def open_conversation(self, conversation_id: int) -> None:
        if self.store.conversation(conversation_id) is None:
            return
        self.conversation_id = conversation_id
        self.store.set_setting("last_conversation", conversation_id)
        self.conversationOpened.emit(conversation_id)
        self.pathChanged.emit()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self.store.rename_conversation(conversation_id, title)
        self.conversationsChanged.emit()

    def delete_conversation(self, conversation_id: int) -> None:
        if self.busy and self._reply_conversation == conversation_id:
            self.stop()
        self.store.delete_conversation(conversation_id)
        if conversation_id == self.conversation_id:
            self.conversation_id = None
            remaining = self.store.conversations()
            if remaining:
                self.open_conversation(remaining[0].id)
            else:
                self.new_conversation()
        self.conversationsChanged.emit()

    def path(self) -> list[Message]:
        return self.store.active_path(self.conversation_id) if self.conversation_id else []

    def branch_position(self, message: Message) -> tuple[int, int]:
        """(1-based index, count) of `message` among its siblings, for the "< i/n >" switcher."""
        siblings = self.store.siblings(message)
        ids = [m.id for m in siblings]
        return (ids.index(message.id) + 1 if message.id in ids else 1), len(siblings)

    # ---- actions ----

    def send(self, text: str) -> bool:
        """Add a user message after the active leaf and start the reply."""
        text = text.strip()
        if not text or self.busy:
            return False
        if self.conversation_id is None:
            self.new_conversation()
        conv = self.conversation
        assert conv is not None
        message = self.store.add_message(conv.id, conv.active_leaf_id, "user", text)
        if conv.title == DEFAULT_TITLE:
            self.store.rename_conversation(conv.id, _title_from(text))
        self.conversationsChanged.emit()
        self.pathChanged.emit()
        self._start_reply(message)
        return True

    def stop(self) -> None:
        """Stop the reply being generated (prompt processing included) and the tool calls
        running, which ends the turn."""
        if self.job is not None:
            self.job.cancel()
        self.stopRequested.emit()

    @property
    def reply_conversation_id(self) -> int | None:
        """The conversation the reply in flight belongs to (None when idle)."""
        return self._reply_conversation if self.busy else None

    def can_regenerate(self) -> bool:
        path = [] if self.busy else self.path()
        return bool(path) and (
            path[-1].role in ("user", "tool") or any(m.role == "assistant" for m in path)
        )

    def regenerate(self) -> bool:
        """Generate a new version of the last reply; the old one stays as a branch."""
        if self.busy:
            return False
        path = self.path()
        if path and path[-1].role in ("user", "tool"):
            self._start_reply(path[-1])  # the last reply failed or was never made
            return True
        for index in range(len(path) - 1, -1, -1):
            if path[index].role == "assistant" and index > 0:
                parent = path[index - 1]
                self.store.set_active_leaf(parent.conversation_id, parent.id)
                self.pathChanged.emit()
                self._start_reply(parent)
                return True
        return False

    def edit(self, message_id: int, text: str) -> bool:
        """Replace a user message by a new version (a new branch) and reply to it."""
        message = self.store.message(message_id)
        text = text.strip()
        if self.busy or message is None or message.role != "user" or not text:
            return False
        edited = self.store.add_message(message.conversation_id, message.parent_id, "user", text)
        self.pathChanged.emit()
        self._start_reply(edited)
        return True

    def switch_branch(self, message_id: int, step: int) -> None:
        """Show the previous (-1) or next (+1) version at `message_id`'s place."""
        message = self.store.message(message_id)
        if self.busy or message is None:
            return
        siblings = self.store.siblings(message)
        ids = [m.id for m in siblings]
        target = ids[max(0, min(len(ids) - 1, ids.index(message.id) + step))]
        if target != message.id:
            self.store.select_branch(target)
            self.pathChanged.emit()

    def pending_tool_calls(self, conversation_id: int | None = None) -> list[dict[str, Any]]:
        """Calls of the last assistant message that have no result yet on the active path
        (of the open conversation, or of `conversation_id`)."""
        path = self.store.active_path(conversation_id) if conversation_id else self.path()
        for index in range(len(path) - 1, -1, -1):
            message = path[index]
            if message.role == "assistant":
                answered = {m.meta.get("tool_call_id") for m in path[index + 1 :]}
                return [c for c in message.meta.get("tool_calls", []) if c["id"] not in answered]
            if message.role == "user":
                return []
        return []

    def submit_tool_result(
        self,
        call_id: str,
        name: str,
        content: str,
        meta: dict[str, Any] | None = None,
        *,
        conversation_id: int | None = None,
        continue_turn: bool = True,
    ) -> bool:
        """Record a tool's result (in the open conversation, or `conversation_id`); when
        every call has one, the model continues unless `continue_turn` is False."""
        conv = self.store.conversation(conversation_id or self.conversation_id or 0)
        if self.job is not None or conv is None:
            return False
        if call_id not in {c["id"] for c in self.pending_tool_calls(conv.id)}:
            return False
        message = self.store.add_message(
            conv.id,
            conv.active_leaf_id,
            "tool",
            content,
            {"tool_call_id": call_id, "name": name, **(meta or {})},
        )
        self.pathChanged.emit()
        if continue_turn and not self.pending_tool_calls(conv.id):
            self._start_reply(message)
        return True

    # ---- the reply ----

    def build_request(self, upto: list[Message], conv: Conversation) -> ChatRequest:
        messages: list[dict[str, Any]] = []
        if conv.settings.system_prompt.strip():
            messages.append({"role": "system", "content": conv.settings.system_prompt})
        messages += [m.to_chat_message() for m in upto]
        tools = enabled_tool_definitions(conv.tools)
        if self.tool_source is not None:
            reserved = [t.get("function", t).get("name") for t in tools]
            tools += self.tool_source.tool_definitions(reserved)
        choice = conv.tools.tool_choice if tools else "auto"
        if choice != "none":
            # "required" or a named tool applies to the answer to the user; once results are
            # in, the model may answer in text, and after max_steps rounds of calls it must.
            max_steps = getattr(self.tool_source, "max_steps", DEFAULT_MAX_STEPS)
            choice = tool_choice_for_step(choice, _steps_since_user(upto), max_steps)
        return ChatRequest(
            messages=messages,
            sampling=conv.settings.to_sampling(),
            constraint=spec_from_dict(conv.constraint) if conv.constraint else None,
            tools=tools or None,
            tool_choice=choice,
        )

    def _start_reply(self, parent: Message) -> None:
        conv = self.store.conversation(parent.conversation_id)
        assert conv is not None
        path = self.store.active_path(conv.id)
        request = self.build_request(path, conv)
        self._reply_parent = parent
        self._reply_conversation = conv.id
        self.job = self.bridge.submit(request)
        self.job.prefill.connect(self.replyPrefill)
        self.job.delta.connect(self._on_delta)
        self.job.finished.connect(self._on_finished)
        self.busyChanged.emit(True)
        self.replyStarted.emit()

    def _on_delta(self, _piece: str) -> None:
        if self.job is not None:
            self.replyText.emit(self.job.text)

    def _on_finished(self, result: ChatResult) -> None:
        parent, self._reply_parent = self._reply_parent, None
        self.job = None
        # An empty reply that ended normally is kept (and shown as such); an empty one that
        # was stopped or failed is not.
        keep = bool(result.text or result.tool_calls) or (
            result.error is None and result.stop_reason != StopReason.CANCELLED
        )
        if parent is not None and keep and self.store.message(parent.id) is not None:
            meta = {
                "stats": result.stats.to_dict(),
                "stop_reason": result.stop_reason.value,
                "constraint": result.constraint_name,
                "incomplete": result.incomplete,
                "tool_calls": [c.to_dict() for c in result.tool_calls],
                "model": getattr(self.bridge.model_info, "name", None),
            }
            if result.error:
                meta["error"] = result.error
            self.store.add_message(
                parent.conversation_id, parent.id, "assistant", result.text, meta
            )
            self.conversationsChanged.emit()
            if meta["tool_calls"] and result.stop_reason != StopReason.CANCELLED:
                self.toolCallsReady.emit(parent.conversation_id, meta["tool_calls"])
        if result.error:
            self.notice.emit(f"The reply failed: {result.error}")
        elif result.stop_reason == StopReason.CANCELLED and not keep:
            self.notice.emit("Stopped before any text was generated.")
        self.busyChanged.emit(self.busy)
        self.replyFinished.emit(result)
        self.pathChanged.emit()
