"""Tight defaults: a JSON-schema rewrite that only narrows what validates.

A schema often leaves more freedom than anyone wants used: an object that does not say
`additionalProperties` accepts any extra key, a bare integer any number of digits, `{}`
any value nested to any depth. Small models use that freedom to run on until the token
limit. `tighten` rewrites a schema before compilation so that the engine generates only
the tightest valid output, and every output still validates against the schema as written:

- objects that declare their keys and say nothing about extra ones get
  `additionalProperties: false` (keys a subschema requires or declares are kept);
- integers and numbers without bounds stay within I-JSON's interoperable range (RFC 7493:
  magnitude at most 2^53-1); numbers get at most `FRACTION_DIGITS` fraction digits and no
  exponent (llguidance reads `multipleOf: 1e-6` that way);
- free-form values (`{}`, `true`, an object without declared keys, an array without
  `items`) nest at most `FREE_DEPTH` levels.

Narrowing a subschema narrows the whole only where the whole is monotone in it: never
under `not`, `if` or `contains`, or in the branches of a `oneOf` (making one branch fail
can make the `oneOf` pass) unless its branches are disjoint, which `disjoint` proves for
common cases (different types, consts, a required key the other branch forbids); such a
`oneOf` becomes the equivalent `anyOf`, which llguidance compiles exactly. A `$ref`
target is rewritten only if every reference to it allows it. Schemas using keywords whose
meaning depends on what other subschemas evaluated (`unevaluatedProperties`, dynamic
references) or embedded resources (`$id` below the root) are left as they are.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1
FRACTION_DIGITS = 6
FREE_DEPTH = 3
FREE_DEF = "corral_free_json_{}"

# Keywords that describe without constraining: a schema of only these accepts anything.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
        "id",
        "format",  # an annotation unless a validator asserts it; llguidance may enforce it
        "markdownDescription",
        "errorMessage",
    }
)
_UNTOUCHABLE = frozenset(
    {"unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"}
)
_MAP_KEYWORDS = ("properties", "patternProperties", "dependentSchemas")
_ONE_KEYWORDS = ("additionalProperties", "additionalItems", "propertyNames", "then", "else")
# Narrowing these narrows nothing or may widen the whole.
_FROZEN_KEYWORDS = ("not", "if", "contains")
_NUMBER_TYPES = frozenset({"integer", "number"})
_ALL_TYPES = ["null", "boolean", "number", "string", "array", "object"]


@dataclass(frozen=True)
class Tightened:
    """A tightened schema and what the rewrite did, counted."""

    schema: Any
    closed_objects: int = 0
    bounded_numbers: int = 0
    bounded_free: int = 0
    exact_one_of: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.closed_objects or self.bounded_numbers or self.bounded_free)

    def notes(self) -> list[str]:
        """What the tight defaults did, in words ("declared keys only" first)."""
        found = []
        if self.closed_objects:
            found.append("declared keys only")
        if self.bounded_numbers:
            found.append(
                f"numbers within ±(2^53−1), at most {FRACTION_DIGITS} decimals, no exponent"
            )
        if self.bounded_free:
            found.append(f"free-form values at most {FREE_DEPTH} levels deep")
        return found


@dataclass
class _Context:
    frozen: bool = False  # narrowing here could widen the whole: leave it alone
    closable: bool = True  # its keys may be limited to the declared ones


@dataclass
class _Counts:
    closed: int = 0
    numbers: int = 0
    free: int = 0
    one_of: int = 0
    used_free: set[int] = field(default_factory=set)


def tighten(schema: Any) -> Tightened:
    """The tight version of `schema` (a parsed JSON schema; not changed).

    Every instance valid under the result is valid under `schema`.
    """
    if schema is True or schema == {}:
        schema = {}
    if not isinstance(schema, dict) or _has_untouchable(schema, top=True):
        return Tightened(copy.deepcopy(schema))
    counts = _Counts()
    if not set(schema) - ANNOTATIONS:  # any JSON value at all
        counts.free += 1
        out = {**copy.deepcopy(schema), **_free_ref(FREE_DEPTH, counts)}
    else:
        out = _rewrite(schema, "", schema, _contexts(schema), counts)
    if counts.used_free:
        defs = out.setdefault("$defs", {})
        if not isinstance(defs, dict):
            return Tightened(copy.deepcopy(schema))
        for level in range(max(counts.used_free) + 1):
            defs[FREE_DEF.format(level)] = _free_def(level)
    return Tightened(out, counts.closed, counts.numbers, counts.free, counts.one_of)


# ---- pass 1: where narrowing is safe ----


def _contexts(root: dict[str, Any]) -> dict[str, _Context]:
    """The context of every subschema reachable from the root (by JSON pointer): frozen if
    any path to it is, closable only if every path to it allows it."""
    found: dict[str, _Context] = {}
    work: list[tuple[str, Any, _Context]] = [("", root, _Context())]
    while work:
        pointer, node, ctx = work.pop()
        seen = found.get(pointer)
        if seen is not None:
            merged = _Context(seen.frozen or ctx.frozen, seen.closable and ctx.closable)
            if merged == seen:
                continue
            ctx = found[pointer] = merged
        else:
            found[pointer] = ctx
        if not isinstance(node, dict):
            continue
        keyed = bool(_own_keys(node))
        for child_pointer, child, child_ctx in _children(node, pointer, ctx, keyed, root):
            work.append((child_pointer, child, child_ctx))
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _resolve(root, ref)
            if target is not None:
                alone = not (set(node) - ANNOTATIONS - {"$ref"})
                ref_ctx = _Context(ctx.frozen, ctx.closable and alone)
                work.append((ref[1:], target[1], ref_ctx))
    return found


def _children(
    node: dict[str, Any], pointer: str, ctx: _Context, keyed: bool, root: dict[str, Any]
) -> Iterator[tuple[str, Any, _Context]]:
    frozen = ctx.frozen
    for key in _MAP_KEYWORDS:
        value = node.get(key)
        if isinstance(value, dict):
            for name, child in value.items():
                yield f"{pointer}/{key}/{_escape(name)}", child, _Context(frozen)
    dependencies = node.get("dependencies")
    if isinstance(dependencies, dict):
        for name, child in dependencies.items():
            if isinstance(child, dict | bool):
                yield f"{pointer}/dependencies/{_escape(name)}", child, _Context(frozen)
    for key in _ONE_KEYWORDS:
        if key in node:
            yield f"{pointer}/{key}", node[key], _Context(frozen)
    items = node.get("items")
    if isinstance(items, list):
        for i, child in enumerate(items):
            yield f"{pointer}/items/{i}", child, _Context(frozen)
    elif items is not None:
        yield f"{pointer}/items", items, _Context(frozen)
    prefix = node.get("prefixItems")
    if isinstance(prefix, list):
        for i, child in enumerate(prefix):
            yield f"{pointer}/prefixItems/{i}", child, _Context(frozen)
    for key in _FROZEN_KEYWORDS:
        if key in node:
            yield f"{pointer}/{key}", node[key], _Context(True, False)
    # Branches are never closed on their own: keys declared beside them would be refused.
    for key in ("allOf", "anyOf", "oneOf"):
        branches = node.get(key)
        if not isinstance(branches, list):
            continue
        branch_frozen = frozen
        if key == "oneOf" and not _pairwise_disjoint(branches, root):
            branch_frozen = True
        closable = key != "allOf" and not keyed
        for i, child in enumerate(branches):
            yield f"{pointer}/{key}/{i}", child, _Context(branch_frozen, closable)


# ---- pass 2: the rewrite ----


def _rewrite(
    node: Any, pointer: str, root: dict[str, Any], contexts: dict[str, _Context], counts: _Counts
) -> Any:
    if not isinstance(node, dict):
        if node is True and _safe(contexts, pointer):
            counts.free += 1
            return _free_ref(FREE_DEPTH, counts)
        return copy.deepcopy(node)
    ctx = contexts.get(pointer)
    safe = ctx is not None and not ctx.frozen
    if safe and pointer and not (set(node) - ANNOTATIONS):
        counts.free += 1
        kept = {k: copy.deepcopy(v) for k, v in node.items() if k not in ("$id", "id")}
        return {**kept, **_free_ref(FREE_DEPTH, counts)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out[key] = _rewrite_keyword(key, value, pointer, root, contexts, counts)
    if not safe or "$ref" in node or "enum" in node or "const" in node:
        return out
    assert ctx is not None
    if "oneOf" in out and "anyOf" not in out and _pairwise_disjoint(node["oneOf"], root):
        out["anyOf"] = out.pop("oneOf")  # disjoint branches: the same language, compiled exactly
        counts.one_of += 1
    types = _types(node)
    if ctx.closable and _close(node, out, counts):
        counts.closed += 1
    if types is not None and types & _NUMBER_TYPES and _bound_number(node, out, types):
        counts.numbers += 1
    if _bound_free_containers(node, out, types, counts):
        counts.free += 1
    return out


def _rewrite_keyword(
    key: str,
    value: Any,
    pointer: str,
    root: dict[str, Any],
    contexts: dict[str, _Context],
    counts: _Counts,
) -> Any:
    if key in _MAP_KEYWORDS or key in ("$defs", "definitions", "dependencies"):
        if not isinstance(value, dict):
            return copy.deepcopy(value)
        return {
            name: _rewrite(child, f"{pointer}/{key}/{_escape(name)}", root, contexts, counts)
            if isinstance(child, dict | bool)
            else copy.deepcopy(child)
            for name, child in value.items()
        }
    if key in ("items", "prefixItems", "allOf", "anyOf", "oneOf") and isinstance(value, list):
        return [
            _rewrite(child, f"{pointer}/{key}/{i}", root, contexts, counts)
            for i, child in enumerate(value)
        ]
    if key in _ONE_KEYWORDS or key in _FROZEN_KEYWORDS or key == "items":
        if key == "additionalProperties" and value is True:
            # Extra keys stay allowed; their values get a bounded depth like any free value.
            return _rewrite(value, f"{pointer}/{key}", root, contexts, counts)
        return _rewrite(value, f"{pointer}/{key}", root, contexts, counts)
    return copy.deepcopy(value)


def _close(node: dict[str, Any], out: dict[str, Any], counts: _Counts) -> bool:
    """Limit `out` to its declared keys if `node` leaves extra keys unspecified."""
    blockers = {
        "additionalProperties",
        "patternProperties",
        "$ref",
        "dependentSchemas",
        "dependencies",
        "propertyNames",
    }
    if blockers & set(node):
        return False
    types = _types(node)
    if types is not None and "object" not in types:
        return False
    keys = _declared_keys(node, depth=0)
    if not keys:
        return False  # a free-form object: its values get a bounded depth instead
    min_properties = node.get("minProperties")
    if isinstance(min_properties, int) and min_properties > len(keys):
        return False
    properties = out.get("properties")
    if properties is None:
        properties = out["properties"] = {}
    if not isinstance(properties, dict):
        return False
    for name in sorted(keys - set(properties)):
        properties[name] = _free_ref(FREE_DEPTH, counts)  # declared elsewhere: kept open
    out["additionalProperties"] = False
    return True


def _declared_keys(node: dict[str, Any], depth: int) -> set[str] | None:
    """Keys `node` declares itself or in its applicators' branches; None if they cannot
    be listed (a pattern, a reference)."""
    if depth > 8:
        return None
    keys: set[str] = set()
    properties = node.get("properties")
    if isinstance(properties, dict):
        keys |= set(properties)
    required = node.get("required")
    if isinstance(required, list):
        keys |= {k for k in required if isinstance(k, str)}
    for key in ("allOf", "anyOf", "oneOf", "if", "then", "else"):
        value = node.get(key)
        branches = value if isinstance(value, list) else [value] if value is not None else []
        for branch in branches:
            if not isinstance(branch, dict):
                continue
            if {"$ref", "patternProperties", "dependentSchemas", "dependencies"} & set(branch):
                return None
            found = _declared_keys(branch, depth + 1)
            if found is None:
                return None
            keys |= found
    return keys


def _own_keys(node: dict[str, Any]) -> set[str]:
    found = _declared_keys(node, 0)
    return found if found is not None else {"?"}


def _bound_number(node: dict[str, Any], out: dict[str, Any], types: set[str]) -> bool:
    changed = False
    low = "minimum" in node or "exclusiveMinimum" in node
    high = "maximum" in node or "exclusiveMaximum" in node
    if not low:
        out["minimum"] = -MAX_SAFE_INTEGER
        changed = True
    if not high:
        out["maximum"] = MAX_SAFE_INTEGER
        changed = True
    if "number" in types and "multipleOf" not in node and _fraction_room(node):
        out["multipleOf"] = 10.0**-FRACTION_DIGITS
        changed = True
    return changed


def _fraction_room(node: dict[str, Any]) -> bool:
    """Whether limiting fraction digits leaves the bounds' range non-empty and roomy."""
    bounds = [
        node[k]
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        if isinstance(node.get(k), int | float) and not isinstance(node.get(k), bool)
    ]
    step = 10.0**-FRACTION_DIGITS
    for bound in bounds:
        if not math.isfinite(bound) or (bound and abs(bound) < step * 1000):
            return False
        if round(bound, FRACTION_DIGITS) != bound:
            return False
    low = [b for k in ("minimum", "exclusiveMinimum") if isinstance(b := node.get(k), int | float)]
    high = [b for k in ("maximum", "exclusiveMaximum") if isinstance(b := node.get(k), int | float)]
    return not (low and high and max(high) - min(low) < 1.0)


