"""Engine results and events in OpenAI's response shapes, plus Corral's `corral` statistics.

A request asks for `n` choices (1 by default); choice i's events and result carry index i.
`ChunkWriter` turns the stream of engine events into `chat.completion.chunk` (or
`text_completion`) payloads: a first chunk with the role per choice, content deltas,
tool-call deltas (id and name first, then argument fragments, as the `openai` client
accumulates them), a last chunk per choice with its `finish_reason`, and once every choice
has finished the usage chunk when `include_usage` asks for it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from engine.server.logprobs import chat_entry, chat_logprobs, completion_logprobs
from engine.types import (
    ChatEvent,
    ChatResult,
    Ending,
    Finished,
    ReasoningDelta,
    StopReason,
    TextDelta,
    TokenLogprob,
    TokenLogprobs,
    ToolCallDelta,
)

# What the engine streams for a request of n choices: (choice index, event).
IndexedEvent = tuple[int, ChatEvent]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def finish_reason(result: ChatResult) -> str:
    """OpenAI's word for the reply's Ending: "length" for a reply Corral filled or cut (tool
    calls too: their arguments may hold values the model did not write), "tool_calls" or
    "stop" only for a reply the model finished."""
    if result.ending in (Ending.FILLED, Ending.CUT):
        return "length"
    return "tool_calls" if result.tool_calls else "stop"


def status_for(result: ChatResult) -> int:
    """The HTTP status for a reply the engine could not produce."""
    if result.error is None:
        return 503  # cancelled by the server itself: it is stopping
    return {"input": 400, "unavailable": 503}.get(result.error_kind or "", 500)


def error_message(result: ChatResult) -> str:
    """What a client is told about a reply the engine could not produce."""
    return result.error or "the reply was cancelled: the server is stopping"


def failure(results: list[ChatResult]) -> ChatResult | None:
    """The first choice the engine could not produce (failed or cancelled), if any."""
    return next((r for r in results if r.error or r.stop_reason == StopReason.CANCELLED), None)


def usage(results: list[ChatResult]) -> dict[str, Any]:
    """Token counts of a request: its prompt once (the choices share it), every choice's
    completion."""
    first = results[0].stats
    completion = sum(r.stats.generated_tokens for r in results)
    return {
        "prompt_tokens": first.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": first.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": first.cached_tokens},
    }


def corral_stats(result: ChatResult, warnings: list[str]) -> dict[str, Any]:
    """The reply's own figures, beside OpenAI's fields."""
    s = result.stats
    return {
        "ttft_ms": round(s.ttft_s * 1e3, 2),
        "prefill_tps": round(s.prefill_tps, 2),
        "decode_tps": round(s.decode_tps, 2),
        "total_ms": round(s.total_s * 1e3, 2),
        "ending": result.ending.value,
        "filled_paths": list(result.filled_paths),
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
        # checked against the schema (or tools) the client sent, formats included
        "valid_as_written": result.valid_as_written,
        **(
            {"invalid_as_written": result.as_written.to_dict()}
            if result.as_written is not None and not result.as_written.valid
            else {}
        ),
        "as_written_ms": s.as_written_ms,
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


def corral_figures(results: list[ChatResult], warnings: list[str]) -> dict[str, Any]:
    """`corral` of a response: the first choice's figures, and with several choices each
    one's under `choices`."""
    figures = corral_stats(results[0], warnings)
    if len(results) > 1:
        figures["choices"] = [corral_stats(r, warnings) for r in results]
    return figures


def _message(result: ChatResult) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": result.text if result.text or not result.tool_calls else None,
        "refusal": None,
    }
    if result.reasoning is not None:  # DeepSeek's, vLLM's and llama.cpp's field
        message["reasoning_content"] = result.reasoning
    if result.tool_calls:
        message["tool_calls"] = tool_calls_json(result)
    return message


