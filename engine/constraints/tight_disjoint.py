"""Whether two JSON schemas share no instance: the proof the tight rewrite needs before it
reads a `oneOf` as the equivalent `anyOf` (exact in llguidance), and never narrows the
branches of an overlapping `oneOf` (making one branch fail can make the `oneOf` pass).

The proof covers common cases only (different types, consts or enums, a key one object
requires that the other forbids or gives a disjoint value); "don't know" is False.

Where branches overlap, `made_disjoint` narrows each to the values no other branch
accepts (a branch and the negation of every branch it may share a value with, see
tight_negation.py): an instance of such a branch matches exactly one original branch, so
the `oneOf` becomes an `anyOf` that llguidance enforces exactly.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from engine.constraints.tight_negation import negate
from engine.constraints.tight_refs import Refs

# Keywords that describe without constraining.
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
    | {"writeOnly", "$schema", "$id", "id", "format", "markdownDescription", "errorMessage"}
)


def pairwise_disjoint(branches: Any, refs: Refs) -> bool:
    """Whether no instance can match two of `branches` (False when it cannot tell)."""
    if not isinstance(branches, list):
        return False
    return all(disjoint(a, b, refs) for i, a in enumerate(branches) for b in branches[i + 1 :])


def made_disjoint(branches: list[Any], refs: Refs) -> tuple[list[Any], bool] | None:
    """`branches` of a `oneOf`, each narrowed to the values that match it and no other
    (every instance of one result matches exactly one of `branches`), and whether that
    narrowing is exact; None where a branch that may overlap cannot be negated."""
    negations = []
    finite = [_finite(b, refs) for b in branches]
    for i, branch in enumerate(branches):
        overlaps = any(not disjoint(branch, b, refs) for j, b in enumerate(branches) if j != i)
        negations.append(negate(branch, refs) if overlaps else None)
        if overlaps and negations[-1] is None:
            return None
    out: list[Any] = []
    for i, branch in enumerate(branches):
        values = finite[i]
        if values is not None:  # listed values: keep those no other branch accepts
            others = [_checker(b, refs) for j, b in enumerate(branches) if j != i]
            kept = [v for v in values if not any(accepts(v) for accepts in others)]
            out.append({"enum": kept} if kept else False)
            continue
        parts = [copy.deepcopy(branch)]
        for j, other in enumerate(branches):
            found = negations[j]
            if j != i and found is not None and not disjoint(branch, other, refs):
                parts.append(copy.deepcopy(found.schema))
        out.append(parts[0] if len(parts) == 1 else {"allOf": parts})
    return out, all(n is None or n.exact for n in negations)


def _finite(branch: Any, refs: Refs) -> list[Any] | None:
    """The values `branch` accepts where it lists them (`enum`/`const`), checked."""
    branch = _deref(branch, refs)
    values = _values(branch) if isinstance(branch, dict) else None
    if values is None:
        return None
    accepts = _checker(branch, refs)
    return [v for v in values if accepts(v)]


def _checker(schema: Any, refs: Refs) -> Any:
    cls = jsonschema.validators.validator_for(refs.root, jsonschema.Draft202012Validator)
    return cls(refs.root).evolve(schema=schema).is_valid


def disjoint(a: Any, b: Any, refs: Refs | dict[str, Any], depth: int = 0) -> bool:
    """Whether schemas `a` and `b` (in the document `refs`, or its root) provably share no
    instance."""
    if not isinstance(refs, Refs):
        refs = Refs(refs)
    if depth > 4:
        return False
    a, b = _deref(a, refs), _deref(b, refs)
    if a is False or b is False:
        return True
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    ta, tb = types_of(a), types_of(b)
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
    return _objects_disjoint(a, b, refs, depth) or _objects_disjoint(b, a, refs, depth)


def _objects_disjoint(a: dict[str, Any], b: dict[str, Any], refs: Refs, d: int) -> bool:
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
        if key in a_props and key in b_props and disjoint(a_props[key], b_props[key], refs, d + 1):
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


def types_of(node: dict[str, Any]) -> set[str] | None:
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


def _deref(node: Any, refs: Refs) -> Any:
    for _ in range(8):
        if not isinstance(node, dict) or set(node) - _ANNOTATIONS != {"$ref"}:
            return node
        found = refs.resolve(node["$ref"])
        if found is None:
            return node
        node = found[1]
    return node