def _bound_free_containers(
    node: dict[str, Any], out: dict[str, Any], types: set[str] | None, counts: _Counts
) -> bool:
    """Give the values of an object without declared keys, and the items of an array
    without `items`, a bounded depth."""
    if types is None:
        return False
    changed = False
    if "object" in types and "additionalProperties" not in out:
        blockers = {"properties", "patternProperties", "required", "$ref", "propertyNames"}
        blockers |= {"allOf", "anyOf", "oneOf", "if", "then", "else"}
        blockers |= {"dependentSchemas", "dependencies"}
        if not blockers & set(node):
            out["additionalProperties"] = _free_ref(FREE_DEPTH - 1, counts)
            changed = True
    if "array" in types and "items" not in node and "prefixItems" not in node:
        if not {"contains", "$ref", "allOf", "anyOf", "oneOf", "if", "not"} & set(node):
            out["items"] = _free_ref(FREE_DEPTH - 1, counts)
            changed = True
    return changed


def _free_ref(level: int, counts: _Counts) -> dict[str, Any]:
    level = max(level, 0)
    counts.used_free.add(level)
    return {"$ref": f"#/$defs/{FREE_DEF.format(level)}"}


def _free_def(level: int) -> dict[str, Any]:
    """Any JSON value at most `level` containers deep, with tight numbers."""
    number = {
        "minimum": -MAX_SAFE_INTEGER,
        "maximum": MAX_SAFE_INTEGER,
        "multipleOf": 10.0**-FRACTION_DIGITS,
    }
    if level == 0:
        return {"type": ["null", "boolean", "number", "string"], **number}
    inner = {"$ref": f"#/$defs/{FREE_DEF.format(level - 1)}"}
    return {"type": list(_ALL_TYPES), **number, "items": inner, "additionalProperties": inner}


