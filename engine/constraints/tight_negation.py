"""Negation for the tight rewrite: a schema llguidance can enforce that accepts only values a
given schema rejects.

llguidance ignores `not` (lenient mode), so a reply can match what the user excluded.
`negate(x)` builds a schema `n` with no `not` at its top whose every instance `x` rejects:
`n` is a subset of the complement of `x`, and `Negation.exact` says when it is the whole
complement. `{"not": x}` can then be enforced as `n`: a narrowing when inexact, the same
language when exact. Rules (each a set identity of JSON Schema; keywords constrain only
their own type, so "not an object" is part of every object keyword's complement):

- `type` T: the other types (`integer`'s complement loses the fractional numbers: inexact);
- `const`/`enum`: the other types, plus for numbers the open intervals between the
  excluded values, for booleans the other one, for strings a `pattern` that matches every
  string but the excluded ones (a regex without lookaround, which llguidance reads);
- `required` [k…]: one of the keys absent (`properties: {k: false}`);
- `minimum`… `maxLength`… `minItems`… `minProperties`…: the opposite bound;
- `properties` {k: s}: `k` present with a value `s` rejects; `patternProperties` {p: s}:
  a key matching `p` (a witness string) with such a value; `propertyNames` p: a key `p`
  rejects (a witness string, checked);
- `items` s (draft 2020-12): the first or the second item fails `s`; `contains` c:
  arrays whose items all fail `c`; `dependencies`/`dependentRequired`: the
  trigger present and a needed key absent (or its schema failed);
- `pattern` q: a string q finds no match in (tight_regex.py);
- `anyOf`: every branch negated (De Morgan); `allOf` and a schema of several keywords:
  any one of them negated; `not` s: `s` itself; `$ref`: its target negated.

A schema that copies an anchor or an `$id` is not copied (a second copy would make the
name ambiguous); what cannot be negated gives None.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from engine.constraints.tight_refs import Refs, subschemas
from engine.constraints.tight_regex import meet

__all__ = ["ALL_TYPES", "Negation", "inactive", "negate", "string_witnesses", "string_complement"]

ALL_TYPES = ("null", "boolean", "number", "string", "array", "object")
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
    | {"writeOnly", "$schema", "markdownDescription", "errorMessage", "comment"}
)
_ANCHORS = ("$anchor", "$id", "id", "$dynamicAnchor")
# Bounds and their opposites (the complement of `minimum: m` among numbers is `< m`).
_OPPOSITE = {
    "minimum": ("number", "exclusiveMaximum", 0),
    "maximum": ("number", "exclusiveMinimum", 0),
    "exclusiveMinimum": ("number", "maximum", 0),
    "exclusiveMaximum": ("number", "minimum", 0),
    "minLength": ("string", "maxLength", -1),
    "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1),
    "maxItems": ("array", "minItems", 1),
    "minProperties": ("object", "maxProperties", -1),
    "maxProperties": ("object", "minProperties", 1),
}
_MAX_DEPTH = 8
_MAX_STRINGS = 32  # excluded strings a complement pattern may spell out
_MAX_KEYS = 6  # keys tried as the extra key that `additionalProperties` rejects


@dataclass(frozen=True)
class Negation:
    """A schema whose instances the negated schema rejects; `exact` if it holds all of them."""

    schema: Any
    exact: bool


def negate(node: Any, refs: Refs, depth: int = 0) -> Negation | None:
    """A schema for values `node` (a subschema of `refs.root`) rejects; None if unknown."""
    if depth > _MAX_DEPTH:
        return None
    if node is True:
        return Negation(False, True)
    if node is False:
        return Negation({}, True)
    if not isinstance(node, dict) or _has_anchor(node):
        return None
    keys = set(node) - _ANNOTATIONS - inactive(refs.root)
    if not keys:
        return Negation(False, True)
    units = _units(node, keys)
    parts: list[Negation] = []
    missing = False
    for unit in units:
        found = _negate_unit(unit, node, refs, depth)
        if found is None:
            missing = True
        elif found.schema is not False:
            parts.append(found)
        elif not found.exact:
            missing = True
    if not parts:
        return Negation(False, True) if not missing else None
    exact = not missing and all(p.exact for p in parts)
    return Negation(_any_of([p.schema for p in parts]), exact)


def _units(node: dict[str, Any], keys: set[str]) -> list[tuple[str, ...]]:
    """Keywords grouped so that the schema is the conjunction of its groups."""
    groups: list[tuple[str, ...]] = []
    for group in (
        ("properties", "patternProperties", "additionalProperties"),
        ("items", "prefixItems", "additionalItems"),
        ("if", "then", "else"),
        ("contains", "minContains", "maxContains"),
    ):
        found = tuple(k for k in group if k in keys)
        if found:
            groups.append(found)
            keys = keys - set(group)
    return groups + [(k,) for k in sorted(keys)]


def _negate_unit(
    unit: tuple[str, ...], node: dict[str, Any], refs: Refs, depth: int
) -> Negation | None:
    key = unit[0]
    value = node[key]
    if key == "type":
        return _negate_type(value)
    if key == "const":
        return _negate_values([value])
    if key == "enum":
        return _negate_values(value) if isinstance(value, list) else None
    if key == "required":
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            return None
        absent = [{"properties": {k: False}} for k in value]
        return Negation(_any_of(absent) if value else False, True)
    if key in _OPPOSITE:
        return _negate_bound(key, value)
    if key == "not":
        return None if _has_anchor(value) else Negation(copy.deepcopy(value), True)
    if key == "$ref":
        target = refs.resolve(value)
        return None if target is None else negate(target[1], refs, depth + 1)
    if key == "anyOf" and isinstance(value, list):
        found = [negate(branch, refs, depth + 1) for branch in value]
        if any(f is None for f in found):
            return None
        return Negation(_all_of([f.schema for f in found if f]), all(f and f.exact for f in found))
    if key == "allOf" and isinstance(value, list):
        return _either([negate(branch, refs, depth + 1) for branch in value])
    if key == "oneOf" and isinstance(value, list):  # none matches: part of the complement
        found = [negate(branch, refs, depth + 1) for branch in value]
        if any(f is None for f in found):
            return None
        return Negation(_all_of([f.schema for f in found if f]), False)
    if key == "properties":
        return _negate_object(unit, node, refs, depth)
    if unit == ("items",) and isinstance(value, dict | bool) and _is_2020(refs.root):
        inner = negate(value, refs, depth + 1)
        if inner is None or inner.schema is False:
            return inner
        # an item that fails: the first or the second (a `contains` narrowed to the first
        # item leaves the second free)
        parts = [
            {"type": "array", "prefixItems": [*([{}] * at), inner.schema], "minItems": at + 1}
            for at in (0, 1)
        ]
        return Negation(_any_of(parts), False)
    if key == "propertyNames":
        return _negate_names(value, refs)
    if key == "contains" and unit == ("contains",):
        inner = negate(value, refs, depth + 1)
        if inner is None:
            return None
        return Negation({"type": "array", "items": inner.schema}, inner.exact)
    if key in ("dependentRequired", "dependencies", "dependentSchemas"):
        return _negate_dependencies(value, refs, depth)
    if key in ("patternProperties", "additionalProperties"):
        return _negate_object(unit, node, refs, depth)
    if key == "pattern" and isinstance(value, str):
        regex = meet([], [value])
        if regex is None:
            return None
        # every other type satisfies `pattern`: only strings are left to fail it
        return Negation({"type": "string", "pattern": regex.pattern}, regex.exact)
    return None


def _negate_type(value: Any) -> Negation | None:
    types = {value} if isinstance(value, str) else value
    if not isinstance(types, list | set) or not all(t in (*ALL_TYPES, "integer") for t in types):
        return None
    number = "number" in types
    left = [t for t in ALL_TYPES if t not in types and not (t == "number" and "integer" in types)]
    exact = number or "integer" not in types  # the fractional numbers are lost otherwise
    return Negation({"type": left} if left else False, exact)


def _negate_values(values: list[Any]) -> Negation:
    """Every value but `values`."""
    by_type: dict[str, list[Any]] = {}
    for v in values:
        by_type.setdefault(json_type(v), []).append(v)
    parts: list[Any] = []
    exact = True
    free = [t for t in ALL_TYPES if t not in by_type]
    if free:
        parts.append({"type": free})
    for kind, excluded in by_type.items():
        if kind == "boolean":
            left = [b for b in (False, True) if b not in excluded]
            parts += [{"const": b} for b in left]
        elif kind == "number":
            points = sorted({float(v) for v in excluded})
            edges: list[tuple[float | None, float | None]] = [(None, points[0])]
            edges += list(zip(points, points[1:], strict=False)) + [(points[-1], None)]
            for low, high in edges:
                part: dict[str, Any] = {"type": "number"}
                if low is not None:
                    part["exclusiveMinimum"] = _plain(low)
                if high is not None:
                    part["exclusiveMaximum"] = _plain(high)
                parts.append(part)
        elif kind == "string":
            pattern = string_complement([v for v in excluded if isinstance(v, str)])
            if pattern is None:
                exact = False
            else:
                parts.append({"type": "string", "pattern": pattern})
        elif kind != "null":  # arrays and objects: all but the listed ones is not expressible
            exact = False
    return Negation(_any_of(parts) if parts else False, exact)


def _negate_bound(key: str, value: Any) -> Negation | None:
    kind, opposite, shift = _OPPOSITE[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if kind != "number":
        if not isinstance(value, int) or value + shift < 0:
            return Negation(False, True) if shift < 0 else None
        value = value + shift
    return Negation({"type": kind, opposite: value}, True)


def _negate_object(
    unit: tuple[str, ...], node: dict[str, Any], refs: Refs, depth: int
) -> Negation | None:
    """An object with a key whose value fails what `properties`/`patternProperties` say
    about it (additionalProperties: a key neither names, with such a value)."""
    properties = node.get("properties") or {}
    patterns = node.get("patternProperties") or {}
    if not isinstance(properties, dict) or not isinstance(patterns, dict):
        return None
    parts: list[Negation] = []
    for name, sub in properties.items():
        inner = negate(sub, refs, depth + 1)
        if inner is not None and inner.schema is not False:
            parts.append(_key_with(name, inner))
    for pattern, sub in patterns.items():
        inner = negate(sub, refs, depth + 1)
        names = string_witnesses(pattern) if inner is not None else []
        if inner is not None and inner.schema is not False and names:
            parts.append(Negation(_key_with(names[0], inner).schema, False))
    extra = node.get("additionalProperties")
    if "additionalProperties" in unit and extra is not None:
        inner = negate(extra, refs, depth + 1)
        if inner is not None and inner.schema is not False:
            for name in _free_keys(properties, patterns, refs.root):
                parts.append(Negation(_key_with(name, inner).schema, False))
    if not parts:
        return None
    exact = all(p.exact for p in parts) and not patterns and "additionalProperties" not in unit
    return Negation(_any_of([p.schema for p in parts]), exact)


def _key_with(name: str, value: Negation) -> Negation:
    schema = {"type": "object", "required": [name], "properties": {name: value.schema}}
    return Negation(schema, value.exact)


def _free_keys(properties: dict[str, Any], patterns: dict[str, Any], root: Any) -> list[str]:
    """Keys `additionalProperties` governs here: those other subschemas of the document
    declare first (a key another `oneOf` branch has), then a made-up one."""
    named: list[str] = []
    for _, sub in subschemas(root):
        if isinstance(sub.get("properties"), dict):
            named += [k for k in sub["properties"] if isinstance(k, str)]
    found = []
    for name in dict.fromkeys([*named, "x"]):
        if name not in properties and not any(_search(p, name) for p in patterns):
            found.append(name)
    return found[:_MAX_KEYS]


def _negate_names(names: Any, refs: Refs) -> Negation | None:
    """An object with one key `names` rejects (the first witness found)."""
    check = _checker(names, refs)
    for witness in _candidates(names):
        if not check(witness):
            return Negation({"type": "object", "required": [witness]}, False)
    return None


def _negate_dependencies(value: Any, refs: Refs, depth: int) -> Negation | None:
    if not isinstance(value, dict):
        return None
    parts: list[Negation] = []
    for trigger, needed in value.items():
        if isinstance(needed, list):
            for k in needed:
                if isinstance(k, str):
                    schema = {"type": "object", "required": [trigger], "properties": {k: False}}
                    parts.append(Negation(schema, True))
        else:
            inner = negate(needed, refs, depth + 1)
            if inner is None:
                return None
            if inner.schema is not False:
                present = {"type": "object", "required": [trigger]}
                parts.append(Negation(_all_of([present, inner.schema]), inner.exact))
    if not parts:
        return None
    return Negation(_any_of([p.schema for p in parts]), all(p.exact for p in parts))


def _either(found: list[Negation | None]) -> Negation | None:
    known = [f for f in found if f is not None and f.schema is not False]
    if not known:
        return None if any(f is None for f in found) else Negation(False, True)
    exact = all(f is not None and f.exact for f in found)
    return Negation(_any_of([f.schema for f in known]), exact)


def _any_of(parts: list[Any]) -> Any:
    parts = [p for p in parts if p is not False]
    if not parts:
        return False
    return parts[0] if len(parts) == 1 else {"anyOf": parts}


def _all_of(parts: list[Any]) -> Any:
    if any(p is False for p in parts):
        return False
    parts = [p for p in parts if p is not True and p != {}]
    if not parts:
        return {}
    return parts[0] if len(parts) == 1 else {"allOf": parts}


# ---- strings ----


def string_complement(excluded: list[str]) -> str | None:
    """A pattern matching every string except those in `excluded` (anchored, no
    lookaround); None where that is not safe to spell (a line break: `$` also matches
    before a final one)."""
    if not excluded or len(excluded) > _MAX_STRINGS or any("\n" in s for s in excluded):
        return None
    trie: dict[str, Any] = {}
    for s in excluded:
        node = trie
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = {}

    def other(node: dict[str, Any]) -> str:
        chars = [c for c in node if c]
        parts = [] if "" in node else [""]  # ending here is allowed unless excluded
        rest = "".join(_class_char(c) for c in sorted(chars))
        parts.append(f"[^{rest}][\\s\\S]*" if rest else "[\\s\\S]+")
        parts += [re.escape(c) + f"(?:{other(node[c])})" for c in sorted(chars)]
        return "|".join(parts)

    return f"^(?:{other(trie)})$"


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


def string_witnesses(pattern: str) -> list[str]:
    """Strings that `pattern` (searched, as JSON Schema does) matches: a few guesses, each
    checked."""
    found: list[str] = []
    guess = _regex_witness(pattern)
    for s in ([guess] if guess is not None else []) + ["a", "0", "x", "", "ab"]:
        if s not in found and _search(pattern, s):
            found.append(s)
    return found


def _regex_witness(pattern: str) -> str | None:
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern)
    except (ImportError, re.error, RecursionError):
        return None
    return _spell(list(parsed))


def _spell(items: list[Any]) -> str | None:
    out = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "ANY" or name == "NOT_LITERAL":
            out.append("a" if not (name == "NOT_LITERAL" and arg == ord("a")) else "b")
        elif name == "IN":
            first = _first_in(arg)
            if first is None:
                return None
            out.append(first)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _, sub = arg
            inner = _spell(list(sub))
            if inner is None:
                return None
            out.append(inner * low)
        elif name == "SUBPATTERN":
            inner = _spell(list(arg[-1]))
            if inner is None:
                return None
            out.append(inner)
        elif name == "BRANCH":
            inner = _spell(list(arg[1][0]))
            if inner is None:
                return None
            out.append(inner)
        elif name == "AT":
            continue
        else:
            return None
    return "".join(out)


def _first_in(items: list[Any]) -> str | None:
    if items and str(items[0][0]) == "NEGATE":
        return None
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " "}.get(
                str(arg)
            )
    return None


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _candidates(schema: Any) -> list[str]:
    """Strings worth trying as a witness for or against `schema`: those it names, and
    witnesses of the patterns it names."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("const", "enum"):
                    values = value if key == "enum" and isinstance(value, list) else [value]
                    found.extend(v for v in values if isinstance(v, str))
                elif key == "pattern" and isinstance(value, str):
                    found.extend(string_witnesses(value))
                else:
                    walk(value)

    walk(schema)
    return list(dict.fromkeys([*found, "a", "x", "0", "key"]))


