"""A reply that is JSON, shown as what it is: formatted (two-space indent) in a monospace
code block instead of one minified line of body text, with a mark saying whether it is
valid against the user's schema. The stored reply is not changed (Copy and the history
keep the model's own text); only its display is."""

from __future__ import annotations

import json
from typing import Any

JSON_KINDS = ("json_schema", "any_json")
VALID = "✓"  # a check mark as well as a colour


def formatted_json(text: str, meta: dict[str, Any]) -> str | None:
    """`text` as a fenced, indented JSON block when the reply was held to JSON (a schema or
    any JSON) or is a JSON object or array; None when it is not JSON."""
    stripped = text.strip()
    held = meta.get("constraint_kind") in JSON_KINDS and not meta.get("tool_calls")
    if not stripped or (not held and stripped[:1] not in "{["):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    if not held and not isinstance(value, dict | list):
        return None
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"


def validity_mark(meta: dict[str, Any]) -> str:
    """ "✓ Valid against recipe.json" for a reply checked against the user's schema (or
    "✓ Valid JSON" for any JSON); "" where nothing was checked or the check failed (the
    reply's note then says why it is not valid)."""
    kind = meta.get("constraint_kind")
    if kind not in JSON_KINDS or meta.get("tool_calls") or meta.get("error"):
        return ""
    if kind == "any_json":
        return f"{VALID} Valid JSON"
    as_written = meta.get("as_written") or {}
    if as_written.get("valid") is True:
        name = meta.get("constraint") or "your schema"
        return f"{VALID} Valid against {name}"
    return ""
