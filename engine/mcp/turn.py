"""The tool loop for one user turn, without Qt: reply, run the MCP calls the user allows,
give the results back, reply again, up to a step limit.

The CLI uses it as is; the app runs the same steps from Qt signals (app/jobs/mcp_job.py)
with the same messages (`assistant_message`, `tool_message`) and the same limit rule
(`tool_choice_for_step`). Each step is one ordinary `ChatRequest` through `Engine.submit`,
so every call's arguments are constrained to its tool's inputSchema.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from engine.mcp.catalog import CatalogTool, ToolCatalog
from engine.mcp.results import CANCELLED_TEXT, DECLINED_TEXT, ToolResult
from engine.types import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallMessage,
    ToolChoiceOption,
)

DEFAULT_MAX_STEPS = 8

Approval = Literal["once", "always", "deny"]
ApproveFn = Callable[[ToolCall, CatalogTool], Approval]
TurnEnd = Literal["answered", "step_limit", "cancelled", "error", "other_tool"]


def tool_choice_for_step(
    requested: ToolChoiceOption, step: int, max_steps: int
) -> ToolChoiceOption:
    """The tool_choice of step `step` (0-based): the user's choice for the first reply,
    "auto" once results are in (else "required" could only ever call again), and "none"
    when the turn has used its steps, so it ends with an answer."""
    if step >= max_steps:
        return "none"
    return requested if step == 0 else "auto"


def assistant_message(result: ChatResult) -> ChatMessage:
    """The assistant turn for a reply with calls, in the OpenAI shape the engine reads."""
    calls: list[ToolCallMessage] = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in result.tool_calls
    ]
    return {"role": "assistant", "content": result.text, "tool_calls": calls}


def tool_message(call: ToolCall, result: ToolResult) -> ChatMessage:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.text}


def run_call(
    hub: Any, tool: CatalogTool, call: ToolCall, timeout: float | None = None
) -> Future[ToolResult]:
    """Send one call to its server, after checking its arguments against the schema."""
    problem = tool.argument_errors(call.arguments)
    if problem is not None:
        future: Future[ToolResult] = Future()
        message = f"the arguments do not match the tool's inputSchema ({problem})"
        future.set_result(ToolResult.failed(tool.server, tool.name, "invalid_arguments", message))
        return future
    result: Future[ToolResult] = hub.call(tool.server, tool.name, call.arguments, timeout)
    return result


@dataclass
class CallRecord:
    """One call of the turn: what the model asked, what the user said, what came back."""

    call: ToolCall
    server: str | None = None  # None: not an MCP tool (left to the caller)
    tool: str | None = None  # the server's own name for it
    approval: str = ""  # once, always, allowed (already always-allowed), deny
    result: ToolResult | None = None
    arguments_valid: bool | None = None
    after_last_token_s: float = 0.0  # from the reply's last token to the result

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.call.to_dict(),
            "server": self.server,
            "tool": self.tool,
            "approval": self.approval,
            "arguments_valid": self.arguments_valid,
            "after_last_token_s": round(self.after_last_token_s, 4),
            "result": self.result.to_dict() if self.result is not None else None,
        }


@dataclass
class TurnResult:
    """A whole turn: every reply, every call, the conversation after it, and why it ended."""

    messages: list[ChatMessage]
    replies: list[ChatResult] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    end: TurnEnd = "answered"

    @property
    def final(self) -> ChatResult | None:
        return self.replies[-1] if self.replies else None

    def to_dict(self) -> dict[str, Any]:
        final = self.final.to_dict() if self.final is not None else {}
        return {
            **final,
            "turn_end": self.end,
            "steps": [r.to_dict() for r in self.replies],
            "calls": [c.to_dict() for c in self.calls],
        }


class ToolTurn:
    """Runs turns on an Engine with the tools of an MCP hub. `cancel()` from any thread
    stops the reply or the call in flight and ends the turn."""

    def __init__(
        self,
        engine: Any,
        hub: Any,
        approve: ApproveFn,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        timeout: float | None = None,
        always_allowed: set[str] | None = None,
        on_text: Callable[[str], None] | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> None:
        self.engine = engine
        self.hub = hub
        self.approve = approve
        self.max_steps = max_steps
        self.timeout = timeout
        self.always_allowed = always_allowed if always_allowed is not None else set()
        self.on_text = on_text
        self.on_call = on_call
        self._cancelled = threading.Event()
        self._in_flight: list[Any] = []

    def cancel(self) -> None:
        self._cancelled.set()
        for item in list(self._in_flight):
            item.cancel()

    def run(self, request: ChatRequest, catalog: ToolCatalog) -> TurnResult:
        messages = list(request.messages)
        tools = list(request.tools or []) + catalog.definitions()
        turn = TurnResult(messages)
        step = 0
        while True:
            choice = tool_choice_for_step(request.tool_choice, step, self.max_steps)
            reply = self._reply(
                replace(
                    request,
                    messages=messages,
                    tools=tools or None,
                    tool_choice=choice if tools else "auto",
                )
            )
            last_token = time.perf_counter()
            turn.replies.append(reply)
            if reply.stop_reason == StopReason.CANCELLED or self._cancelled.is_set():
                turn.end = "cancelled"
                return turn
            if reply.error is not None:
                turn.end = "error"
                return turn
            if not reply.tool_calls:
                turn.end = "step_limit" if step >= self.max_steps else "answered"
                return turn
            messages.append(assistant_message(reply))
            if any(catalog.lookup(c.name) is None for c in reply.tool_calls):
                # A call to a tool this loop cannot run (a user tool): the caller answers it.
                turn.calls += [CallRecord(c) for c in reply.tool_calls]
                turn.end = "other_tool"
                return turn
            for call in reply.tool_calls:
                record = self._run_call(call, catalog, last_token)
                turn.calls.append(record)
                assert record.result is not None
                messages.append(tool_message(call, record.result))
                if self.on_call is not None:
                    self.on_call(record)
                if self._cancelled.is_set():
                    turn.end = "cancelled"
                    return turn
            step += 1

    def _reply(self, request: ChatRequest) -> ChatResult:
        def on_event(event: Any) -> None:
            if isinstance(event, TextDelta) and self.on_text is not None:
                self.on_text(event.text)

        handle = self.engine.submit(request, on_event=on_event)
        self._in_flight.append(handle)
        if self._cancelled.is_set():
            handle.cancel()
        try:
            result: ChatResult = handle.result()
            return result
        finally:
            self._in_flight.remove(handle)

    def _run_call(self, call: ToolCall, catalog: ToolCatalog, last_token: float) -> CallRecord:
        tool = catalog.lookup(call.name)
        assert tool is not None
        record = CallRecord(call, tool.server, tool.name)
        record.arguments_valid = tool.argument_errors(call.arguments) is None
        if tool.exposed in self.always_allowed:
            record.approval = "allowed"
        else:
            record.approval = self.approve(call, tool)
            if record.approval == "always":
                self.always_allowed.add(tool.exposed)
        if self._cancelled.is_set():
            record.result = ToolResult.failed(tool.server, tool.name, "cancelled", CANCELLED_TEXT)
        elif record.approval == "deny":
            record.result = ToolResult.failed(tool.server, tool.name, "declined", DECLINED_TEXT)
        else:
            future = run_call(self.hub, tool, call, self.timeout)
            self._in_flight.append(future)
            try:
                record.result = future.result()
            except CancelledError:
                record.result = ToolResult.failed(
                    tool.server, tool.name, "cancelled", CANCELLED_TEXT
                )
            finally:
                self._in_flight.remove(future)
        record.after_last_token_s = time.perf_counter() - last_token
        return record
