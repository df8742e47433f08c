"""`from_schema` (hypothesis-jsonschema 0.23.1) working with the pinned Hypothesis.

hypothesis-jsonschema draws an object's keys with Hypothesis's internal `many()` helper
through its old interface (`while elements.more(): ... elements.reject()`); Hypothesis
6.170 replaced that interface with iteration inside a `with` block, so every object schema
fails with "'many' object has no attribute 'more'". `_Many` gives the generator the old
interface on top of the new one, unchanged in what it draws; where Hypothesis still has
`more()` nothing is replaced.

hypothesis-jsonschema also resolves references only where it starts: a reference inside
the siblings of another one reaches it unresolved and fails ("Unresolvable JSON pointer").
`inlined` hands it the schema with every reference replaced by what it reaches (resolved
by `referencing`, as jsonschema resolves them), so a generator failure is its own limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import referencing.jsonschema
from hypothesis.internal.conjecture import utils
from hypothesis_jsonschema import _from_schema, from_schema
from referencing import Registry

__all__ = ["from_schema", "inlined"]

_VALUES = frozenset({"enum", "const", "default", "examples"})
_OLD_DRAFTS = (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator)


def inlined(schema: Any, max_depth: int = 12) -> Any:
    """`schema` with every `$ref` replaced by the subschema it reaches (a sibling-bearing
    reference becomes an `allOf` member from draft 2019 on; drafts 4-7 ignore siblings).
    Raises RecursionError for references nested deeper than `max_depth` (recursion)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    old = issubclass(cls, _OLD_DRAFTS)
    dialect = cls.META_SCHEMA.get("$schema") or cls.META_SCHEMA.get("$id")
    spec = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT202012
    )
    root = Registry().resolver_with_root(spec.create_resource(schema))

    def walk(node: Any, resolver: Any, depth: int) -> Any:
        if isinstance(node, list):
            return [walk(n, resolver, depth) for n in node]
        if not isinstance(node, dict):
            return node
        out = {
            k: v if k in _VALUES else walk(v, resolver, depth)
            for k, v in node.items()
            if k not in ("$ref", "$defs", "definitions")
        }
        if not isinstance(node.get("$ref"), str):
            return out
        if depth >= max_depth:
            raise RecursionError(f"references nested deeper than {max_depth}")
        resolved = resolver.lookup(node["$ref"])
        target = walk(resolved.contents, resolved.resolver, depth + 1)
        if old or not out:
            return target
        return {**out, "allOf": [*out.get("allOf", []), target]}

    return walk(schema, root, 0)


_NEW_MANY = utils.many


class _Many:
    """`many(data, min_size, max_size, average_size)` with `more()` and `reject()`."""

    def __init__(self, data: Any, **sizes: Any) -> None:
        self._many = _NEW_MANY(data, **sizes)
        self._many.__enter__()
        self._elements: Iterator[None] = iter(self._many)

    def more(self) -> bool:
        try:
            next(self._elements)
        except StopIteration:
            self._many.__exit__(None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


class _Utils:
    """The `utils` module as hypothesis-jsonschema sees it, with the old `many`."""

    def __getattr__(self, name: str) -> Any:
        return _Many if name == "many" else getattr(utils, name)


if not hasattr(_NEW_MANY, "more"):
    _from_schema.cu = _Utils()  # type: ignore[attr-defined]
