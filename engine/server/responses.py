"""Engine results and events in OpenAI's response shapes, plus Corral's `corral` statistics.

`ChunkWriter` turns a stream of engine events into `chat.completion.chunk` (or
`text_completion`) payloads: a first chunk with the role, content deltas, tool-call deltas
(id and name first, then argument fragments, as the `openai` client accumulates them), a
last chunk with `finish_reason`, and the usage chunk when `include_usage` asks for it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from engine.types import ChatEvent, ChatResult, Finished, StopReason, TextDelta, ToolCallDelta


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def finish_reason(result: ChatResult) -> str:
    if result.tool_calls:
        return "tool_calls"
    return "length" if result.stop_reason == StopReason.LENGTH else "stop"


def status_for(result: ChatResult) -> int:
    """The HTTP status for a reply the engine could not produce."""
    if result.error is None:
        return 503  # cancelled by the server itself: it is stopping
    return {"input": 400, "unavailable": 503}.get(result.error_kind or "", 500)


def error_message(result: ChatResult) -> str:
    """The engine's error without the exception's class name."""
    message = result.error or "the reply was cancelled: the server is stopping"
    head, sep, rest = message.partition(": ")
    return rest if sep and head.endswith("Error") and head.isidentifier() else message


def usage(result: ChatResult) -> dict[str, Any]:
    s = result.stats
    return {
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.generated_tokens,
        "total_tokens": s.prompt_tokens + s.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": s.cached_tokens},
    }


def corral_stats(result: ChatResult, warnings: list[str]) -> dict[str, Any]:
    """The reply's own figures, beside OpenAI's fields."""
    s = result.stats
    return {
        "ttft_ms": round(s.ttft_s * 1e3, 2),
        "prefill_tps": round(s.prefill_tps, 2),
        "decode_tps": round(s.decode_tps, 2),
        "total_ms": round(s.total_s * 1e3, 2),
        "stop_reason": s.stop_reason,
        "constraint": result.constraint_name,
        "constraint_use": result.constraint_use,
        "incomplete": result.incomplete,
        "closed_to_fit": s.closed_to_fit,
        "close_reason": s.close_reason,
        "forced_tokens": s.forced_tokens,
        "mask_overhead_ms": round(s.mask_overhead_ms, 3),
        "mask_mean_ms": round(s.mask_mean_ms, 4),
        "grammar_compile_ms": round(s.grammar_compile_ms, 3),
        "warnings": warnings + [w for w in result.warnings if w not in warnings],
    }


def tool_calls_json(result: ChatResult) -> list[dict[str, Any]]:
    return [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
        }
        for c in result.tool_calls
    ]


def chat_completion(
    completion_id: str, model: str, result: ChatResult, warnings: list[str]
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": result.text if result.text or not result.tool_calls else None,
        "refusal": None,
    }
    if result.tool_calls:
        message["tool_calls"] = tool_calls_json(result)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason(result),
            }
        ],
        "usage": usage(result),
        "corral": corral_stats(result, warnings),
    }


def text_completion(
    completion_id: str, model: str, result: ChatResult, warnings: list[str]
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "text": result.text,
                "logprobs": None,
                "finish_reason": finish_reason(result),
            }
        ],
        "usage": usage(result),
        "corral": corral_stats(result, warnings),
    }


def encode_sse(payload: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        + b"\n\n"
    )


SSE_DONE = b"data: [DONE]\n\n"


class ChunkWriter:
    """Streamed chunks for one reply (`chat`: chat.completion.chunk, else text_completion)."""

    def __init__(
        self,
        completion_id: str,
        model: str,
        *,
        chat: bool,
        include_usage: bool,
        warnings: list[str],
    ) -> None:
        self._base: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
        }
        self._chat = chat
        self._include_usage = include_usage
        self._warnings = warnings
        self.result: ChatResult | None = None

    def _chunk(self, choice: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
        chunk = dict(self._base, choices=[choice] if choice is not None else [])
        if self._include_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return chunk

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        if self._chat:
            return self._chunk(
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            )
        text = delta.get("content", "")
        return self._chunk({"index": 0, "text": text, "logprobs": None, "finish_reason": finish})

    def opening(self) -> list[dict[str, Any]]:
        """The first chunk: the assistant role (chat only)."""
        return [self._delta({"role": "assistant", "content": ""})] if self._chat else []

    def chunks(self, events: list[ChatEvent]) -> list[dict[str, Any]]:
        """Chunks for a batch of events, neighbouring pieces of one kind merged."""
        out: list[dict[str, Any]] = []
        text: list[str] = []
        calls: list[dict[str, Any]] = []

        def flush() -> None:
            if text:
                out.append(self._delta({"content": "".join(text)}))
                text.clear()
            if calls:
                out.append(self._delta({"tool_calls": list(calls)}))
                calls.clear()

        for event in events:
            if isinstance(event, TextDelta):
                if calls:
                    flush()
                text.append(event.text)
            elif isinstance(event, ToolCallDelta):
                if text:
                    flush()
                if event.id:
                    calls.append(
                        {
                            "index": event.index,
                            "id": event.id,
                            "type": "function",
                            "function": {"name": event.name, "arguments": event.arguments},
                        }
                    )
                elif calls and calls[-1]["index"] == event.index:
                    calls[-1]["function"]["arguments"] += event.arguments
                else:
                    calls.append({"index": event.index, "function": {"arguments": event.arguments}})
            elif isinstance(event, Finished):
                flush()
                self.result = event.result
                out += self._closing(event.result)
        flush()
        return out

    def _closing(self, result: ChatResult) -> list[dict[str, Any]]:
        if result.error or result.stop_reason == StopReason.CANCELLED:
            return []  # the caller sends an error event instead
        last = self._delta({}, finish_reason(result))
        last["corral"] = corral_stats(result, self._warnings)
        out = [last]
        if self._include_usage:
            out.append(self._chunk(None, usage=usage(result)))
        return out
