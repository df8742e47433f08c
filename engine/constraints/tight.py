"""Tight defaults: a JSON-schema rewrite that only narrows what validates.

A schema often leaves more freedom than anyone wants used: an object that does not say
`additionalProperties` accepts any extra key, a bare integer any number of digits, `{}`
any value nested to any depth. Small models use that freedom to run on until the token
limit. `tighten` rewrites a schema before compilation so that the engine generates only
the tightest valid output. Two promises hold, and tests check both: every instance the
tight schema accepts, the schema as written accepts; and wherever the schema as written
has a valid instance, the tight one has one too.

- objects that declare their keys and say nothing about extra ones get
  `additionalProperties: false`, closed to the union of the keys declared by every
  subschema that applies to the same instance (its `allOf`/`anyOf`/`oneOf` branches,
  `if`/`then`/`else`, `dependentSchemas`, `dependencies`, `dependentRequired` and what its
  references reach); a subschema that shares its instance with others is never closed on
  its own, and an object one of them leaves open (patterns, a schema for extra keys) stays
  open;
- integers and numbers without bounds stay within I-JSON's interoperable range (RFC 7493:
  magnitude at most 2^53-1); numbers get at most `FRACTION_DIGITS` fraction digits and no
  exponent (llguidance reads `multipleOf: 1e-6` that way);
- free-form values (`{}`, `true`, an object without declared keys, an array without
  `items`) nest at most `FREE_DEPTH` levels;
- dependencies in every form are rewritten into `required`, `allOf` and `anyOf`, which
  llguidance enforces (tight_dependencies.py, through tight_enforce.py): the same
  language.

Narrowing a subschema narrows the whole only where the whole is monotone in it: never
under `not`, `if` or `contains`, or in the branches of a `oneOf` (making one branch fail
can make the `oneOf` pass) unless its branches are disjoint (tight_disjoint.py); such a
`oneOf` becomes the equivalent `anyOf`, which llguidance compiles exactly, unless a
reference points into it. A subschema is narrowed only if every way to reach it (its place
and every `$ref`, anchor or `$id` fragment naming it: tight_refs.py) allows it. Schemas
with a reference the rewrite cannot follow inside the document, keywords whose meaning
depends on what other subschemas evaluated (`unevaluatedProperties`, dynamic references)
or embedded resources (`$id` below the root) are left as they are.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from typing import Any

from engine.constraints.tight_disjoint import disjoint, pairwise_disjoint, types_of
from engine.constraints.tight_enforce import Emptied, enforce
from engine.constraints.tight_groups import Group, group_of
from engine.constraints.tight_keys import disjoint_key_patterns
from engine.constraints.tight_refs import Refs, escape
from engine.constraints.tight_witness import witness

__all__ = ["MAX_SAFE_INTEGER", "FRACTION_DIGITS", "FREE_DEPTH", "Tightened", "disjoint", "tighten"]

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
_ITEM_KEYWORDS = ("items", "prefixItems", "additionalItems")
_NUMBER_TYPES = frozenset({"integer", "number"})
# Keywords tight_enforce.py rewrites: a schema without them skips that pass.
_ENFORCEABLE = ("not", "oneOf", "contains", "dependencies", "dependentSchemas", "dependentRequired")
_ALL_TYPES = ["null", "boolean", "number", "string", "array", "object"]


@dataclass(frozen=True)
class Tightened:
    """A tightened schema and what the rewrite did, counted."""

    schema: Any
    closed_objects: int = 0
    bounded_numbers: int = 0
    bounded_free: int = 0
    exact_one_of: int = 0
    enforced: tuple[str, ...] = ()  # in words: what llguidance would ignore, now enforced
    unsatisfiable: str | None = None  # why no value can match the schema, where proven

    @property
    def changed(self) -> bool:
        return bool(
            self.closed_objects or self.bounded_numbers or self.bounded_free or self.enforced
        )

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
        return found + list(self.enforced)


@dataclass(frozen=True)
class _Context:
    frozen: bool = False  # narrowing here could widen the whole: leave it alone
    closable: bool = True  # the only subschema tracked at its instance: it may be narrowed
    group: Group | None = None  # its group, where closable


@dataclass
class _Counts:
    closed: int = 0
    numbers: int = 0
    free: int = 0
    one_of: int = 0
    used_free: set[int] = field(default_factory=set)


def tighten(schema: Any) -> Tightened:
    """The tight version of `schema` (a parsed JSON schema; not changed).

    Every instance valid under the result is valid under `schema`, and the result has a
    valid instance wherever `schema` has one.
    """
    if schema is True or schema == {}:
        schema = {}
    if not isinstance(schema, dict) or _has_untouchable(schema, top=True):
        return Tightened(copy.deepcopy(schema))
    refs = Refs(schema)
    if not refs.complete:  # what such a reference reaches is unknown: nothing is safe
        return Tightened(copy.deepcopy(schema))
    try:
        found, narrowed = _tighten(schema, refs, exact_only=False)
    except Emptied:
        found, narrowed = _tighten(schema, refs, exact_only=True)[0], False
    if narrowed and witness(found.schema, schema) is None:
        # a narrowing that could not be exact left no reply llguidance can produce that
        # the schema accepts: enforce only what is exact
        found = _tighten(schema, refs, exact_only=True)[0]
    return found


def _tighten(schema: dict[str, Any], refs: Refs, exact_only: bool) -> tuple[Tightened, bool]:
    """(the tight schema, whether a rewrite in it narrows what it could not enforce)."""
    original = schema
    contexts = _contexts(refs)
    notes: list[str] = []
    narrowed = False
    # a second pass reaches what the first one freed (a definition only an overlapping
    # `oneOf` or a `not` used, now used in place)
    text = json.dumps(schema)
    passes = 3 if any(f'"{k}"' in text for k in _ENFORCEABLE) else 0  # nothing to enforce
    for _ in range(passes):
        frozen = {p: c.frozen for p, c in contexts.items()}
        try:
            enforced = enforce(schema, refs, frozen, exact_only)
        except RecursionError:  # nested too deeply to walk again: leave it as it is
            break
        if enforced.unsatisfiable is not None:
            return Tightened(copy.deepcopy(original), unsatisfiable=enforced.unsatisfiable), False
        if not enforced.notes:
            break
        notes += enforced.notes
        narrowed = narrowed or enforced.narrowed
        schema, refs = enforced.schema, Refs(enforced.schema)
        if not isinstance(schema, dict) or not refs.complete:
            return Tightened(copy.deepcopy(original)), False
        contexts = _contexts(refs)
    if '"patternProperties"' in json.dumps(schema) and _patterns_refused(schema):
        # key patterns that meet in one object, as llguidance wants them: disjoint
        split, key_notes = disjoint_key_patterns(schema)
        if key_notes and isinstance(split, dict) and Refs(split).complete:
            schema, refs, notes = split, Refs(split), notes + key_notes
            contexts = _contexts(refs)
    counts = _Counts()
    if not set(schema) - ANNOTATIONS:  # any JSON value at all
        counts.free += 1
        out = {**copy.deepcopy(schema), **_free_ref(FREE_DEPTH, counts)}
    else:
        out = _rewrite(schema, "", refs, contexts, counts)
    if counts.used_free:
        defs = out.setdefault("$defs", {})
        if not isinstance(defs, dict):
            return Tightened(copy.deepcopy(original)), False
        for level in range(max(counts.used_free) + 1):
            defs[FREE_DEF.format(level)] = _free_def(level)
    found = Tightened(
        out,
        counts.closed,
        counts.numbers,
        counts.free,
        counts.one_of,
        enforced=tuple(dict.fromkeys(notes)),
    )
    return found, narrowed


def _patterns_refused(schema: dict[str, Any]) -> bool:
    """Whether llguidance refuses `schema` for key patterns that may match one key (making
    them disjoint costs greenery up to seconds: only then is it done)."""
    from llguidance import LLMatcher

    try:
        grammar = LLMatcher.grammar_from_json_schema(schema, defaults={"lenient": True})
    except ValueError:
        return False
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    return bool(is_error) and any("are not disjoint" in m for m in messages)


# ---- pass 1: where narrowing is safe ----


def _contexts(refs: Refs) -> dict[str, _Context]:
    """The context of every subschema reachable from the root (by JSON pointer): frozen if
    any path to it is, closable only if every path to it allows it."""
    found: dict[str, _Context] = {}
    seen: set[tuple[str, bool, bool, Group | None]] = set()
    work: list[tuple[str, Any, bool, bool, Group | None]] = [("", refs.root, False, True, None)]
    while work:
        pointer, node, frozen, closable, inherited = work.pop()
        # a closable subschema heads its own group; an in-place one shares its head's
        group = group_of(node, refs) if closable and isinstance(node, dict) else inherited
        if (pointer, frozen, closable, group) in seen:
            continue
        seen.add((pointer, frozen, closable, group))
        before = found.get(pointer)
        if before is not None:
            closable = closable and before.closable
            frozen = frozen or before.frozen
        found[pointer] = _Context(frozen, closable, group if closable else None)
        if isinstance(node, dict):
            work.extend(_children(node, pointer, frozen, closable, group, refs))
    return found


def _children(
    node: dict[str, Any],
    pointer: str,
    frozen: bool,
    closable: bool,
    group: Group | None,
    refs: Refs,
) -> list[tuple[str, Any, bool, bool, Group | None]]:
    """The subschemas directly below `node`, each with its context."""
    found: list[tuple[str, Any, bool, bool, Group | None]] = []

    def in_place(where: str, child: Any, child_frozen: bool = frozen) -> None:
        found.append((where, child, child_frozen, False, group))

    def new_instance(where: str, child: Any, alone: bool) -> None:
        found.append((where, child, frozen, alone and group is not None, None))

    # subschemas applying to the same instance: never narrowed on their own
    for key in ("allOf", "anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            branch_frozen = frozen or key == "oneOf" and not pairwise_disjoint(branches, refs)
            for i, child in enumerate(branches):
                in_place(f"{pointer}/{key}/{i}", child, branch_frozen)
    for key in ("then", "else"):
        if key in node:
            in_place(f"{pointer}/{key}", node[key])
    for key in ("dependentSchemas", "dependencies"):
        value = node.get(key)
        if isinstance(value, dict):
            for name, child in value.items():
                if isinstance(child, dict | bool):
                    in_place(f"{pointer}/{key}/{escape(name)}", child)
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = refs.resolve(ref)
        if target is not None:
            if closable and not set(node) - ANNOTATIONS - {"$ref"}:
                found.append((target[0], target[1], frozen, True, None))  # it heads the group
            else:
                in_place(*target)
    for key in _FROZEN_KEYWORDS:
        if key in node:
            found.append((f"{pointer}/{key}", node[key], True, False, None))
    # subschemas of another instance: alone there unless another subschema of the group
    # reaches the same value
    g = group
    own_catchall = int(isinstance(node.get("additionalProperties"), dict))
    properties = node.get("properties")
    if isinstance(properties, dict):
        for name, child in properties.items():
            alone = g is not None and not g.patterns and name not in g.shared
            alone = alone and g is not None and g.catchall == own_catchall
            new_instance(f"{pointer}/properties/{escape(name)}", child, alone)
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict):
        for name, child in patterns.items():
            alone = g is not None and g.patterns == 1 and not g.declarers
            alone = alone and g is not None and g.catchall == own_catchall
            new_instance(f"{pointer}/patternProperties/{escape(name)}", child, alone)
    if "additionalProperties" in node:
        own_declares = int(isinstance(properties, dict) and bool(properties))
        alone = g is not None and not g.patterns and g.catchall == own_catchall
        alone = alone and g is not None and g.declarers == own_declares
        new_instance(f"{pointer}/additionalProperties", node["additionalProperties"], alone)
    if "propertyNames" in node:
        new_instance(f"{pointer}/propertyNames", node["propertyNames"], True)
    for key in _ITEM_KEYWORDS:
        value = node.get(key)
        alone = g is not None and g.items == 1
        if isinstance(value, list):
            for i, child in enumerate(value):
                new_instance(f"{pointer}/{key}/{i}", child, alone)
        elif value is not None:
            new_instance(f"{pointer}/{key}", value, alone)
    return found


# ---- pass 2: the rewrite ----


def _rewrite(
    node: Any, pointer: str, refs: Refs, contexts: dict[str, _Context], counts: _Counts
) -> Any:
    ctx = contexts.get(pointer)
    safe = ctx is not None and not ctx.frozen
    head = ctx is not None and safe and ctx.closable and bool(pointer)
    if not isinstance(node, dict):
        if node is True and head:
            counts.free += 1
            return _free_ref(FREE_DEPTH, counts)
        return copy.deepcopy(node)
    if head and not (set(node) - ANNOTATIONS):
        counts.free += 1
        kept = {k: copy.deepcopy(v) for k, v in node.items() if k not in ("$id", "id")}
        return {**kept, **_free_ref(FREE_DEPTH, counts)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out[key] = _rewrite_keyword(key, value, pointer, refs, contexts, counts)
    if not safe or "$ref" in node or "enum" in node or "const" in node:
        return out
    # equivalent rewrites: the same language, which llguidance enforces better
    disjoint_one_of = "oneOf" in out and "anyOf" not in out
    if disjoint_one_of and pairwise_disjoint(node["oneOf"], refs):
        if not refs.reached_below(f"{pointer}/oneOf"):  # a reference into it would break
            out["anyOf"] = out.pop("oneOf")
            counts.one_of += 1
    assert ctx is not None
    group = ctx.group
    if not ctx.closable or group is None:
        return out
    types = types_of(node)
    if _close(node, out, group, counts):
        counts.closed += 1
    if types is not None and types & _NUMBER_TYPES and not group.numeric:
        if _bound_number(node, out, types):
            counts.numbers += 1
    if _bound_free_containers(node, out, types, group, counts):
        counts.free += 1
    return out


def _rewrite_keyword(
    key: str,
    value: Any,
    pointer: str,
    refs: Refs,
    contexts: dict[str, _Context],
    counts: _Counts,
) -> Any:
    if key in _MAP_KEYWORDS or key in ("$defs", "definitions", "dependencies"):
        if not isinstance(value, dict):
            return copy.deepcopy(value)
        return {
            name: _rewrite(child, f"{pointer}/{key}/{escape(name)}", refs, contexts, counts)
            if isinstance(child, dict | bool)
            else copy.deepcopy(child)
            for name, child in value.items()
        }
    if key in ("items", "prefixItems", "allOf", "anyOf", "oneOf") and isinstance(value, list):
        return [
            _rewrite(child, f"{pointer}/{key}/{i}", refs, contexts, counts)
            for i, child in enumerate(value)
        ]
    if key in _ONE_KEYWORDS or key in _FROZEN_KEYWORDS or key == "items":
        return _rewrite(value, f"{pointer}/{key}", refs, contexts, counts)
    return copy.deepcopy(value)


def _close(node: dict[str, Any], out: dict[str, Any], group: Group, counts: _Counts) -> bool:
    """Limit `out` to the keys its group declares if no subschema of the group says
    anything about extra keys."""
    if {"additionalProperties", "propertyNames"} & set(node) or group.open:
        return False
    types = types_of(node)
    if types is not None and "object" not in types:
        return False
    if not group.keys:
        return False  # a free-form object: its values get a bounded depth instead
    if group.min_properties > len(group.keys):
        return False
    properties = out.get("properties")
    if properties is None:
        properties = out["properties"] = {}
    if not isinstance(properties, dict):
        return False
    for name in sorted(group.keys - set(properties)):
        # a key another subschema describes stays as it describes it; a key only named
        # (required, a dependency) takes any value of bounded depth
        properties[name] = {} if name in group.typed else _free_ref(FREE_DEPTH, counts)
    out["additionalProperties"] = False
    return True


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
    node: dict[str, Any],
    out: dict[str, Any],
    types: set[str] | None,
    group: Group,
    counts: _Counts,
) -> bool:
    """Give the values of an object without declared keys, and the items of an array
    without `items`, a bounded depth (where no other subschema applies to them)."""
    if types is None or group.size != 1:
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
