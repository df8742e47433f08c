"""The chat logic between the store, the engine bridge and the views.

It decides what a user action means for the message tree (send, stop, regenerate, retry,
continue a reply cut at its length limit, edit and branch, switch branch, answer a tool
call), builds the engine request from the active path, the conversation's settings and the
loaded model's recommended sampling, and saves each reply when it finishes. Regenerate ×N
asks for N alternatives at once (the engine decodes them side by side): the first streams
into the chat, and when all are done each is saved as a version of the reply (‹ 1/N ›),
the first one shown. A reply that
ends before any text is not saved; its question remembers why, so the chat can offer
Retry. Each conversation's constraint and tool state, and the composer's chips, are kept
by its ConversationFormats (app/chat/formats.py). Views only call these methods and listen
to the signals; an edit still being typed in a view is saved first through one hook,
`save_pending_edits`, before every action that reads or leaves the open conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.chat.attachments import Attachment
from app.chat.formats import ChipState, ConversationFormats
from app.chat.history import start_after_dropping
from app.jobs.engine_bridge import EngineBridge, ReplyJob
from app.store import (
    DEFAULT_TITLE,
    ChatSettings,
    Conversation,
    Message,
    NewImage,
    Store,
    ToolsConfig,
)
from app.tools import enabled_tool_definitions
from engine.mcp.turn import DEFAULT_MAX_STEPS, tool_choice_for_step
from engine.runtime.context import CONTEXT_LENGTH_EXCEEDED
from engine.types import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    ImageInput,
    SchemaOptions,
    StopReason,
    ToolChoiceOption,
)

TITLE_LENGTH = 48
# Alternatives kept per recorded reply token (its token view, Inspect): enough to see what
# the model wanted, small enough to store with every reply.
LOGPROB_ALTERNATIVES = 5
LOW_TEMPERATURE = 0.3  # at or below it, versions written at once are often identical


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


log = logging.getLogger("app.chat.controller")


class ChatController(QObject):
    """One window's chat: the open conversation and the reply being generated."""

    conversationsChanged = Signal()  # titles, order or membership of the list changed
    conversationOpened = Signal(int)  # id; the views reload settings, chip and tools
    pathChanged = Signal()  # the active path changed; re-render the chat
    replyStarted = Signal()
    replyPrefill = Signal(int, int)
    replyText = Signal(str)  # the whole reply text so far
    replyReasoning = Signal(str)  # the whole thinking so far (models that think first)
    replyFinished = Signal(object)  # ChatResult
    busyChanged = Signal(bool)
    notice = Signal(str)  # a message for the user (errors included)
    info = Signal(str)  # a quiet message for the user (not an error)
    toolCallsReady = Signal(int, object)  # conversation id, the saved reply's tool calls
    stopRequested = Signal()  # Stop: tool calls in flight are cancelled too
    chipsChanged = Signal()  # chip_state() changed for the open conversation
    # A prompt longer than the model reads: the message, and whether tools were offered
    # (the window offers to leave out the oldest turns, or to turn tools off).
    contextExceeded = Signal(str, bool)

    def __init__(self, store: Store, bridge: EngineBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.conversation_id: int | None = None
        self.job: ReplyJob | None = None  # the reply in flight (the one shown, of several)
        self._alternatives: list[ReplyJob] = []  # Regenerate ×N: the other replies in flight
        self._results: dict[int, ChatResult] = {}  # finished replies by their index
        self._reply_parent: Message | None = None
        # the versions a regenerate is writing (first, last), for "Writing version 2 of 2…"
        self._writing_versions: tuple[int, int] | None = None
        self._reply_temperature: float | None = None
        self._reply_conversation: int | None = None
        self._reply_prefix = ""  # the text of a reply being continued
        self._continued: Message | None = None
        self._reply_constraint: ConstraintSpec | None = None  # the user's, as sent
        # What a new chat starts from (the user's Preferences) and the loaded model's
        # recommended sampling (values a conversation leaves unset follow it).
        self.new_chat_settings = ChatSettings()
        self.new_chat_tools = ToolsConfig()
        self.model_defaults: dict[str, float] = {}
        # Questions whose reply ended before any text: message id -> why, in plain words.
        self.unanswered: dict[int, str] = {}
        # Where MCP tools come from (app.jobs.mcp_calls.McpCalls): tool_definitions(reserved)
        # and max_steps; None offers no MCP tools.
        self.tool_source: Any = None
        self._tools_running = False
        # per conversation: its constraint compiled, its tools' warnings, the chips
        self.formats = ConversationFormats(store, bridge, self)
        self.formats.changed.connect(self._formats_changed)
        self.formats.problem.connect(self._formats_problem)
        # Saves an edit a view has not handed over yet (the settings panel's system prompt,
        # saved as typing pauses): called before every action that reads or leaves the
        # open conversation's settings, so none of them can forget it.
        self.save_pending_edits: Callable[[], None] = lambda: None
        # record each reply's token logprobs with this many alternatives; None: off
        self.logprobs: int | None = LOGPROB_ALTERNATIVES
        # per conversation id: the message the model reads from (older ones are left out
        # after the user chose to, for a model whose context they overflow)
        self._history_from: dict[int, int] = {}
        self._overflow: tuple[int, int] | None = None  # conversation id, prompt tokens
        self._reply_had_tools = False

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
        """Open an empty chat that starts from the user's defaults (Preferences): system
        prompt, sampling and tools; never a constraint."""
        self.save_pending_edits()
        empty = self._empty_conversation()
        if empty is not None:  # an empty chat exists: reuse it rather than pile up another
            self._reset_to_defaults(empty)
            self.open_conversation(empty)
            return empty
        conv = self.store.create_conversation(settings=replace(self.new_chat_settings))
        self.store.set_tools(conv.id, replace(self.new_chat_tools))
        self.conversationsChanged.emit()
        self.open_conversation(conv.id)
        return conv.id

    def _empty_conversation(self) -> int | None:
        """The open chat if it has no messages, else the newest chat without any (not the
        one a reply is being written into)."""
        current = self.conversation
        if current is not None and current.active_leaf_id is None:
            return current.id
        for conv in self.store.conversations():
            if conv.active_leaf_id is None and conv.id != self.reply_conversation_id:
                return conv.id
        return None

    def _reset_to_defaults(self, conversation_id: int) -> None:
        self.store.set_chat_settings(conversation_id, replace(self.new_chat_settings))
        self.store.set_tools(conversation_id, replace(self.new_chat_tools))
        self.store.set_constraint(conversation_id, None)
        self.formats.forget(conversation_id)

    def open_conversation(self, conversation_id: int) -> None:
        self.save_pending_edits()
        if self.store.conversation(conversation_id) is None:
            return
        self.conversation_id = conversation_id
        self.store.set_setting("last_conversation", conversation_id)
        self.conversationOpened.emit(conversation_id)
        self.pathChanged.emit()
        self.formats.prepare(conversation_id)
        self.chipsChanged.emit()

    def set_settings(self, settings: ChatSettings) -> None:
        """The open conversation's settings (system prompt, sampling), as edited."""
        if self.conversation_id is not None:
            self.store.set_chat_settings(self.conversation_id, settings)

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
        path = self.store.active_path(self.conversation_id) if self.conversation_id else []
        if self.store.warnings:  # a damaged record was repaired on the way: say so once
            warnings, self.store.warnings = self.store.warnings, []
            self.notice.emit("; ".join(warnings) + ".")
        return path

    def branch_position(self, message: Message) -> tuple[int, int]:
        """(1-based index, count) of `message` among its siblings, for the "< i/n >" switcher."""
        siblings = self.store.siblings(message)
        ids = [m.id for m in siblings]
        return (ids.index(message.id) + 1 if message.id in ids else 1), len(siblings)

    # ---- actions ----

    def send(self, text: str, images: list[Attachment] | None = None) -> bool:
        """Add a user message (with its checked `images`, stored in the data folder) after
        the active leaf and start the reply."""
        self.save_pending_edits()
        text = text.strip()
        if not (text or images) or self.busy:
            return False
        if self.conversation_id is None:
            self.new_conversation()
        conv = self.conversation
        assert conv is not None
        new_images = [a.to_new_image() for a in images or []]
        try:
            message = self.store.add_message(
                conv.id, conv.active_leaf_id, "user", text, images=new_images
            )
        except OSError as exc:  # the data folder is full or read-only: nothing was sent
            self.notice.emit(f"The images could not be saved in the data folder: {exc}")
            return False
        if conv.title == DEFAULT_TITLE:
            title = text or ", ".join(i.name for i in new_images)
            self.store.rename_conversation(conv.id, _title_from(title))
        self.conversationsChanged.emit()
        self._start_reply(message)  # first, so the chat shows the question as being answered
        self.pathChanged.emit()
        return True

    def stop(self) -> None:
        """Stop the reply being generated (prompt processing included) and the tool calls
        running, which ends the turn."""
        for job in [self.job, *self._alternatives]:
            if job is not None:
                job.cancel()
        self.stopRequested.emit()

    @property
    def reply_conversation_id(self) -> int | None:
        """The conversation the reply in flight belongs to (None when idle)."""
        return self._reply_conversation if self.busy else None

    def regenerate(self, count: int = 1) -> bool:
        """Generate `count` new versions of the last reply, side by side; the old ones stay
        as branches and the first new one is shown."""
        self.save_pending_edits()
        if self.busy:
            return False
        path = self.path()
        if path and path[-1].role in ("user", "tool"):
            self._start_reply(path[-1], count)  # the last reply failed or was never made
            return True
        for index in range(len(path) - 1, -1, -1):
            if path[index].role == "assistant" and index > 0:
                parent = path[index - 1]
                have = sum(
                    1
                    for m in self.store.children(parent.conversation_id, parent.id)
                    if m.role == "assistant"
                )
                self.store.set_active_leaf(parent.conversation_id, parent.id)
                self._writing_versions = (have + 1, have + count)
                self.pathChanged.emit()
                self._start_reply(parent, count)
                return True
        return False

    def writing_label(self) -> str:
        """What the reply in flight is, in words, when it is a new version of a reply:
        "Writing version 2 of 2…", or for several "Writing 3 versions (3 to 5 of 5)…"."""
        if not self.busy or self._writing_versions is None:
            return ""
        first, last = self._writing_versions
        if first == last:
            return f"Writing version {first} of {last}…"
        return f"Writing {last - first + 1} versions ({first} to {last} of {last})…"

    def _same_versions_note(self, saved: list[Message], temperature: float | None) -> None:
        """Several versions written at once that came out the same: say why (a low
        temperature makes the model pick the same words), so it does not look broken."""
        texts = {m.content for m in saved}
        if len(saved) < 2 or len(texts) != 1:
            return
        count = len(saved)
        if temperature is not None and temperature <= LOW_TEMPERATURE:
            self.info.emit(
                f"The {count} versions are identical: at temperature {temperature:g} the model "
                "nearly always picks the same words. Raise the temperature in Chat settings "
                "for versions that differ."
            )
        else:
            self.info.emit(f"The {count} versions are identical.")

    def retry(self, message_id: int) -> bool:
        """Answer again: a question left without a reply, or a reply that failed (its new
        version becomes a branch beside it)."""
        self.save_pending_edits()
        message = self.store.message(message_id)
        if self.busy or message is None:
            return False
        if message.role == "assistant":
            parent = self.store.message(message.parent_id) if message.parent_id else None
            if parent is None:
                return False
            self.store.set_active_leaf(parent.conversation_id, parent.id)
            message = parent
        self.store.select_branch(message.id)
        self._start_reply(message)
        self.pathChanged.emit()
        return True

    def continue_reply(self, message_id: int) -> bool:
        """Write on from the end of a reply cut at its length limit. The longer reply is
        saved as a new version beside the cut one."""
        self.save_pending_edits()
        message = self.store.message(message_id)
        if self.busy or message is None or message.role != "assistant" or message.parent_id is None:
            return False
        parent = self.store.message(message.parent_id)
        conv = self.store.conversation(message.conversation_id)
        if parent is None or conv is None:
            return False
        self.store.select_branch(message.id)
        path = self.store.active_path(conv.id)
        upto = path[: [m.id for m in path].index(message.id) + 1]
        request = self.build_request(upto, conv)
        request.tools, request.tool_choice, request.constraint = None, "auto", None
        request.continue_final_message = True
        self._continued = message
        self._reply_prefix = message.content
        self.pathChanged.emit()
        self._submit(request, parent, conv.id)
        return True

    def edit(self, message_id: int, text: str) -> bool:
        """Replace a user message by a new version (a new branch) and reply to it."""
        self.save_pending_edits()
        message = self.store.message(message_id)
        text = text.strip()
        if self.busy or message is None or message.role != "user" or not text:
            return False
        # the new version keeps the pictures of the old one (the same stored files)
        kept = [
            NewImage(self.store.image_bytes(i), i.name, i.file.rsplit(".", 1)[-1])
            for i in message.images
            if i.path.is_file()
        ]
        edited = self.store.add_message(
            message.conversation_id, message.parent_id, "user", text, images=kept
        )
        self._start_reply(edited)
        self.pathChanged.emit()
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
        if continue_turn and not self.pending_tool_calls(conv.id):
            self._start_reply(message)
        self.pathChanged.emit()
        return True

    # ---- constraint and tools ----

    def set_schema_preferences(self, options: SchemaOptions, close_loops: bool) -> None:
        """How JSON schemas are followed from now on (constraints are checked again)."""
        if self.formats.set_schema_preferences(options, close_loops):
            if self.conversation_id is not None:
                self.formats.prepare(self.conversation_id)
            self.chipsChanged.emit()

    def set_constraint(self, spec: ConstraintSpec | None, path: str | None = None) -> None:
        """Constrain the open conversation's next replies to `spec` (checked and compiled:
        see app.constraints), or lift the constraint."""
        if self.conversation_id is None:
            self.new_conversation()
        assert self.conversation_id is not None
        self.formats.set_constraint(self.conversation_id, spec, path)
        self.chipsChanged.emit()

    def set_tools(self, config: ToolsConfig) -> None:
        """The open conversation's tools (definitions, built-ins, tool_choice)."""
        if self.conversation_id is None:
            return
        self.store.set_tools(self.conversation_id, config)
        self.formats.tools_changed(self.conversation_id)
        self.chipsChanged.emit()

    def chip_state(self) -> ChipState:
        """The constraint and tools chips of the open conversation."""
        return self.formats.chip_state(self.conversation)

    def _formats_changed(self, conversation_id: int) -> None:
        if conversation_id == self.conversation_id:
            self.chipsChanged.emit()

    def _formats_problem(self, conversation_id: int, text: str) -> None:
        if conversation_id == self.conversation_id:
            self.notice.emit(text)

    # ---- the reply ----

    def build_request(self, upto: list[Message], conv: Conversation) -> ChatRequest:
        messages: list[ChatMessage] = []
        if conv.settings.system_prompt.strip():
            messages.append({"role": "system", "content": conv.settings.system_prompt})
        messages += [self._chat_message(m) for m in self._read_from(upto, conv.id)]
        tools = enabled_tool_definitions(conv.tools)
        if self.tool_source is not None:
            reserved = [t.get("function", t).get("name") for t in tools]
            tools += self.tool_source.tool_definitions(reserved)
        choice: ToolChoiceOption = conv.tools.tool_choice if tools else "auto"
        if choice != "none":
            # "required" or a named tool applies to the answer to the user; once results are
            # in, the model may answer in text, and after max_steps rounds of calls it must.
            max_steps = getattr(self.tool_source, "max_steps", DEFAULT_MAX_STEPS)
            choice = tool_choice_for_step(choice, _steps_since_user(upto), max_steps)
        return ChatRequest(
            messages=messages,
            sampling=conv.settings.to_sampling(
                self.model_defaults,
                reasoning=getattr(self.bridge.model_info, "reasoning", None) is not None,
            ),
            constraint=self.formats.constraint_for(conv),
            tools=tools or None,
            tool_choice=choice,
            schema_options=self.formats.schema_options,
            close_loops=self.formats.close_loops,
            logprobs=self.logprobs,
        )

    def _chat_message(self, message: Message) -> ChatMessage:
        """`message` as the engine takes it, its pictures read from the data folder (a
        missing file reaches the engine empty, which refuses it naming the file)."""
        out = message.to_chat_message()
        if message.images:
            images = []
            for image in message.images:
                try:
                    images.append(ImageInput(self.store.image_bytes(image), image.name))
                except OSError:
                    images.append(ImageInput(b"", f"{image.name} (its file {image.path} is gone)"))
            out["images"] = images
        return out

    def _read_from(self, path: list[Message], conversation_id: int) -> list[Message]:
        """`path` from the message the model reads from (all of it unless the user chose
        to leave out older turns, and only while that message is on the path)."""
        first = self._history_from.get(conversation_id)
        ids = [m.id for m in path]
        return path[ids.index(first) :] if first in ids else path

    def drop_oldest_turns(self) -> bool:
        """After a prompt too long for the model: leave out the oldest turns of the open
        conversation (they stay in the chat) and answer again."""
        conv, info = self.conversation, self.bridge.model_info
        if conv is None or self._overflow is None or self._overflow[0] != conv.id or self.busy:
            return False
        context = getattr(info, "context_length", None)
        path = self.path()
        kept = self._read_from(path, conv.id)
        start = len(path) - len(kept)
        new_start = (
            start_after_dropping(path, start, self._overflow[1], context, conv.settings.max_tokens)
            if context
            else None
        )
        if new_start is None:
            self.notice.emit(
                "The last message alone is longer than this model reads: shorten it, or load "
                "a model with a longer context."
            )
            return False
        self._history_from[conv.id] = path[new_start].id
        self._overflow = None
        return self.regenerate()

    def turn_tools_off(self) -> bool:
        """After a prompt too long for the model: stop offering tools in the open
        conversation (tool_choice "none"; they stay configured) and answer again."""
        conv = self.conversation
        if conv is None or self.busy:
            return False
        self.set_tools(replace(conv.tools, tool_choice="none"))
        self._overflow = None
        return self.regenerate()

    def left_out_count(self) -> int:
        """How many messages of the open conversation's path the model does not read."""
        if self.conversation_id is None:
            return 0
        path = self.path()
        return len(path) - len(self._read_from(path, self.conversation_id))

    def _start_reply(self, parent: Message, count: int = 1) -> None:
        conv = self.store.conversation(parent.conversation_id)
        assert conv is not None
        path = self.store.active_path(conv.id)
        self._continued, self._reply_prefix = None, ""
        self._submit(self.build_request(path, conv), parent, conv.id, count)

    def _submit(
        self, request: ChatRequest, parent: Message, conversation_id: int, count: int = 1
    ) -> None:
        self.unanswered.pop(parent.id, None)
        self._reply_parent = parent
        self._reply_conversation = conversation_id
        self._reply_constraint_kind = request.constraint.kind if request.constraint else None
        self._reply_had_tools = bool(request.tools) and request.tool_choice != "none"
        self._reply_constraint = request.constraint
        self._reply_temperature = request.sampling.temperature
        self._results = {}
        jobs = self.bridge.submit_many(request.alternatives(count))
        self.job, self._alternatives = jobs[0], jobs[1:]
        self.job.prefill.connect(self.replyPrefill)
        self.job.delta.connect(self._on_delta)
        self.job.thinking.connect(self._on_thinking)
        for index, job in enumerate(jobs):
            job.finished.connect(lambda result, index=index: self._on_finished(index, result))
        self.busyChanged.emit(True)
        self.replyStarted.emit()

    @property
    def reply_prefix(self) -> str:
        """The text a reply in flight continues from ("" for a new reply)."""
        return self._reply_prefix if self.busy else ""

    def reply_text(self) -> str:
        """The reply in flight as it will read: a continued reply's old text and the new."""
        return self._reply_prefix + (self.job.text if self.job is not None else "")

    def _on_delta(self, _piece: str) -> None:
        if self.job is not None:
            self.replyText.emit(self.reply_text())

    def reply_reasoning(self) -> str:
        """What the reply in flight has thought so far ("" when it does not think)."""
        return self.job.reasoning if self.job is not None else ""

    def _on_thinking(self, _piece: str) -> None:
        if self.job is not None:
            self.replyReasoning.emit(self.job.reasoning)

    def _on_finished(self, index: int, result: ChatResult) -> None:
        """Reply `index` of those in flight has finished; once all have, save them."""
        self._results[index] = result
        if len(self._results) < 1 + len(self._alternatives):
            return
        results = [self._results[i] for i in sorted(self._results)]
        parent, self._reply_parent = self._reply_parent, None
        continued, self._continued = self._continued, None
        prefix, self._reply_prefix = self._reply_prefix, ""
        self.job, self._alternatives, self._results = None, [], {}
        saved = [
            self._save_reply(parent, r, continued, prefix, first=i == 0)
            for i, r in enumerate(results)
        ]
        kept = [m for m in saved if m is not None]
        if len(kept) > 1:
            self.store.select_branch(kept[0].id)  # the first version is the one shown
        self._writing_versions = None
        self._same_versions_note(kept, self._reply_temperature)
        result = results[0]
        if result.error:
            log.error("reply failed (%s): %s", result.error_kind, result.error_line)
        if not kept and parent is not None and continued is None:
            if result.error:
                self.unanswered[parent.id] = f"No reply: {result.error}"
                if result.error_code == CONTEXT_LENGTH_EXCEEDED:
                    self._overflow = (parent.conversation_id, result.stats.prompt_tokens)
                    text = result.error
                    self.contextExceeded.emit(text[:1].upper() + text[1:], self._reply_had_tools)
            elif result.stop_reason == StopReason.CANCELLED:
                self.unanswered[parent.id] = "Stopped before any reply"
        elif not kept and continued is not None and result.error:
            self.notice.emit(f"The reply could not be continued: {result.error_line}")
        self.busyChanged.emit(self.busy)
        self.replyFinished.emit(result)
        self.pathChanged.emit()

    def _save_reply(
        self,
        parent: Message | None,
        result: ChatResult,
        continued: Message | None,
        prefix: str,
        *,
        first: bool,
    ) -> Message | None:
        """Save `result` as a reply to `parent` if it is worth keeping; the first reply of
        several may go on to run its tool calls."""
        self.formats.note_outcome(self._reply_conversation, result)
        # An empty reply that ended normally is kept (and shown as such); an empty one that
        # was stopped or failed is not: its question says why, and offers Retry.
        keep = bool(result.text or result.tool_calls) or (
            result.error is None and result.stop_reason != StopReason.CANCELLED
        )
        if continued is not None and not result.text:
            keep = False  # nothing new: the cut reply stays as it was
        if parent is None or not keep or self.store.message(parent.id) is None:
            return None
        own = self._reply_constraint
        joined = result.constraint_use == "with_tools" and own is not None
        meta = {
            "stats": result.stats.to_dict(),
            "stop_reason": result.stop_reason.value,
            # how it ended (engine.types.Ending), and the values Corral wrote if it filled it
            "ending": result.ending.value,
            "filled_paths": list(result.filled_paths),
            # the user's format by its own name where a reply fits it or is a tool call
            "constraint": own.name or own.kind if joined and own else result.constraint_name,
            "constraint_kind": own.kind if own is not None else None,
            "constraint_use": result.constraint_use,
            "incomplete": result.incomplete,
            "tool_calls": [c.to_dict() for c in result.tool_calls],
            "model": getattr(self.bridge.model_info, "name", None),
        }
        if continued is not None:
            meta["continued_from"] = continued.id
        if result.error:
            meta["error"] = result.error_line
        # the thinking is kept for the user to read, never sent back (to_chat_message reads
        # the content alone); a continuation keeps the thought of the reply it continues
        reasoning = result.reasoning or (continued.meta.get("reasoning") if continued else None)
        if reasoning:
            meta["reasoning"] = reasoning
            own_s = result.stats.thinking_s if result.reasoning else 0.0
            meta["thinking_s"] = own_s or (
                continued.meta.get("thinking_s", 0.0) if continued else 0.0
            )
        if result.as_written is not None:
            meta["as_written"] = result.as_written.to_dict()
        if result.logprobs and continued is None:  # a continuation's cover only its new part
            meta["logprobs"] = len(result.logprobs)
        message = self.store.add_message(
            parent.conversation_id, parent.id, "assistant", prefix + result.text, meta
        )
        if "logprobs" in meta and result.logprobs:
            self.store.set_token_logprobs(message.id, result.logprobs)
        self.conversationsChanged.emit()
        if first and meta["tool_calls"] and result.stop_reason != StopReason.CANCELLED:
            self.toolCallsReady.emit(parent.conversation_id, meta["tool_calls"])
        return message
