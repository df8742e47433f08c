"""Engine results and events in Anthropic's Messages shapes, with Corral's `corral` figures.

A reply is a `message` whose content is a `text` block (when there is text) and a
`tool_use` block per call. Streamed, it is Anthropic's event sequence: `message_start`,
`ping`, per block `content_block_start`, `content_block_delta` (`text_delta` or
`input_json_delta`) and `content_block_stop`, then `message_delta` (stop reason, usage)
and `message_stop`; an `error` event where the reply failed after the stream began.
Pings are its keep-alive while a long prompt is read (engine.server.keepalive), so
clients do not give up on a silent connection.
"""

from __future__ import annotations

import json
from typing import Any

from engine.server.responses import IndexedEvent, corral_stats, failure
from engine.server.streaming import generation_error
from engine.types import (
    ChatResult,
    Ending,
    Finished,
    ReasoningDelta,
    StopReason,
    TextDelta,
    ToolCallDelta,
)


def encode_event(payload: dict[str, Any]) -> bytes:
    """One SSE event named by the payload's type, as Anthropic's API sends them."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


def stop_reason(result: ChatResult) -> str:
    """Anthropic's word for the reply's Ending: "max_tokens" for a reply Corral filled or
    cut (tool calls too), the others only for a reply the model finished."""
    if result.ending in (Ending.FILLED, Ending.CUT):
        return "max_tokens"
    if result.tool_calls:
        return "tool_use"
    if result.stop_reason == StopReason.STOP_STRING:
        return "stop_sequence"
    return "end_turn"


def stop_sequence(result: ChatResult, sequences: list[str]) -> str | None:
    """The stop sequence that ended the reply. The engine does not say which one matched,
    so it is named where the request gave only one."""
    if result.stop_reason == StopReason.STOP_STRING and len(sequences) == 1:
        return sequences[0]
    return None


def usage(result: ChatResult) -> dict[str, int]:
    """Anthropic's usage: `input_tokens` are the prompt tokens computed for this request,
    `cache_read_input_tokens` those the prompt cache already held (their sum is the
    prompt). Corral caches every prompt without being asked: nothing is billed as a
    cache write."""
    s = result.stats
    return {
        "input_tokens": s.prompt_tokens - s.cached_tokens,
        "output_tokens": s.generated_tokens,
        "cache_read_input_tokens": s.cached_tokens,
        "cache_creation_input_tokens": 0,
    }


def message(
    message_id: str,
    model: str,
    result: ChatResult,
    warnings: list[str],
    sequences: list[str],
) -> dict[str, Any]:
    """The whole reply as a `message`."""
    content: list[dict[str, Any]] = []
    if result.reasoning is not None:
        content.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    if result.text:
        content.append({"type": "text", "text": result.text})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
        for c in result.tool_calls
    ]
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(result),
        "stop_sequence": stop_sequence(result, sequences),
        "usage": usage(result),
        "corral": corral_stats(result, warnings),
    }


class MessageStream:
    """The streamed events of one reply (a StreamWriter)."""

    def __init__(
        self, message_id: str, model: str, warnings: list[str], sequences: list[str]
    ) -> None:
        self._id = message_id
        self._model = model
        self._warnings = warnings
        self._sequences = sequences
        self.result: ChatResult | None = None
        self._blocks = 0  # content blocks opened so far
        self._open: str | None = None  # the type of the open block, if one is
        self._pending: list[str] = []  # text or JSON of the open block not sent yet

    @property
    def done(self) -> bool:
        return self.result is not None

    def opening(self) -> list[bytes]:
        start = {
            "type": "message_start",
            "message": {
                "id": self._id,
                "type": "message",
                "role": "assistant",
                "model": self._model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                # The counts come with message_delta, once the prompt has been read.
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        }
        return [encode_event(start), encode_event({"type": "ping"})]

    def feed(self, events: list[IndexedEvent]) -> list[bytes]:
        out: list[bytes] = []
        for _, event in events:
            if isinstance(event, ReasoningDelta):
                if self._open != "thinking":
                    self._close(out)
                    self._start(out, {"type": "thinking", "thinking": "", "signature": ""})
                self._pending.append(event.text)
            elif isinstance(event, TextDelta):
                if self._open != "text":
                    self._close(out)
                    self._start(out, {"type": "text", "text": ""})
                self._pending.append(event.text)
            elif isinstance(event, ToolCallDelta):
                if event.id:  # a new call: its own block
                    self._close(out)
                    block = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
                    self._start(out, block)
                self._pending.append(event.arguments)
            elif isinstance(event, Finished):
                self._close(out)
                self.result = event.result
                if failure([event.result]) is None:
                    out += self._closing(event.result)
        self._flush(out)
        return out

    def keep_alive(self) -> bytes:
        return encode_event({"type": "ping"})

    def ending(self) -> list[bytes]:
        error = generation_error([self.result] if self.result is not None else [])
        return [encode_event(error.anthropic_body())] if error is not None else []

    def _start(self, out: list[bytes], block: dict[str, Any]) -> None:
        out.append(
            encode_event(
                {"type": "content_block_start", "index": self._blocks, "content_block": block}
            )
        )
        self._open = block["type"]

    def _flush(self, out: list[bytes]) -> None:
        piece = "".join(self._pending)
        self._pending.clear()
        if not piece or self._open is None:
            return
        if self._open == "text":
            delta = {"type": "text_delta", "text": piece}
        elif self._open == "thinking":
            delta = {"type": "thinking_delta", "thinking": piece}
        else:
            delta = {"type": "input_json_delta", "partial_json": piece}
        out.append(
            encode_event({"type": "content_block_delta", "index": self._blocks, "delta": delta})
        )

    def _close(self, out: list[bytes]) -> None:
        if self._open is None:
            return
        self._flush(out)
        out.append(encode_event({"type": "content_block_stop", "index": self._blocks}))
        self._blocks += 1
        self._open = None

    def _closing(self, result: ChatResult) -> list[bytes]:
        delta = {
            "type": "message_delta",
            "delta": {
                "stop_reason": stop_reason(result),
                "stop_sequence": stop_sequence(result, self._sequences),
            },
            "usage": usage(result),
            "corral": corral_stats(result, self._warnings),
        }
        return [encode_event(delta), encode_event({"type": "message_stop"})]
