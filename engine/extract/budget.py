"""How many tokens a row's reply needs: an estimate from the schema's shape and the
document's size, the default for `--max-tokens` (a fixed 512 cut the replies of large
schemas short, and Corral then filled their last values).

Each value is counted by its kind: a key with its quotes, colon and comma about a token per
three characters plus three; a number 6 tokens, a boolean or null 2, a date 6, a date-time
10, a string with a `maxLength` a token per three characters of it, an enum its longest
member, any other string `STRING_TOKENS`; an object its properties, an array its items
times how many there may be: `maxItems` where the schema says, else one item per
`DOCUMENT_TOKENS_PER_ITEM` tokens of the document (between `MIN_ITEMS` and `MAX_ITEMS`,
since a longer invoice lists more lines). `anyOf`/`oneOf` count their largest branch; local
`$ref`s are followed. The sum is doubled (models write longer values and blanks than the
least a schema allows) and kept within `FLOOR` and `CEILING`.
"""

from __future__ import annotations

import math
from typing import Any

STRING_TOKENS = 24  # a free string: a name, an address line, a short sentence
MIN_ITEMS, MAX_ITEMS = 3, 40
DOCUMENT_TOKENS_PER_ITEM = 150
SLACK = 2.0
FLOOR, CEILING = 128, 4096
MAX_DEPTH = 12  # nesting (and $ref hops) followed before a value counts as a free string
_FORMATS = {"date": 6, "date-time": 10, "time": 6, "email": 10, "uri": 16, "uuid": 14}


def reply_tokens(schema: dict[str, Any], document_tokens: int) -> int:
    """The reply tokens a row of `schema` over a document of `document_tokens` needs."""
    items = max(MIN_ITEMS, min(MAX_ITEMS, document_tokens // DOCUMENT_TOKENS_PER_ITEM))
    needed = _value(schema, schema, items, 0)
    return int(min(CEILING, max(FLOOR, math.ceil(needed * SLACK))))


def _value(node: Any, root: dict[str, Any], items: int, depth: int) -> float:
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return STRING_TOKENS
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        return _value(_resolve(root, ref), root, items, depth + 1)
    branches = [b for key in ("anyOf", "oneOf") for b in node.get(key) or []]
    if branches:
        return max(_value(b, root, items, depth + 1) for b in branches)
    if "enum" in node and isinstance(node["enum"], list) and node["enum"]:
        return max(len(str(v)) / 3 + 2 for v in node["enum"])
    if "const" in node:
        return len(str(node["const"])) / 3 + 2
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in node:
        properties = node.get("properties") or {}
        return 2 + sum(
            len(str(key)) / 3 + 3 + _value(sub, root, items, depth + 1)
            for key, sub in properties.items()
        )
    if kind == "array" or "items" in node:
        count = node.get("maxItems")
        count = min(count, MAX_ITEMS) if isinstance(count, int) and count >= 0 else items
        return 2 + count * (1 + _value(node.get("items") or {}, root, items, depth + 1))
    if kind in ("number", "integer"):
        return 6
    if kind in ("boolean", "null"):
        return 2
    limit = node.get("maxLength")
    if isinstance(limit, int) and limit >= 0:
        return min(limit, 3 * STRING_TOKENS) / 3 + 2
    return _FORMATS.get(str(node.get("format")), STRING_TOKENS)


def _resolve(root: dict[str, Any], ref: str) -> Any:
    """The node a local `#/...` pointer names (None where it names nothing)."""
    node: Any = root
    for part in ref.lstrip("#").split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