# ---- oneOf ----


def _pairwise_disjoint(branches: Any, root: dict[str, Any]) -> bool:
    """Whether no instance can match two of `branches` (a proof for common cases; False
    when it cannot tell)."""
    if not isinstance(branches, list):
        return False
    return all(disjoint(a, b, root) for i, a in enumerate(branches) for b in branches[i + 1 :])


def disjoint(a: Any, b: Any, root: dict[str, Any], depth: int = 0) -> bool:
    """Whether schemas `a` and `b` (in the document `root`) provably share no instance."""
    if depth > 4:
        return False
    a, b = _deref(a, root), _deref(b, root)
    if a is False or b is False:
        return True
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    ta, tb = _types(a), _types(b)
    common = _type_meet(ta, tb)
    if common is not None and not common:
        return True
    va, vb = _values(a), _values(b)
    if va is not None and vb is not None and not any(_same(x, y) for x in va for y in vb):
        return True
    if va is not None and tb is not None and not any(_json_type(x) & tb for x in va):
        return True
    if vb is not None and ta is not None and not any(_json_type(y) & ta for y in vb):
        return True
    if common is None or common != {"object"}:
        return False
    return _objects_disjoint(a, b, root, depth) or _objects_disjoint(b, a, root, depth)


def _objects_disjoint(a: dict[str, Any], b: dict[str, Any], root: dict[str, Any], d: int) -> bool:
    """Objects: a key `a` requires that `b` forbids, or a required key whose values
    cannot agree."""
    required = a.get("required")
    if not isinstance(required, list):
        return False
    b_props: dict[str, Any] = b.get("properties") or {}
    a_props: dict[str, Any] = a.get("properties") or {}
    if not isinstance(a_props, dict) or not isinstance(b_props, dict):
        return False
    b_closed = b.get("additionalProperties") is False and "patternProperties" not in b
    for key in required:
        if not isinstance(key, str):
            continue
        if key not in b_props and b_closed:
            return True
        if key in a_props and key in b_props and disjoint(a_props[key], b_props[key], root, d + 1):
            return True
    return False