def _checker(schema: Any, refs: Refs) -> Any:
    """`value -> bool`: whether `schema` (inside `refs.root`) accepts value, as jsonschema
    decides it."""
    cls = jsonschema.validators.validator_for(refs.root, jsonschema.Draft202012Validator)
    validator = cls(refs.root).evolve(schema=schema)
    return validator.is_valid


def inactive(root: Any) -> frozenset[str]:
    """Keywords the draft of `root` does not define (a validator ignores them): drafts 4-7
    have `dependencies`, 2019-09 on `dependentRequired` and `dependentSchemas` instead."""
    draft = root.get("$schema") if isinstance(root, dict) else None
    old = isinstance(draft, str) and any(f"draft-0{n}" in draft for n in (3, 4, 6, 7))
    if old:
        return frozenset({"dependentRequired", "dependentSchemas", "prefixItems"})
    return frozenset({"dependencies"})


def _is_2020(root: Any) -> bool:
    """Whether `root` is read as draft 2020-12 (it says so, or names no draft)."""
    draft = root.get("$schema") if isinstance(root, dict) else None
    return draft is None or (isinstance(draft, str) and "2020-12" in draft)


def json_type(value: Any) -> str:
    """The JSON Schema type name of a JSON value (integers count as numbers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _plain(value: float) -> int | float:
    return int(value) if value.is_integer() else value


def _has_anchor(node: Any, in_map: bool = False) -> bool:
    """Whether `node` names an anchor or `$id` (keys of a map of subschemas are names)."""
    if isinstance(node, list):
        return any(_has_anchor(n) for n in node)
    if not isinstance(node, dict):
        return False
    if in_map:
        return any(_has_anchor(v) for v in node.values())
    if any(k in node for k in _ANCHORS):
        return True
    return any(
        _has_anchor(v, k in ("properties", "patternProperties", "$defs", "definitions"))
        for k, v in node.items()
        if k not in ("enum", "const", "default", "examples")
    )
