"""Export a conversation: its active path as Markdown, or its whole tree as JSON.

The JSON export carries each sent image whole, as base64 (`images[].data`, with its name,
media type and SHA-256), so the file stands alone; an image whose file is gone is listed
with `"missing": true`; an attached document's text is in its message's meta. The
Markdown export names the images and documents in the text.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from app.store.documents import message_documents
from app.store.records import Message, MessageImage
from app.store.store import Store

EXPORT_FORMAT = "corral.conversation/1"


def _tool_calls_markdown(message: Message) -> list[str]:
    lines = []
    for call in message.meta.get("tool_calls", []):
        args = json.dumps(call.get("arguments", {}), indent=2, ensure_ascii=False)
        lines += [
            f"**Tool call** `{call.get('name')}` (id `{call.get('id')}`):",
            "",
            "```json",
            args,
            "```",
            "",
        ]
    return lines


def to_markdown(store: Store, conversation_id: int) -> str:
    """The active branch as Markdown: a heading per message, tool calls as JSON blocks."""
    conv = store.conversation(conversation_id)
    if conv is None:
        raise KeyError(f"no conversation {conversation_id}")
    lines = [f"# {conv.title}", ""]
    if conv.settings.system_prompt:
        lines += ["## System", "", conv.settings.system_prompt, ""]
    for message in store.active_path(conversation_id):
        if message.role == "tool":
            lines += [
                f"## Tool result: {message.meta.get('name', '')}",
                "",
                "```",
                message.content,
                "```",
                "",
            ]
            continue
        heading = {"user": "User", "assistant": "Assistant"}.get(message.role, message.role)
        if constraint := message.meta.get("constraint"):
            heading += f" (constrained: {constraint})"
        lines += [f"## {heading}", ""]
        if message.images:
            lines += ["*Images: " + ", ".join(i.name for i in message.images) + "*", ""]
        if documents := message_documents(message.meta):
            lines += ["*Documents: " + ", ".join(d.summary() for d in documents) + "*", ""]
        if message.content:
            lines += [message.content, ""]
        lines += _tool_calls_markdown(message)
    return "\n".join(lines).rstrip() + "\n"


def to_json(store: Store, conversation_id: int) -> dict[str, Any]:
    """The whole conversation (all branches), its settings and the active path."""
    conv = store.conversation(conversation_id)
    if conv is None:
        raise KeyError(f"no conversation {conversation_id}")
    rows = store.db.execute(
        "SELECT id FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
    ).fetchall()
    messages = [store.message(r["id"]) for r in rows]
    return {
        "format": EXPORT_FORMAT,
        "title": conv.title,
        "created_at": conv.created_at,
        "settings": conv.settings.to_dict(),
        "constraint": conv.constraint,
        "tools": conv.tools.to_dict(),
        "active_path": [m.id for m in store.active_path(conversation_id)],
        "messages": [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "role": m.role,
                "content": m.content,
                "meta": m.meta,
                "created_at": m.created_at,
                **({"images": [_image(store, i) for i in m.images]} if m.images else {}),
                **(
                    {"logprobs": [t.to_dict() for t in tokens]}
                    if (tokens := store.token_logprobs(m.id))
                    else {}
                ),
            }
            for m in messages
            if m is not None
        ],
    }


MEDIA_TYPES = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}


def _image(store: Store, image: MessageImage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": image.name,
        "media_type": MEDIA_TYPES.get(image.file.rsplit(".", 1)[-1], "application/octet-stream"),
    }
    try:
        data = store.image_bytes(image)
    except OSError:
        return {**out, "sha256": image.file.split(".")[0], "missing": True}
    return {
        **out,
        "sha256": hashlib.sha256(data).hexdigest(),
        "data": base64.b64encode(data).decode(),
    }
