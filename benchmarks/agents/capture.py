"""A loopback server that records every request a coding agent sends and answers with a
fixed script, in the dialect the agent speaks (Anthropic Messages, OpenAI Responses, OpenAI
chat completions), so that a recorded session always has the same shape: the agent's first
request, a call of its shell tool, the tool's result sent back, a closing text answer.

Dev-only (benchmarks/agents/record.py uses it); it is not part of what ships. The script:
a request offering a shell tool and holding no tool result yet is answered with a call of
that tool (`ls`); every other request with a short text.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SHELL_TOOLS = ("Bash", "bash", "shell", "exec_command", "shell_command", "local_shell")
TEXT = "Done: the folder holds one file."


def _shell_tool(tools: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """(name, parameters schema) of the first shell-like tool offered, if any."""
    for wanted in SHELL_TOOLS:
        for tool in tools:
            fn = tool.get("function", tool)
            if fn.get("name") == wanted:
                schema = fn.get("input_schema") or fn.get("parameters") or {}
                return wanted, schema
    return None


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments filling the schema's required properties: the command `ls`."""
    out: dict[str, Any] = {}
    props = schema.get("properties", {})
    for name in schema.get("required", list(props)[:1]):
        kind = props.get(name, {}).get("type")
        if name in ("command", "cmd"):
            out[name] = ["ls"] if kind == "array" else "ls"
        elif name == "description":
            out[name] = "List the files"
        elif kind == "array":
            out[name] = []
        elif kind in ("integer", "number"):
            out[name] = 1000
        elif kind == "boolean":
            out[name] = False
        else:
            out[name] = "."
    return out


def _has_tool_result(body: dict[str, Any]) -> bool:
    text = json.dumps(body.get("messages", body.get("input", [])))
    return any(k in text for k in ('"tool_result"', '"function_call_output"', '"role": "tool"'))


class Recorder:
    """The requests seen, in order, as (method, path, query, headers, body)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(entry)


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _messages_reply(body: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    call = None if _has_tool_result(body) else _shell_tool(body.get("tools") or [])
    mid = f"msg_{uuid.uuid4().hex[:24]}"
    usage = {"input_tokens": 10, "output_tokens": 5}
    if call:
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:20]}",
            "name": call[0],
            "input": _arguments(call[1]),
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": TEXT}
        stop = "end_turn"
    whole = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "m"),
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    start = {**whole, "content": [], "stop_reason": None}
    first: dict[str, Any]
    if block["type"] == "text":
        first = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": TEXT}
    else:
        first = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": first},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return whole, _sse(events)


def _responses_reply(body: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    call = None if _has_tool_result(body) else _shell_tool(body.get("tools") or [])
    rid = f"resp_{uuid.uuid4().hex[:24]}"
    if call:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:20]}",
            "call_id": f"call_{uuid.uuid4().hex[:20]}",
            "name": call[0],
            "arguments": json.dumps(_arguments(call[1])),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
        }
    response = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", "m"),
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": {**response, "status": "in_progress", "output": []},
            },
        ),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    for n, (_, data) in enumerate(events):
        data["sequence_number"] = n
    return response, _sse(events)


def _chat_reply(body: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    call = None if _has_tool_result(body) else _shell_tool(body.get("tools") or [])
    cid = f"chatcmpl-{uuid.uuid4().hex[:20]}"
    base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = body.get("model", "m")
    if call:
        tc = {
            "index": 0,
            "id": f"call_{uuid.uuid4().hex[:20]}",
            "type": "function",
            "function": {"name": call[0], "arguments": json.dumps(_arguments(call[1]))},
        }
        delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [tc]}
        finish = "tool_calls"
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [tc]}
    else:
        delta = {"role": "assistant", "content": TEXT}
        finish = "stop"
        message = {"role": "assistant", "content": TEXT}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
    ]
    raw = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
    whole = {
        **base,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return whole, raw


_REPLIES = {
    "/v1/messages": _messages_reply,
    "/v1/responses": _responses_reply,
    "/v1/chat/completions": _chat_reply,
}


def capture_server(recorder: Recorder, model: str) -> ThreadingHTTPServer:
    """A server on a free loopback port recording into `recorder` (serve it on a thread)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _record(self, body: Any) -> str:
            path, _, query = self.path.partition("?")
            recorder.add(
                {
                    "method": self.command,
                    "path": path,
                    "query": query,
                    "headers": dict(self.headers.items()),
                    "body": body,
                }
            )
            return path

        def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            path = self._record(None)
            if path.rstrip("/") == "/v1/models":
                card = {"id": model, "object": "model", "created": 0, "owned_by": "corral"}
                self._send(200, json.dumps({"object": "list", "data": [card]}).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_HEAD(self) -> None:  # noqa: N802
            self._record(None)
            self._send(200, b"")

        def do_POST(self) -> None:  # noqa: N802
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size)
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
            path = self._record(body)
            if path == "/v1/messages/count_tokens":
                self._send(200, b'{"input_tokens": 10}')
                return
            reply = _REPLIES.get(path)
            if reply is None or not isinstance(body, dict):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            whole, stream = reply(body)
            if body.get("stream"):
                self._send(200, stream, "text/event-stream")
            else:
                self._send(200, json.dumps(whole).encode())

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)
