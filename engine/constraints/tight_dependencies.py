"""Dependencies enforced: `dependentRequired`, `dependentSchemas` and draft 4-7's
`dependencies` (array and schema forms) rewritten into keywords llguidance enforces.

llguidance ignores every form of dependency in lenient mode, so a reply could hold a key
without what the key brings (`{"post_office_box": "x"}` without `street_address`). Each
rewrite here keeps the language exactly (no narrowing):

- a trigger the object requires: the keys it needs join `required` (transitively), a
  schema it brings joins `allOf`;
- a trigger whose schema is `false`: the key is absent (`properties: {k: false}`);
- any other trigger: one more `allOf` member, `anyOf` of "the key absent" and "the key
  present with what it brings" (`required: [k, needed…]`, or `required: [k]` beside the
  schema). An object that is not an object passes both, as the dependency lets it.

llguidance expands an `allOf` of `anyOf`s into every combination of branches (2^n for n
dependencies: ten of them is "schema too large"). So a dependency is rewritten only while
the combinations of the object's branches stay within `MAX_BRANCHES`; the rest stay as
written, and llguidance's warning with them.
"""

from __future__ import annotations

from typing import Any

from engine.constraints.tight_refs import Refs

__all__ = ["DEPENDENCY_KEYWORDS", "MAX_BRANCHES", "enforce_dependencies"]

DEPENDENCY_KEYWORDS = ("dependencies", "dependentSchemas", "dependentRequired")
MAX_BRANCHES = 32  # combinations of `anyOf` branches one object may reach (llguidance: ~1 ms)
_DEPTH = 6  # references followed when counting combinations


def enforce_dependencies(
    out: dict[str, Any], refs: Refs, skip: frozenset[str], where: str
) -> list[str]:
    """Rewrite the dependencies of `out` (a copy of one subschema, changed in place) as
    the module doc says; `skip`: the keywords its draft does not define; `where`: the
    subschema's place, in words. Returns what was done, in words."""
    notes: list[str] = []
    found = out.get("required")
    required: list[Any] = list(found) if isinstance(found, list) else []
    keywords = [k for k in DEPENDENCY_KEYWORDS if k not in skip and isinstance(out.get(k), dict)]
    if not keywords:
        return notes
    maps = {k: dict(out[k]) for k in keywords}  # changed below: not the schema as written
    members: list[Any] = list(out.get("allOf", [])) if isinstance(out.get("allOf"), list) else []
    # required triggers first, to a fixed point: what one brings may require another
    grown = True
    while grown:
        grown = False
        for keyword, deps in maps.items():
            for trigger in [t for t in deps if t in required]:
                brought = deps.pop(trigger)
                if isinstance(brought, list):
                    for needed in brought:
                        if isinstance(needed, str) and needed not in required:
                            required.append(needed)
                            notes.append(f'"{needed}" required: the required "{trigger}" needs it')
                            grown = True
                elif brought is not True and brought != {}:
                    members.append(brought)
                    notes.append(f'{keyword} of "{trigger}" {where} apply: "{trigger}" is required')
    combinations = _combinations({**out, "allOf": members}, refs, 0)
    for keyword, deps in maps.items():
        for trigger in list(deps):
            brought = deps[trigger]
            if brought is True or brought == {} or brought == []:
                continue  # brings nothing: left for llguidance to ignore harmlessly
            if brought is False:
                deps.pop(trigger)
                members.append({"properties": {trigger: False}})
                notes.append(f'"{trigger}" {where} can never appear ({keyword}: false)')
                continue
            present = _present(trigger, brought)
            if present is None or combinations * 2 > MAX_BRANCHES:
                continue  # left as written: llguidance warns that it ignores it
            combinations *= 2
            deps.pop(trigger)
            members.append({"anyOf": [{"properties": {trigger: False}}, present]})
            notes.append(
                f'{keyword} of "{trigger}" {where} enforced: "{trigger}" absent, or present '
                "with what it brings"
            )
    if not notes:
        return notes
    if required:
        out["required"] = required
    if members:
        out["allOf"] = members
    for keyword, deps in maps.items():
        if deps:
            out[keyword] = deps
        else:
            del out[keyword]
    return notes


def _present(trigger: str, brought: Any) -> dict[str, Any] | None:
    """The branch "`trigger` present, with what it brings"; None for a malformed entry."""
    if isinstance(brought, list):
        needed = [k for k in brought if isinstance(k, str)]
        if len(needed) != len(brought):
            return None
        return {"required": list(dict.fromkeys([trigger, *needed]))}
    if isinstance(brought, dict):
        return {"required": [trigger], "allOf": [brought]}
    return None


def _combinations(node: Any, refs: Refs, depth: int) -> int:
    """How many combinations of `anyOf`/`oneOf` branches `node` expands to in llguidance
    (an upper bound; references followed `_DEPTH` deep, beyond that counted as many)."""
    if not isinstance(node, dict):
        return 1
    if depth > _DEPTH:
        return MAX_BRANCHES + 1
    total = 1
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            total *= sum(_combinations(b, refs, depth + 1) for b in branches)
    members = node.get("allOf")
    if isinstance(members, list):
        for member in members:
            total *= _combinations(member, refs, depth + 1)
    if "$ref" in node:
        target = refs.resolve(node["$ref"])
        total *= _combinations(target[1], refs, depth + 1) if target is not None else 1
    return min(total, MAX_BRANCHES + 1)