def chat_completion(
    completion_id: str, model: str, results: list[ChatResult], warnings: list[str], top: int = 0
) -> dict[str, Any]:
    """A chat.completion; `top`: alternatives per token where the request asked for logprobs."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": i,
                "message": _message(result),
                "logprobs": chat_logprobs(result.logprobs, top),
                "finish_reason": finish_reason(result),
            }
            for i, result in enumerate(results)
        ],
        "usage": usage(results),
        "corral": corral_figures(results, warnings),
    }


def text_completion(
    completion_id: str, model: str, results: list[ChatResult], warnings: list[str], top: int = 0
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": i,
                "text": result.text,
                "logprobs": completion_logprobs(result.logprobs, top),
                "finish_reason": finish_reason(result),
            }
            for i, result in enumerate(results)
        ],
        "usage": usage(results),
        "corral": corral_figures(results, warnings),
    }


def encode_sse(payload: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        + b"\n\n"
    )


SSE_DONE = b"data: [DONE]\n\n"


class ChunkWriter:
    """Streamed chunks for the `n` choices of one request (`chat`: chat.completion.chunk,
    else text_completion)."""

    def __init__(
        self,
        completion_id: str,
        model: str,
        *,
        chat: bool,
        include_usage: bool,
        warnings: list[str],
        n: int = 1,
        top: int = 0,
    ) -> None:
        """`top`: alternatives per token where the request asked for logprobs."""
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
        self.results: list[ChatResult | None] = [None] * n
        self._top = top
        # recorded tokens not sent yet, per choice, and the text offset of each choice
        self._tokens: list[list[TokenLogprob]] = [[] for _ in range(n)]
        self._offsets = [0] * n

    @property
    def done(self) -> bool:
        """Every choice has finished."""
        return all(r is not None for r in self.results)

    def finished(self) -> list[ChatResult]:
        return [r for r in self.results if r is not None]

    def _chunk(self, choice: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
        chunk = dict(self._base, choices=[choice] if choice is not None else [])
        if self._include_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return chunk

    def _delta(
        self, index: int, delta: dict[str, Any], finish: str | None = None
    ) -> dict[str, Any]:
        tokens, self._tokens[index] = self._tokens[index], []
        if self._chat:
            logprobs = (
                {"content": [chat_entry(t, self._top) for t in tokens], "refusal": None}
                if tokens
                else None
            )
            return self._chunk(
                {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            )
        text = delta.get("content", "")
        offset = self._offsets[index]
        self._offsets[index] += sum(len(t.text) for t in tokens)
        logprobs = completion_logprobs(tokens, self._top, offset) if tokens else None
        return self._chunk(
            {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
        )

    def opening(self) -> list[dict[str, Any]]:
        """The first chunks: the assistant role of each choice (chat only)."""
        if not self._chat:
            return []
        role = {"role": "assistant", "content": ""}
        return [self._delta(i, dict(role)) for i in range(len(self.results))]

    def chunks(self, events: list[IndexedEvent]) -> list[dict[str, Any]]:
        """Chunks for a batch of events, neighbouring pieces of one kind and choice merged."""
        out: list[dict[str, Any]] = []
        text: list[str] = []
        thought: list[str] = []
        calls: list[dict[str, Any]] = []
        current = 0  # the choice the pieces being merged belong to

        def flush() -> None:
            if thought:
                if self._chat:
                    out.append(self._delta(current, {"reasoning_content": "".join(thought)}))
                thought.clear()
            if text:
                out.append(self._delta(current, {"content": "".join(text)}))
                text.clear()
            if calls:
                out.append(self._delta(current, {"tool_calls": list(calls)}))
                calls.clear()

        for index, event in events:
            if index != current:
                flush()
                current = index
            if isinstance(event, ReasoningDelta):
                if text or calls:
                    flush()
                thought.append(event.text)
            elif isinstance(event, TextDelta):
                if calls or thought:
                    flush()
                text.append(event.text)
            elif isinstance(event, ToolCallDelta):
                if text or thought:
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
            elif isinstance(event, TokenLogprobs):
                self._tokens[index] += event.tokens
            elif isinstance(event, Finished):
                flush()
                self.results[index] = event.result
                out += self._closing(index, event.result)
        flush()
        return out

    def _closing(self, index: int, result: ChatResult) -> list[dict[str, Any]]:
        if result.error or result.stop_reason == StopReason.CANCELLED:
            return []  # the caller sends an error event instead
        last = self._delta(index, {}, finish_reason(result))
        last["corral"] = corral_stats(result, self._warnings)
        out = [last]
        results = self.finished()
        if self.done and self._include_usage and failure(results) is None:
            out.append(self._chunk(None, usage=usage(results)))
        return out
