"""The subschemas that apply to one instance together, and what they say about it.

A subschema applies to the same instance as its `allOf`/`anyOf`/`oneOf` branches, its
`if`/`then`/`else`, its `dependentSchemas` and `dependencies`, and what its `$ref` reaches.
The tight rewrite (tight.py) narrows one of them only as the head of such a group and only
with what the whole group allows: an object is closed to the keys any member names, a
value below is narrowed only where no other member describes it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.constraints.tight_refs import Refs

ITEM_KEYWORDS = ("items", "prefixItems", "additionalItems")
NUMERIC_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


@dataclass(frozen=True)
class Group:
    """What the subschemas applying to one instance (a subschema and, through in-place
    applicators and references, every subschema applying beside it) say about it."""

    size: int  # how many subschemas
    keys: frozenset[str]  # keys any of them lists (properties, required, dependencies)
    typed: frozenset[str]  # keys any of them gives a schema in `properties`
    shared: frozenset[str]  # keys more than one of them gives a schema
    open: bool  # one of them allows keys it does not list
    catchall: int  # how many give extra keys' values a schema (`additionalProperties`)
    patterns: int  # how many `patternProperties` entries they have together
    declarers: int  # how many have `properties`
    items: int  # how many constrain array items (`items`, `prefixItems`, `contains`)
    numeric: int  # how many bound numbers, besides the first
    min_properties: int


def group_of(node: dict[str, Any], refs: Refs) -> Group:
    """The group `node` heads: itself and every subschema applying to the same instance."""
    members: list[dict[str, Any]] = []
    seen: set[int] = set()
    stack: list[Any] = [node]
    while stack:
        member = stack.pop()
        if not isinstance(member, dict) or id(member) in seen:
            continue
        seen.add(id(member))
        members.append(member)
        for key in ("allOf", "anyOf", "oneOf"):
            if isinstance(member.get(key), list):
                stack.extend(member[key])
        stack.extend(member[key] for key in ("if", "then", "else") if key in member)
        for key in ("dependentSchemas", "dependencies"):
            if isinstance(member.get(key), dict):
                stack.extend(member[key].values())
        target = refs.resolve(member.get("$ref"))
        if target is not None:
            stack.append(target[1])
    keys: set[str] = set()
    typed: dict[str, int] = {}
    open_keys = False
    catchall = patterns = declarers = items = numeric = min_properties = 0
    for i, member in enumerate(members):
        properties = member.get("properties")
        if isinstance(properties, dict) and properties:
            declarers += 1
            for name, value in properties.items():
                if value is not False:  # a key a subschema only forbids is not declared
                    typed[name] = typed.get(name, 0) + 1
        keys |= _listed_keys(member)
        extra = member.get("additionalProperties", False)
        open_keys = open_keys or extra is not False or bool(member.get("patternProperties"))
        open_keys = open_keys or "enum" in member or "const" in member  # values it lists
        catchall += isinstance(extra, dict)
        if isinstance(member.get("patternProperties"), dict):
            patterns += len(member["patternProperties"])
        items += any(k in member for k in ITEM_KEYWORDS) + ("contains" in member)
        numeric += bool(i) and any(k in member for k in NUMERIC_KEYWORDS)
        if isinstance(member.get("minProperties"), int):
            min_properties = max(min_properties, member["minProperties"])
    return Group(
        size=len(members),
        keys=frozenset(keys),
        typed=frozenset(typed),
        shared=frozenset(k for k, n in typed.items() if n > 1),
        open=open_keys,
        catchall=catchall,
        patterns=patterns,
        declarers=declarers,
        items=items,
        numeric=numeric,
        min_properties=min_properties,
    )


def _listed_keys(node: dict[str, Any]) -> set[str]:
    """Keys `node` names: properties, required keys, and both sides of its dependencies."""
    keys: set[str] = set()
    for key in ("properties", "dependentSchemas", "dependentRequired", "dependencies"):
        value = node.get(key)
        if isinstance(value, dict):
            keys |= {k for k, v in value.items() if not (key == "properties" and v is False)}
            for needed in value.values() if key != "properties" else ():
                if isinstance(needed, list):
                    keys |= {k for k in needed if isinstance(k, str)}
    required = node.get("required")
    if isinstance(required, list):
        keys |= {k for k in required if isinstance(k, str)}
    return keys
