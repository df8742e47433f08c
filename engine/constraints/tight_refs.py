"""References inside one JSON-schema document, resolved the way a validator resolves them.

The tight rewrite (tight.py) may narrow a subschema only if it knows every place that
subschema is used, so it must follow each `$ref` to the node it reaches: a JSON pointer
(`#/a/b`, percent-encoded as a URI fragment is, with `~0`/`~1` escapes), an anchor
(`$anchor`, or a draft 4-7 `$id`/`id` of the form `#name`), or either of those written
against the root's `$id` (`https://example.com/s.json#/a`). A reference that reaches
outside the document, or nowhere, makes `Refs.complete` false: the rewrite then leaves
the schema as written rather than guess.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

# Keywords whose value is a data value, never a schema: nothing in them is a reference.
VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
# Keywords whose value maps names to subschemas.
SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


def escape(name: str) -> str:
    """`name` as one JSON-pointer segment."""
    return name.replace("~", "~0").replace("/", "~1")


def subschemas(node: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema object in `node` (itself first) with its JSON pointer."""
    if not isinstance(node, dict):
        return
    yield pointer, node
    for key, value in node.items():
        if key in VALUE_KEYWORDS:
            continue
        where = f"{pointer}/{escape(key)}"
        if key in SCHEMA_MAPS and isinstance(value, dict):
            for name, child in value.items():
                yield from subschemas(child, f"{where}/{escape(name)}")
        elif isinstance(value, list):
            for i, child in enumerate(value):
                yield from subschemas(child, f"{where}/{i}")
        elif isinstance(value, dict):
            yield from subschemas(value, where)


class Refs:
    """Where every reference in the document `root` leads."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        base = root.get("$id", root.get("id"))
        self.base = urldefrag(base)[0] if isinstance(base, str) else ""
        anchors: dict[str, str | None] = {}
        refs: list[str] = []
        for pointer, node in subschemas(root):
            names = [node.get("$anchor")]
            names += [node.get(k) for k in ("$id", "id") if pointer]  # draft 4-7 "#name"
            for name in names:
                if isinstance(name, str) and name:
                    name = name[1:] if name.startswith("#") else name
                    # a name defined twice is ambiguous: it resolves nowhere
                    anchors[name] = None if name in anchors else pointer
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
        self._anchors = anchors
        self.targets: set[str] = set()  # the pointers references reach
        self.complete = True  # every reference reaches a node of this document
        for ref in refs:
            found = self.resolve(ref)
            if found is None:
                self.complete = False
            else:
                self.targets.add(found[0])

    def resolve(self, ref: Any) -> tuple[str, Any] | None:
        """(pointer, subschema) that `ref` reaches in this document; None if it reaches
        outside it or nowhere."""
        if not isinstance(ref, str):
            return None
        url, fragment = urldefrag(urljoin(self.base, ref) if self.base else ref)
        if url and url != self.base:
            return None  # another document
        fragment = unquote(fragment)
        if not fragment.startswith("/") and fragment:
            pointer = self._anchors.get(fragment)
            return None if pointer is None else (pointer, self.at(pointer))
        node: Any = self.root
        parts: list[str] = []
        for part in fragment.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
            parts.append(escape(part))
        return "".join(f"/{p}" for p in parts), node

    def at(self, pointer: str) -> Any:
        """The node at a pointer this class produced."""
        node: Any = self.root
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def reached_below(self, pointer: str) -> bool:
        """Whether a reference reaches `pointer` or anything inside it."""
        return any(t == pointer or t.startswith(pointer + "/") for t in self.targets)
