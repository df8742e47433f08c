"""Key patterns llguidance can hold: `patternProperties` that meet in one object made
disjoint, for the tight rewrite.

llguidance merges an object's `allOf` members (and distributes them over an `anyOf` or
`oneOf` beside them) into one object, and refuses one whose `patternProperties` regexes
may both match a key ("patternProperty regexes /a/ and /b/ are not disjoint"). JSON
Schema checks a key against every pattern it matches, so the same constraint can be
written with disjoint patterns: for patterns `a` and `b`, keys matching `a` and not `b`
get `a`'s schema, keys matching `b` and not `a` get `b`'s, keys matching both get both
(each pattern made with greenery, tight_regex.py: `meet` with the complement). An `anyOf`
or `oneOf` beside the patterns gets them in each branch (`P and (Q or R)` is `(P and Q)
or (P and R)`; for `oneOf` likewise, since P holds for all or none). Every rewrite here
keeps the language exactly; where one cannot be shown exact (a pattern greenery does not
read, an `additionalProperties` whose meaning would change, a reference) nothing is done.
"""

from __future__ import annotations

import copy
from itertools import combinations
from typing import Any

from engine.constraints.tight_refs import subschemas
from engine.constraints.tight_regex import NOTHING, meet, overlap

__all__ = ["disjoint_key_patterns"]

_MAX_PATTERNS = 4  # patterns split at one object (2^n - 1 pieces)
_OWN_KEYS = ("additionalProperties", "unevaluatedProperties")


def disjoint_key_patterns(schema: Any) -> tuple[Any, list[str]]:
    """`schema` (not changed) with the `patternProperties` that meet in one object made
    disjoint, and what was done, in words."""
    if not isinstance(schema, dict):
        return schema, []
    out = copy.deepcopy(schema)
    notes: list[str] = []
    done: set[int] = set()
    changed = True
    while changed:  # patterns pushed into branches are split there on the next round
        changed = False
        for pointer, node in list(subschemas(out)):
            if id(node) in done:
                continue
            done.add(id(node))
            note = _split(node, pointer)
            if note:
                notes.append(note)
                changed = True
                done.clear()
                break
    return out, notes


def _members(node: dict[str, Any]) -> list[dict[str, Any]] | None:
    """`node` and the `allOf` members applying in place with it (recursively); None where
    a member is a reference or owns an `additionalProperties` (moving patterns in or out
    of it would change what it allows)."""
    found = [node]
    for member in found:
        if "$ref" in member and member is not node or any(k in member for k in _OWN_KEYS):
            return None
        for sub in member.get("allOf", []) if isinstance(member.get("allOf"), list) else []:
            if isinstance(sub, dict):
                found.append(sub)
    return found


def _patterns(members: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
    gathered: dict[str, list[Any]] = {}
    for member in members:
        own = member.get("patternProperties")
        if own is None:
            continue
        if not isinstance(own, dict):
            return None
        for pattern, sub in own.items():
            gathered.setdefault(pattern, []).append(sub)
    return gathered


def _split(node: dict[str, Any], pointer: str) -> str | None:
    members = _members(node)
    if members is None:
        return None
    gathered = _patterns(members)
    if not gathered:
        return None
    where = f"at {pointer}" if pointer else "at the top level"
    branching = [
        m[key]
        for m in members
        for key in ("anyOf", "oneOf")
        if isinstance(m.get(key), list) and any(_has_patterns(b) for b in m[key])
    ]
    if len(branching) == 1:
        # P and (Q or R): the patterns go into each branch, to be split there with its own
        for member in members:
            member.pop("patternProperties", None)
        own = {"patternProperties": gathered_schema(gathered)}
        branches = branching[0]
        branches[:] = [{"allOf": [branch, copy.deepcopy(own)]} for branch in branches]
        return f"the key patterns {where} moved into each branch beside them"
    if len(gathered) < 2 or len(gathered) > _MAX_PATTERNS:
        return None
    pieces = _disjoint(list(gathered))
    if pieces is None:
        return None
    if all(len(chosen) == 1 and piece == chosen[0] for piece, chosen in pieces):
        return None  # disjoint as written
    for member in members:
        member.pop("patternProperties", None)
    node["patternProperties"] = {
        piece: _all_of([s for p in chosen for s in gathered[p]]) for piece, chosen in pieces
    }
    return f"the key patterns {where} made disjoint"


def gathered_schema(gathered: dict[str, list[Any]]) -> dict[str, Any]:
    return {pattern: _all_of(subs) for pattern, subs in gathered.items()}


def _all_of(subs: list[Any]) -> Any:
    return copy.deepcopy(subs[0]) if len(subs) == 1 else {"allOf": copy.deepcopy(subs)}


def _has_patterns(branch: Any) -> bool:
    if not isinstance(branch, dict):
        return False
    members = _members(branch)
    return members is None or any("patternProperties" in m for m in members)


def _disjoint(patterns: list[str]) -> list[tuple[str, list[str]]] | None:
    """For every non-empty set of `patterns`, one pattern for the keys matching exactly
    those: (its pattern, the set), leaving out the sets no key can match; the patterns
    themselves where no two can match one key; None where greenery cannot tell."""
    if all(_apart(a, b) for a, b in combinations(patterns, 2)):
        return [(p, [p]) for p in patterns]
    pieces: list[tuple[str, list[str]]] = []
    for size in range(1, len(patterns) + 1):
        for chosen in combinations(patterns, size):
            others = [p for p in patterns if p not in chosen]
            found = meet(list(chosen), others, empty=True)
            if found is None or not found.exact:
                return None
            if found is not NOTHING:
                pieces.append((found.pattern, list(chosen)))
    return pieces


def _apart(a: str, b: str) -> bool:
    return overlap(a, b) is False