def _type_meet(ta: set[str] | None, tb: set[str] | None) -> set[str] | None:
    if ta is None:
        return tb
    if tb is None:
        return ta
    meet = ta & tb
    if "number" in ta and "integer" in tb or "integer" in ta and "number" in tb:
        meet.add("integer")
    return meet


def _types(node: dict[str, Any]) -> set[str] | None:
    found = node.get("type")
    if isinstance(found, str):
        return {found}
    if isinstance(found, list) and all(isinstance(t, str) for t in found):
        return set(found)
    return None


def _values(node: dict[str, Any]) -> list[Any] | None:
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _json_type(value: Any) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int) or isinstance(value, float) and value.is_integer():
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    return {"array"} if isinstance(value, list) else {"object"}


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    return bool(x == y)


# ---- references ----


def _deref(node: Any, root: dict[str, Any]) -> Any:
    for _ in range(8):
        if not isinstance(node, dict) or set(node) - ANNOTATIONS != {"$ref"}:
            return node
        found = _resolve(root, node["$ref"])
        if found is None:
            return node
        node = found[1]
    return node


def _resolve(root: dict[str, Any], ref: Any) -> tuple[str, Any] | None:
    """(pointer, subschema) for a local reference "#/a/b" or "#"; None otherwise."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    if ref == "#":
        return "", root
    if not ref.startswith("#/"):
        return None  # an anchor: not followed
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return ref[1:], node


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _safe(contexts: dict[str, _Context], pointer: str) -> bool:
    ctx = contexts.get(pointer)
    return ctx is not None and not ctx.frozen and bool(pointer)


def _has_untouchable(node: Any, top: bool = False) -> bool:
    """Whether `node` uses keywords whose meaning depends on other subschemas' results, or
    embeds resources that change how references resolve."""
    if isinstance(node, list):
        return any(_has_untouchable(n) for n in node)
    if not isinstance(node, dict):
        return False
    if _UNTOUCHABLE & set(node):
        return True
    for key in ("$id", "id"):  # draft 4 spells it "id"
        embedded = node.get(key)
        if not top and isinstance(embedded, str) and not embedded.startswith("#"):
            return True
    for key, value in node.items():
        if key in ("enum", "const", "default", "examples"):
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions"):
            if isinstance(value, dict) and any(_has_untouchable(v) for v in value.values()):
                return True
        elif _has_untouchable(value):
            return True
    return False
