"""Enforce instead of warning: the part of the tight rewrite that turns keywords llguidance
ignores in lenient mode (`not`, an overlapping `oneOf`, `contains`, dependencies) into
ones it enforces, narrowing only.

Runs before the rest of tight.py, on the schema as written; everything the result accepts,
the schema accepts, and where the schema has a valid instance the result keeps one (every
rewrite is either exact or keeps a value the schema accepts; where neither can be shown
the keyword stays, and llguidance's warning with it):

- `not: x` becomes `x`'s negation (tight_negation.py) as one more `allOf` member; a
  string's `not: {pattern: q}` and its own `pattern` become one pattern (tight_regex.py);
- an overlapping `oneOf` becomes an `anyOf` of branches made disjoint (tight_disjoint.py);
- `contains: c` makes the first item match `c` (and the array non-empty);
- `dependencies`, `dependentSchemas` and `dependentRequired` in every form, for every
  key, required or not (tight_dependencies.py);
- a number schema with a `not` or `oneOf` inside lists the integers it accepts (checked
  with jsonschema) within its bounds, or within a window of them;
- a subschema these rewrites prove empty becomes `false`; a root proven empty makes
  `Enforced.unsatisfiable` say why (no reply could be valid).

Narrowing is done only where tight.py's first pass found it safe (not under a `not`, `if`
or an overlapping `oneOf`, not in a definition such a place references); exact rewrites
are done everywhere.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from engine.constraints.tight_dependencies import enforce_dependencies
from engine.constraints.tight_disjoint import made_disjoint, pairwise_disjoint, types_of
from engine.constraints.tight_negation import ALL_TYPES, inactive, json_type, negate
from engine.constraints.tight_refs import Refs, escape, subschemas
from engine.constraints.tight_regex import meet

__all__ = ["Emptied", "Enforced", "enforce"]

_MAP_KEYWORDS: tuple[str, ...] = ("properties", "patternProperties", "$defs", "definitions")
_MAP_KEYWORDS += ("dependentSchemas", "dependencies")
_ONE_KEYWORDS: tuple[str, ...] = ("additionalProperties", "additionalItems", "propertyNames")
_ONE_KEYWORDS += ("items", "contains", "if", "then", "else", "not")
_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_ANNOTATIONS = ("title", "description", "default", "examples", "$comment", "comment")
_WINDOW = 2000  # integers tried when listing a number schema's values
_MAX_LISTED = 256
_BUDGET = 64  # steps one emptiness check may take


@dataclass
class Enforced:
    """The schema with what could be enforced rewritten, and what was done, in words."""

    schema: Any
    notes: list[str] = field(default_factory=list)
    unsatisfiable: str | None = None
    narrowed: bool = False  # a rewrite narrows what it could not enforce exactly


def enforce(
    schema: dict[str, Any], refs: Refs, frozen: dict[str, bool], exact_only: bool = False
) -> Enforced:
    """Rewrite `schema` (the root of `refs`); `frozen` maps a subschema's pointer to
    whether narrowing it could widen the whole (tight.py's first pass); `exact_only`
    allows only rewrites that keep the language."""
    walk = _Walk(refs, frozen)
    out = walk.node(schema, "", exact_only)
    if walk.notes and isinstance(out, dict):
        _prune(out, Refs(out))
        _drop_unused_definitions(out)
    result = Enforced(out, list(dict.fromkeys(walk.notes)), narrowed=walk.narrowed)
    if out is False:
        if walk.narrowed:  # emptied by a narrowing, not proven empty as written
            raise Emptied
        result.unsatisfiable = walk.empty_reason or "no value can match it"
        result.schema = copy.deepcopy(schema)
    return result


class Emptied(Exception):
    """A narrowing left the schema no value: enforce only what is exact instead."""


def _prune(root: dict[str, Any], refs: Refs) -> None:
    """Drop the `anyOf` branches that cannot match beside the rest of their schema (the
    same language without them): llguidance gives up on some such branches ("unable to
    determine if regex is empty") where they are spelled out."""
    for _, node in list(subschemas(root)):
        branches = node.get("anyOf")
        if not isinstance(branches, list) or len(branches) < 2:
            continue
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        kept = [b for b in branches if _possible([rest, b], refs) != set()]
        if kept and len(kept) < len(branches):
            node["anyOf"] = kept


def _drop_unused_definitions(root: dict[str, Any]) -> None:
    """Remove the root's definitions no reference reaches any more (a `not` rewritten
    leaves the ones only it used): llguidance compiles, and warns about, every one."""
    maps = [k for k in ("$defs", "definitions") if isinstance(root.get(k), dict)]
    if not maps:
        return
    refs = Refs(root)
    reached: set[str] = set()
    body = {k: v for k, v in root.items() if k not in maps}
    work = [body]
    while work:
        node = work.pop()
        for _, sub in subschemas(node):
            target = refs.resolve(sub.get("$ref"))
            if target is None:
                continue
            head = "/".join(target[0].split("/")[:3])
            if head not in reached:
                reached.add(head)
                work.append(refs.at(head))
    for key in maps:
        for name in list(root[key]):
            if f"/{key}/{escape(name)}" not in reached:
                del root[key][name]


def _where(pointer: str | None) -> str:
    return f"at {pointer}" if pointer else "at the top level"


class _Walk:
    def __init__(self, refs: Refs, frozen: dict[str, bool]) -> None:
        self.refs = refs
        self.frozen = frozen
        self.notes: list[str] = []
        self.empty_reason: str | None = None
        self.narrowed = False
        self.changes = 0  # rewrites so far (a subschema found empty counts)

    def _note(self, text: str) -> None:
        self.notes.append(text)
        self.changes += 1

    def node(self, node: Any, pointer: str | None, exact_only: bool) -> Any:
        """`node` rewritten; `pointer` is None for subschemas the rewrite made."""
        found = self._node(node, pointer, exact_only)
        if found is False and node is not False:
            self.changes += 1  # proven empty: what holds it may be empty too
        return found

    def _node(self, node: Any, pointer: str | None, exact_only: bool) -> Any:
        if pointer is not None:
            exact_only = exact_only or self.frozen.get(pointer, True)
        if not isinstance(node, dict):
            return copy.deepcopy(node)
        changes, noted = self.changes, len(self.notes)
        out = dict(node)  # children are rebuilt below; a copy of each would cost n² deep
        self._dependencies(out, pointer)
        if "not" in out:
            self._not(out, pointer, exact_only)
        if "oneOf" in out and isinstance(out["oneOf"], list):
            if not self._one_of(out, pointer, exact_only):
                return False
        if "contains" in out and not exact_only:
            self._contains(out, pointer)
        if _hard(out, self.refs):  # what is left of `not`/`oneOf`: a number's values, listed
            listed = self._listed(node, pointer, exact_only)
            if listed is not None:
                del self.notes[noted:-1]
                return listed
        for key, value in list(out.items()):
            out[key] = self._keyword(key, value, node, pointer, exact_only)
        if self.changes == changes:
            return out  # as written below here: nothing new to prove empty
        if isinstance(out.get("anyOf"), list) and False in out["anyOf"]:
            out["anyOf"] = [b for b in out["anyOf"] if b is not False]  # the same language
            if not out["anyOf"]:
                return False
        if _possible([out], self.refs) == set() or _empty_object(out, self.refs):
            self.empty_reason = self.empty_reason or f"the schema {_where(pointer)} has no value"
            return False
        self._close_types(out)
        return out

    def _keyword(
        self, key: str, value: Any, original: dict[str, Any], pointer: str | None, exact: bool
    ) -> Any:
        same = key in original and original[key] == value  # still the schema as written
        where = f"{pointer}/{key}" if pointer is not None and same else None
        # narrowing under these could widen the whole
        exact = exact or key in ("not", "if")
        exact = exact or key == "oneOf" and not pairwise_disjoint(value, self.refs)
        if key in _MAP_KEYWORDS and isinstance(value, dict):
            return {
                name: self.node(child, f"{where}/{escape(name)}" if where else None, exact)
                if isinstance(child, dict | bool)
                else copy.deepcopy(child)
                for name, child in value.items()
            }
        if key in _LIST_KEYWORDS and isinstance(value, list):
            return [
                self.node(child, f"{where}/{i}" if where else None, exact)
                for i, child in enumerate(value)
            ]
        if key in _ONE_KEYWORDS:
            return self.node(value, where, exact)
        return copy.deepcopy(value)

    # ---- the rewrites ----

    def _not(self, out: dict[str, Any], pointer: str | None, exact_only: bool) -> None:
        if self._not_pattern(out, pointer, exact_only):
            return
        found = negate(out["not"], self.refs)
        if found is None or (exact_only and not found.exact) or _patterns_meet(found.schema):
            return
        trial = {k: v for k, v in out.items() if k != "not"}
        if _mergeable(found.schema, trial):
            # beside the rest, not in an `allOf`: llguidance ignores a `propertyNames` that
            # holds one
            trial.update(copy.deepcopy(found.schema))
        else:
            trial["allOf"] = [*trial.get("allOf", []), found.schema]
        if not found.exact and _possible([trial], self.refs) == set():
            return  # the narrowing would leave nothing: keep the keyword (and the warning)
        out.clear()
        out.update(trial)
        self.narrowed = self.narrowed or not found.exact
        how = "enforced" if found.exact else "enforced, narrowed where it could not be exact"
        self._note(f'"not" {_where(pointer)} {how}')

    def _not_pattern(self, out: dict[str, Any], pointer: str | None, exact_only: bool) -> bool:
        """A string's `not: {pattern: q}` and its own `pattern` as one regex (tight_regex.py):
        one per string, which llguidance's lexer holds where two overlapping ones overload
        it. True if done."""
        excluded = out["not"]
        if not isinstance(excluded, dict) or types_of(out) != {"string"}:
            return False
        kept = {k: v for k, v in excluded.items() if k not in _ANNOTATIONS}
        if set(kept) - {"pattern", "type"} or not isinstance(kept.get("pattern"), str):
            return False
        if "type" in kept and kept["type"] != "string" and kept["type"] != ["string"]:
            return False
        own = out.get("pattern")
        if own is not None and not isinstance(own, str):
            return False
        found = meet([own] if own is not None else [], [kept["pattern"]])
        if found is None or (exact_only and not found.exact):
            return False
        del out["not"]
        out["pattern"] = found.pattern
        self.narrowed = self.narrowed or not found.exact
        how = "" if found.exact else ", narrowed where a line break ends it"
        self._note(f'"not" {_where(pointer)} enforced: one pattern for the string{how}')
        return True

    def _one_of(self, out: dict[str, Any], pointer: str | None, exact_only: bool) -> bool:
        """Make an overlapping `oneOf` disjoint; False if that proves `out` empty."""
        branches = out["oneOf"]
        if pairwise_disjoint(branches, self.refs):
            return True
        if pointer is None or self.refs.reached_below(f"{pointer}/oneOf"):
            return True
        found = made_disjoint(branches, self.refs)
        if found is None or (exact_only and not found[1]):
            return True
        rest = {k: v for k, v in out.items() if k != "oneOf"}
        kept = [b for b in found[0] if _possible([rest, b], self.refs) != set()]
        if not kept:
            if found[1]:
                self.empty_reason = (
                    f"the oneOf {_where(pointer)}: every value matches none or several "
                    "of its branches"
                )
                return False
            return True
        del out["oneOf"]
        if "anyOf" in out:
            out["allOf"] = [*out.get("allOf", []), {"anyOf": kept}]
        else:
            out["anyOf"] = kept
        self.narrowed = self.narrowed or not found[1]
        how = "" if found[1] else " (narrowed)"
        self._note(f"oneOf {_where(pointer)} enforced: each branch excludes the others{how}")
        return True

    def _contains(self, out: dict[str, Any], pointer: str | None) -> None:
        """`contains: c` as "the first item matches c": a narrowing llguidance enforces."""
        if {"prefixItems", "minContains", "maxContains", "additionalItems"} & set(out):
            return
        if not _is_2020(self.refs.root) or isinstance(out.get("items"), list):
            return
        members = [m for m in out.get("allOf", []) if isinstance(m, dict)]
        if any("contains" in m or "prefixItems" in m for m in members):
            return
        if isinstance(out.get("maxItems"), int) and out["maxItems"] < 1:
            return
        first = out.pop("contains")
        if "items" in out:
            first = {"allOf": [first, copy.deepcopy(out["items"])]}
        out["prefixItems"] = [first]
        least = out.get("minItems")
        out["minItems"] = max(least if isinstance(least, int) else 0, 1)
        self.narrowed = True
        self._note(f"contains {_where(pointer)} enforced: the first item matches it")

    def _dependencies(self, out: dict[str, Any], pointer: str | None) -> None:
        """Every form of dependency as keywords llguidance enforces (tight_dependencies.py:
        the same language)."""
        skip = inactive(self.refs.root)
        for note in enforce_dependencies(out, self.refs, skip, _where(pointer)):
            self._note(note)

    def _listed(self, node: dict[str, Any], pointer: str | None, exact_only: bool) -> Any:
        """A number schema with `not`/`oneOf` inside as the integers it accepts, listed."""
        types = types_of(node)
        if types is None or not types <= {"integer", "number"}:
            return None
        low, high = _bounds(node, self.refs)
        start = low if low is not None else (high - _WINDOW if high is not None else -_WINDOW // 2)
        stop = high if high is not None else start + _WINDOW
        whole = stop - start <= _WINDOW
        stop = min(stop, start + _WINDOW)
        validator = _validator(self.refs.root, node)
        values = [n for n in range(start, stop + 1) if validator.is_valid(n)][: _MAX_LISTED + 1]
        if not values:
            return None
        exact = whole and len(values) <= _MAX_LISTED and types == {"integer"}
        if exact_only and not exact:
            return None
        values = values[:_MAX_LISTED]
        kept = {k: copy.deepcopy(v) for k, v in node.items() if k in _ANNOTATIONS}
        self.narrowed = self.narrowed or not exact
        how = "" if exact else f" (narrowed to integers from {start} to {stop})"
        self._note(f"the number {_where(pointer)}: one of {len(values)} listed values{how}")
        return {**kept, "enum": values}

    def _close_types(self, out: dict[str, Any]) -> None:
        """A schema that requires a key it forbids accepts no object: say so in `type`."""
        if "type" in out or "enum" in out or "const" in out:
            return
        required, forbidden = _keys(out, inactive(self.refs.root))
        if required & forbidden:
            out["type"] = [t for t in ALL_TYPES if t != "object"]


# Keywords whose meaning does not depend on their siblings: a schema of only these may sit
# beside another schema's keywords (where they do not clash) and mean their conjunction.
_INDEPENDENT = frozenset(
    {"type", "pattern", "minLength", "maxLength", "minItems", "maxItems", "required"}
    | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minProperties", "maxProperties", "enum", "const"}
)


def _mergeable(schema: Any, beside: dict[str, Any]) -> bool:
    """Whether `schema`'s keywords can join `beside`'s directly: independent ones, each
    absent from `beside` or the same there, and `beside` not a reference (drafts up to 7
    ignore a reference's siblings)."""
    if not isinstance(schema, dict) or not schema or set(schema) - _INDEPENDENT:
        return False
    if "$ref" in beside:
        return False
    return all(k not in beside or beside[k] == v for k, v in schema.items())


def _patterns_meet(schema: Any) -> bool:
    """Whether `schema` makes one string match several patterns (an `allOf` of them):
    llguidance intersects such regexes lazily and, over a model's whole vocabulary, runs
    out of lexer states mid-reply ("too many expressions constructed"), which is worse
    than the warning."""
    for _, node in subschemas(schema) if isinstance(schema, dict) else ():
        members = node.get("allOf")
        if isinstance(members, list):
            count = sum(isinstance(m, dict) and "pattern" in m for m in members)
            if count + ("pattern" in node) > 1:
                return True
    return False


def _empty_object(out: dict[str, Any], refs: Refs) -> bool:
    types = types_of(out)
    required, forbidden = _keys(out, inactive(refs.root))
    return bool(types and types <= {"object"} and required & forbidden)


def _keys(node: dict[str, Any], skip: frozenset[str] = frozenset()) -> tuple[set[str], set[str]]:
    """(keys `node` requires, keys it forbids), its `allOf` members included; `skip`: the
    keywords its draft does not define."""
    required: set[str] = set()
    forbidden: set[str] = set()
    members = [node]
    for member in members:
        if isinstance(member.get("allOf"), list):
            members.extend(m for m in member["allOf"] if isinstance(m, dict))
        if isinstance(member.get("required"), list):
            required |= {k for k in member["required"] if isinstance(k, str)}
        if isinstance(member.get("properties"), dict):
            forbidden |= {k for k, v in member["properties"].items() if v is False}
        for key in (k for k in ("dependencies", "dependentSchemas") if k not in skip):
            if isinstance(member.get(key), dict):
                forbidden |= {k for k, v in member[key].items() if v is False}
    return required, forbidden


def _possible(members: list[Any], refs: Refs) -> set[str] | None:
    """The JSON types a value matching every one of `members` may have (an upper bound:
    the empty set proves no value matches); None when it cannot tell (within a budget of
    `_BUDGET` steps: branches multiply)."""
    return _types([*members], refs, 0, [_BUDGET])


def _types(members: list[Any], refs: Refs, depth: int, budget: list[int]) -> set[str] | None:
    budget[0] -= 1
    if budget[0] < 0:
        return None
    flat: list[dict[str, Any]] = []
    stack = list(members)
    while stack:
        member = stack.pop()
        if member is False:
            return set()
        if not isinstance(member, dict):
            continue
        flat.append(member)
        if isinstance(member.get("allOf"), list):
            stack.extend(member["allOf"])
        target = refs.resolve(member.get("$ref")) if depth < 4 else None
        if target is not None:
            stack.append(target[1])
    types = set(ALL_TYPES)
    required: set[str] = set()
    forbidden: set[str] = set()
    for member in flat:
        found = types_of(member)
        if found is not None:
            types &= {"number" if t == "integer" else t for t in found}
        if isinstance(member.get("enum"), list) or "const" in member:
            values = member["enum"] if "const" not in member else [member["const"]]
            types &= {json_type(v) for v in values}
        flat_member = {k: v for k, v in member.items() if k != "allOf"}  # members are flat
        r, f = _keys(flat_member, inactive(refs.root))
        required |= r
        forbidden |= f
    if required & forbidden:
        types.discard("object")
    if "string" in types and _no_string_length(flat):
        types.discard("string")
    if depth < 3:
        for member in flat:
            for key in ("anyOf", "oneOf"):
                branches = member.get(key)
                if isinstance(branches, list) and types:
                    rest = [m for m in flat if m is not member]
                    union: set[str] = set()
                    for branch in branches:
                        found = _types([*rest, branch], refs, depth + 1, budget)
                        union |= set(ALL_TYPES) if found is None else found
                    types &= union
    return types


def _no_string_length(members: list[dict[str, Any]]) -> bool:
    """Whether the string lengths `members` allow (`minLength`, `maxLength`, patterns
    anchored at both ends) leave none."""
    low, high = 0, math.inf
    for member in members:
        if isinstance(member.get("minLength"), int):
            low = max(low, member["minLength"])
        if isinstance(member.get("maxLength"), int):
            high = min(high, member["maxLength"])
        pattern = member.get("pattern")
        if isinstance(pattern, str):
            width = _anchored_width(pattern)
            if width is not None:
                low, high = max(low, width[0]), min(high, width[1] + 1)  # `$` before a "\n"
    return low > high


def _anchored_width(pattern: str) -> tuple[int, int] | None:
    """(shortest, longest) text a pattern anchored by `^…$` matches; None otherwise."""
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        return None
    if "|" in pattern:  # `^a|b$` anchors each branch at one end only
        return None
    try:
        from re import _parser  # type: ignore[attr-defined]

        low, high = _parser.parse(pattern).getwidth()
    except (ImportError, re.error, RecursionError, OverflowError):
        return None
    return int(low), int(high)


def _hard(node: Any, refs: Refs, depth: int = 0) -> bool:
    """Whether `node`, or what applies in place with it, uses `not` or `oneOf`."""
    if not isinstance(node, dict) or depth > 6:
        return False
    if "not" in node or "oneOf" in node and not pairwise_disjoint(node["oneOf"], refs):
        return True
    for key in ("allOf", "anyOf"):
        if isinstance(node.get(key), list) and any(_hard(b, refs, depth + 1) for b in node[key]):
            return True
    target = refs.resolve(node.get("$ref"))
    return target is not None and _hard(target[1], refs, depth + 1)


def _bounds(node: dict[str, Any], refs: Refs) -> tuple[int | None, int | None]:
    """The smallest and largest integer `node` and its `allOf` members allow."""
    low: int | None = None
    high: int | None = None
    members = [node, *[m for m in node.get("allOf", []) if isinstance(m, dict)]]
    for member in members:
        for key in ("minimum", "exclusiveMinimum"):
            value = member.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                bound = math.floor(value) + 1 if key.startswith("exclusive") else math.ceil(value)
                low = bound if low is None else max(low, bound)
        for key in ("maximum", "exclusiveMaximum"):
            value = member.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                bound = math.ceil(value) - 1 if key.startswith("exclusive") else math.floor(value)
                high = bound if high is None else min(high, bound)
    return low, high


def _validator(root: Any, node: Any) -> Any:
    cls = jsonschema.validators.validator_for(root, jsonschema.Draft202012Validator)
    return cls(root).evolve(schema=node)


def _is_2020(root: Any) -> bool:
    """Whether `root` is read as draft 2020-12 (it says so, or names no draft)."""
    draft = root.get("$schema") if isinstance(root, dict) else None
    return draft is None or (isinstance(draft, str) and "2020-12" in draft)
