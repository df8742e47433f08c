"""Engine results and events in OpenAI's Responses shapes, with Corral's `corral` figures.

A reply is a `response` whose `output` holds a `message` item (its text as `output_text`)
when there is text, and a `function_call` item per call. Streamed, it is the Responses
event sequence: `response.created`, `response.in_progress`, per item
`response.output_item.added`, then for text `response.content_part.added`,
`response.output_text.delta`... `response.output_text.done`, `response.content_part.done`,
for a call `response.function_call_arguments.delta`... `.done`, then
`response.output_item.done`; last `response.completed` (or `response.incomplete`), or an
`error` event where the reply failed after the stream began. Item ids follow from the
response's id, so the streamed items and the final response name the same items.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.server.keepalive import SSE_COMMENT
from engine.server.openai_responses.schemas import ResponsesBody
from engine.server.responses import IndexedEvent, corral_stats, failure
from engine.server.streaming import generation_error
from engine.types import (
    ChatResult,
    Ending,
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)


def response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


@dataclass
class Settings:
    """What the response echoes of its request."""

    model: str
    instructions: str | None = None
    max_output_tokens: int | None = None
    previous_response_id: str | None = None
    store: bool = True
    temperature: float | None = None
    top_p: float | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    metadata: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def response_settings(body: ResponsesBody, model: str, warnings: list[str]) -> Settings:
    """What a response to `body` echoes: the online endpoint's and a batch line's alike."""
    fmt = body.text.format if body.text is not None else None
    return Settings(
        model=model,
        instructions=body.instructions,
        max_output_tokens=body.max_output_tokens,
        previous_response_id=body.previous_response_id,
        store=body.store,
        temperature=body.temperature,
        top_p=body.top_p,
        tools=list(body.tools or []),
        tool_choice=body.tool_choice or "auto",
        parallel_tool_calls=body.parallel_tool_calls is not False,
        text={
            "format": fmt.model_dump(by_alias=True, exclude_none=True)
            if fmt is not None
            else {"type": "text"}
        },
        metadata=dict(body.metadata or {}),
        warnings=warnings,
    )


def _suffix(rid: str) -> str:
    return rid.removeprefix("resp_")


def message_item(rid: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{_suffix(rid)}",
        "status": status,
        "role": "assistant",
        "content": [_text_part(text)] if status != "in_progress" else [],
    }


def reasoning_item(rid: str, text: str) -> dict[str, Any]:
    """What the model thought before it answered, as a `reasoning` item."""
    content = [{"type": "reasoning_text", "text": text}] if text else []
    return {"type": "reasoning", "id": f"rs_{_suffix(rid)}", "summary": [], "content": content}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(
    rid: str, index: int, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{_suffix(rid)}_{index}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def output_items(rid: str, result: ChatResult) -> list[dict[str, Any]]:
    """The reply's items; the last one (where the reply stopped) is `incomplete` when
    the reply is, as it is streamed."""
    items = [reasoning_item(rid, result.reasoning)] if result.reasoning is not None else []
    items += [message_item(rid, result.text, "completed")] if result.text else []
    for i, call in enumerate(result.tool_calls):
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        items.append(call_item(rid, i, call.id, call.name, arguments))
    if items and _incomplete(result) and items[-1]["type"] != "reasoning":
        items[-1]["status"] = "incomplete"
    return items


def _incomplete(result: ChatResult) -> bool:
    """The Responses word for a reply Corral filled or cut (tool calls too): `incomplete`,
    its reason `max_output_tokens` (OpenAI's own; `corral.ending` and
    `corral.close_reason` say whether it was the budget or a loop)."""
    return result.ending in (Ending.FILLED, Ending.CUT)


def usage(result: ChatResult) -> dict[str, Any]:
    """OpenAI's usage. Corral caches every prompt without being asked: nothing counts as
    a cache write (`cache_write_tokens`, which the current SDK's types require)."""
    s = result.stats
    return {
        "input_tokens": s.prompt_tokens,
        "input_tokens_details": {"cached_tokens": s.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": s.generated_tokens,
        "output_tokens_details": {"reasoning_tokens": s.thinking_tokens},
        "total_tokens": s.prompt_tokens + s.generated_tokens,
    }


def response_json(
    rid: str,
    created: int,
    settings: Settings,
    result: ChatResult | None,
    output: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The response: in progress while `result` is None, else finished with `output`
    (by default the result's items)."""
    status = "in_progress"
    if result is not None:
        status = "incomplete" if _incomplete(result) else "completed"
    body: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": settings.instructions,
        "max_output_tokens": settings.max_output_tokens,
        "model": settings.model,
        "output": [],
        "parallel_tool_calls": settings.parallel_tool_calls,
        "previous_response_id": settings.previous_response_id,
        "reasoning": {"effort": None, "summary": None},
        "store": settings.store,
        "temperature": settings.temperature,
        "text": settings.text,
        "tool_choice": settings.tool_choice,
        "tools": settings.tools,
        "top_p": settings.top_p,
        "truncation": "disabled",
        "usage": None,
        "metadata": settings.metadata,
    }
    if result is not None:
        body["output"] = output if output is not None else output_items(rid, result)
        body["usage"] = usage(result)
        body["corral"] = corral_stats(result, settings.warnings)
    return body


class ResponseStream:
    """The streamed events of one response (a StreamWriter). `on_done(result, response)`
    is called once the reply has finished well (the store keeps it)."""

    def __init__(
        self,
        rid: str,
        settings: Settings,
        on_done: Callable[[ChatResult, dict[str, Any]], None] | None = None,
    ) -> None:
        self._id = rid
        self._created = int(time.time())
        self._settings = settings
        self._on_done = on_done
        self._sequence = 0
        self.result: ChatResult | None = None
        self.items: list[dict[str, Any]] = []  # finished items, in output order
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._pending: list[str] = []  # its text or arguments not sent yet
        self._calls = 0

    @property
    def done(self) -> bool:
        return self.result is not None

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return f"event: {kind}\ndata: {data}\n\n".encode()

    def keep_alive(self) -> bytes:
        return SSE_COMMENT

    def opening(self) -> list[bytes]:
        start = response_json(self._id, self._created, self._settings, None)
        return [
            self._event("response.created", response=start),
            self._event("response.in_progress", response=start),
        ]

    def feed(self, events: list[IndexedEvent]) -> list[bytes]:
        out: list[bytes] = []
        for _, event in events:
            if isinstance(event, ReasoningDelta):
                if self._open is None or self._open["type"] != "reasoning":
                    self._close(out)
                    self._start(out, reasoning_item(self._id, ""))
                self._pending.append(event.text)
            elif isinstance(event, TextDelta):
                if self._open is None or self._open["type"] != "message":
                    self._close(out)
                    self._start(out, message_item(self._id, "", "in_progress"))
                self._pending.append(event.text)
            elif isinstance(event, ToolCallDelta):
                if event.id:
                    self._close(out)
                    item = call_item(self._id, self._calls, event.id, event.name, "", "in_progress")
                    self._calls += 1
                    self._start(out, item)
                self._pending.append(event.arguments)
            elif isinstance(event, Finished):
                self._close(out, _incomplete(event.result))
                self.result = event.result
                if failure([event.result]) is None:
                    out.append(self._finish(event.result))
        self._flush(out)
        return out

    def ending(self) -> list[bytes]:
        error = generation_error([self.result] if self.result is not None else [])
        if error is None:
            return []
        return [self._event("error", code=error.code, message=error.message, param=None)]

    def _start(self, out: list[bytes], item: dict[str, Any]) -> None:
        self._open = item
        index = len(self.items)
        out.append(self._event("response.output_item.added", output_index=index, item=item))
        if item["type"] == "message":
            part = _text_part("")
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        item["_text"] = ""  # what has been streamed of it (after the event went out)

    def _flush(self, out: list[bytes]) -> None:
        piece = "".join(self._pending)
        self._pending.clear()
        item = self._open
        if not piece or item is None:
            return
        item["_text"] += piece
        event, fields = _DELTAS[item["type"]]
        out.append(
            self._event(
                event, item_id=item["id"], output_index=len(self.items), **fields, delta=piece
            )
        )

    def _close(self, out: list[bytes], incomplete: bool = False) -> None:
        item = self._open
        if item is None:
            return
        self._flush(out)
        text = item.pop("_text")
        index = len(self.items)
        if item["type"] == "reasoning":
            out.append(
                self._event(
                    "response.reasoning_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                )
            )
            done = reasoning_item(self._id, text.strip())
        elif item["type"] == "message":
            part = _text_part(text)
            out.append(
                self._event(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
            done = message_item(self._id, text, "incomplete" if incomplete else "completed")
        else:
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=text,
                )
            )
            status = "incomplete" if incomplete else "completed"
            done = {**item, "arguments": text, "status": status}
        out.append(self._event("response.output_item.done", output_index=index, item=done))
        self.items.append(done)
        self._open = None

    def _finish(self, result: ChatResult) -> bytes:
        final = response_json(self._id, self._created, self._settings, result, self.items)
        if self._on_done is not None:
            self._on_done(result, final)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return self._event(kind, response=final)


# The delta event of each kind of output item while it streams, and its extra fields.
_DELTAS: dict[str, tuple[str, dict[str, Any]]] = {
    "reasoning": ("response.reasoning_text.delta", {"content_index": 0}),
    "message": ("response.output_text.delta", {"content_index": 0, "logprobs": []}),
    "function_call": ("response.function_call_arguments.delta", {}),
}
