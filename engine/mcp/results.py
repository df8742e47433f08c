"""A tool call's outcome as Corral keeps it: what the model reads and what the card shows.

MCP results are untrusted input: each content block is checked and bounded here (text
length, image size and type, block count) before the model, the GUI or the store sees it.
Failures that are not the tool's own (timeout, server gone, declined, cancelled) are results
too, with `failure` saying which, so the model is told and the turn can go on.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

MAX_TEXT_CHARS = 32_000  # what the model reads from one result
MAX_BLOCKS = 64
MAX_IMAGE_BYTES = 8 * 1024 * 1024
SHOWN_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

Failure = Literal[
    "timeout",  # no answer within the call's timeout
    "server_exited",  # the server stopped (crashed, exited) before answering
    "not_running",  # the server is not ready (starting, failed, switched off)
    "protocol",  # the server answered with an MCP error or something unreadable
    "invalid_arguments",  # the arguments do not validate (never expected: calls are constrained)
    "declined",  # the user said no
    "cancelled",  # the user pressed Stop
    "unknown_tool",  # the name maps to no enabled tool
]

DECLINED_TEXT = "The user declined to run this tool call. Do not call it again; answer without it."
CANCELLED_TEXT = "The user cancelled this tool call."


@dataclass
class ToolResult:
    """One call's outcome. `text` goes back to the model; `blocks` are for display."""

    server: str
    tool: str
    text: str
    is_error: bool = False
    blocks: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    failure: Failure | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def structured_in_text(self) -> bool:
        """Whether a text block already holds the structured content (the spec asks servers
        to repeat it as serialised JSON), so it need not be shown or sent twice."""
        return self.structured is None or repeats_structured(self.structured, self.blocks)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def failed(
        cls, server: str, tool: str, failure: Failure, message: str, duration_s: float = 0.0
    ) -> ToolResult:
        """A failure that is not the tool's own answer; `message` says what happened."""
        text = message if failure in ("declined", "cancelled") else f"Error: {message}"
        return cls(
            server,
            tool,
            text,
            is_error=True,
            blocks=[{"type": "text", "text": message}],
            failure=failure,
            duration_s=duration_s,
        )


def _bounded(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters cut]"


def _image_block(kind: str, data: str, mime: str) -> tuple[dict[str, Any], str]:
    """A display block for base64 image/audio data, and the model's placeholder for it."""
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return {"type": "text", "text": f"[{kind}: not valid base64]"}, f"[{kind}: unreadable]"
    label = f"[{kind}: {mime}, {size // 1024 or 1} KB]"
    if kind == "image" and mime in SHOWN_IMAGE_TYPES and size <= MAX_IMAGE_BYTES:
        return {"type": "image", "mime_type": mime, "data": data}, label
    return {"type": "text", "text": label + " (not shown)"}, label


def _block(item: Any) -> tuple[dict[str, Any], str]:
    """One MCP content block as (display block, text for the model)."""
    kind = getattr(item, "type", None)
    if kind == "text":
        text = _bounded(str(item.text))
        return {"type": "text", "text": text}, text
    if kind in ("image", "audio"):
        return _image_block(kind, str(item.data), str(item.mime_type))
    if kind == "resource_link":
        name = str(getattr(item, "title", None) or item.name)
        uri = str(item.uri)
        block = {
            "type": "resource_link",
            "uri": uri,
            "name": name,
            "description": str(item.description or ""),
            "mime_type": str(item.mime_type or ""),
        }
        return block, f"[resource: {name} <{uri}>]"
    if kind == "resource":
        resource = item.resource
        uri = str(resource.uri)
        content = getattr(resource, "text", None)
        if isinstance(content, str):
            text = _bounded(content)
            return {"type": "resource", "uri": uri, "text": text}, f"[resource {uri}]\n{text}"
        mime = str(getattr(resource, "mime_type", None) or "application/octet-stream")
        if mime in SHOWN_IMAGE_TYPES:
            return _image_block("image", str(resource.blob), mime)
        return {"type": "resource", "uri": uri, "text": ""}, f"[resource {uri}: {mime}]"
    return {"type": "text", "text": f"[unsupported content: {kind}]"}, ""


def repeats_structured(structured: Any, blocks: list[dict[str, Any]]) -> bool:
    """Whether one of the text `blocks` is `structured` serialised as JSON, or the value
    SDK servers wrap as `{"result": value}` when a tool returns a plain value."""
    wrapped = structured.get("result") if isinstance(structured, dict) else None
    if not (isinstance(structured, dict) and len(structured) == 1 and "result" in structured):
        wrapped = None
    for block in blocks:
        if block.get("type") != "text":
            continue
        text = block.get("text", "")
        if wrapped is not None and text == wrapped:
            return True
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if value == structured or (wrapped is not None and value == wrapped):
            return True
    return False


def from_call_result(result: Any, server: str, tool: str, duration_s: float) -> ToolResult:
    """Convert the SDK's CallToolResult (content, structured_content, is_error)."""
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    content = list(result.content or [])
    for item in content[:MAX_BLOCKS]:
        block, text = _block(item)
        blocks.append(block)
        if text:
            texts.append(text)
    if len(content) > MAX_BLOCKS:
        texts.append(f"[… {len(content) - MAX_BLOCKS} more content blocks cut]")
    structured = result.structured_content
    if structured is not None:
        try:
            structured_text = json.dumps(structured, ensure_ascii=False)
        except (TypeError, ValueError):
            structured, structured_text = None, ""
        # Servers usually repeat structured content as text; the model needs it once.
        if structured_text and not repeats_structured(structured, blocks):
            texts.append(_bounded(structured_text))
    text = _bounded("\n".join(texts)) if texts else "(no output)"
    is_error = bool(result.is_error)
    return ToolResult(
        server,
        tool,
        f"Error: {text}" if is_error and not text.lower().startswith("error") else text,
        is_error=is_error,
        blocks=blocks,
        structured=structured,
        duration_s=duration_s,
    )
