"""Depth limits that keep llguidance's native compiler inside its stack.

llguidance compiles grammars recursively: every rule a Lark rule refers to, and every
subschema a JSON schema reaches (through nesting or `$ref`), is compiled one native stack
frame deeper. A long enough chain (a 3,000-rule Lark chain, a 1,500-deep `$defs` chain)
overflows the thread's stack and the whole process dies with SIGSEGV; no Python exception
can catch that. So before any grammar text reaches native code, `check_lark` and
`check_schema` measure how deep its compile can recurse and refuse what is too deep, with
a message that says how deep it is and where the chain starts.

The depth measured is an upper bound on the compiler's recursion: the longest chain of
references (Lark) or of subschemas (JSON schema), where a group of definitions that refer
to one another in a cycle counts with all its members, since a depth-first compile can walk
all of them before it meets one twice. llguidance itself already refuses JSON nested more
than 128 deep and Lark or regex groups nested too deeply; the chains through references
are what it does not bound. The limits and the stack they were measured against are in
README.md ("Limits"); `benchmarks`' tests run the measured constructs in a child process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from engine.constraints import ConstraintError, Diagnostic

# Measured with llguidance 1.9.1 on an 8 MiB stack (the main thread's on Linux and macOS;
# `engine.threads` gives every other thread 16 MiB): Lark reference chains crashed from
# 2,734 levels (up to 3.0 KiB of stack each), JSON-schema chains through `$ref` from 1,798
# subschemas (up to 4.6 KiB each; `prefixItems`). The limits keep a margin of 4 or more;
# the deepest of JSONSchemaBench's 4,699 real schemas measures 56.
MAX_LARK_DEPTH = 500
MAX_SCHEMA_DEPTH = 400
MAX_JSON_NESTING = 128  # serde_json's limit, which llguidance keeps

_LARK_DEF = re.compile(r"^[ \t]*[?!]?([A-Za-z_]\w*)[ \t]*(?:\.[ \t]*-?\d+[ \t]*)?:", re.MULTILINE)
# Strings, regexes and comments hold no references; `%json {...}` holds a JSON schema.
_LARK_SKIP = re.compile(
    r'"(?:[^"\\\n]|\\.)*"i?'  # "literal"
    r"|/(?![/*])(?:[^/\\\n]|\\.)+/[imsx]*"  # /regex/
    r"|//[^\n]*"  # // comment
    r"|#[^\n]*"  # # comment
)
_LARK_NAME = re.compile(r"(?<![%\w.@])([A-Za-z_]\w*)")
_JSON_DIRECTIVE = re.compile(r"%json\s*\{")


def _error(label: str, message: str) -> ConstraintError:
    diag = Diagnostic(message)
    return ConstraintError(f"{label}: {diag}", [diag])


# ---- the longest chain through a graph whose cycles count whole ----


def _longest_chain(
    nodes: list[str], edges: dict[str, set[str]], weight: dict[str, int]
) -> tuple[int, list[str]]:
    """(the heaviest path's weight, its nodes) where each cycle group (strongly connected
    component) weighs the sum of its members: an upper bound on any simple path's weight.
    Iterative throughout: the graphs it checks are the ones too deep to recurse over."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    component: dict[str, int] = {}
    members: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = len(members)
                    group.append(member)
                    if member == node:
                        break
                members.append(group)
    # Tarjan numbers components in reverse topological order: successors come first.
    best: list[int] = []
    succ: list[int] = []
    for number, group in enumerate(members):
        own = sum(weight.get(m, 1) for m in group)
        after, via = 0, -1
        for member in group:
            for child in edges.get(member, ()):
                other = component[child]
                if other != number and best[other] > after:
                    after, via = best[other], other
        best.append(own + after)
        succ.append(via)
    if not best:
        return 0, []
    top = max(range(len(best)), key=best.__getitem__)
    chain: list[str] = []
    at = top
    while at != -1:
        chain.append(sorted(members[at])[0])
        at = succ[at]
    return best[top], chain


# ---- Lark ----


def _json_blocks(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each `{...}` object after a `%json` directive (braces balanced,
    strings respected)."""
    for found in _JSON_DIRECTIVE.finditer(text):
        start = found.end() - 1
        depth, i, in_string = 0, start, False
        while i < len(text):
            ch = text[i]
            if in_string:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield start, i + 1
                    break
            i += 1


def check_lark(text: str, label: str = "Lark grammar") -> None:
    """Refuse a Lark grammar whose rules refer to one another too deeply for llguidance,
    or whose `%json` schemas are too deep; raise ConstraintError saying which."""
    blocks = list(_json_blocks(text))
    json_depth: dict[int, int] = {}
    for start, end in blocks:
        try:
            schema = json.loads(text[start:end])
        except (ValueError, RecursionError):
            continue  # llguidance reports it, with its position
        json_depth[start] = check_schema(schema, f"{label}: %json schema")
    # Blank out what holds no references, keeping offsets (and line numbers) as they are.
    chars = list(text)
    for start, end in blocks:
        chars[start:end] = " " * (end - start)
    plain = "".join(chars)
    plain = _LARK_SKIP.sub(lambda m: " " * len(m.group(0)), plain)
    starts = list(_LARK_DEF.finditer(plain))
    edges: dict[str, set[str]] = {}
    weight: dict[str, int] = {}
    for i, found in enumerate(starts):
        name = found.group(1)
        end = starts[i + 1].start() if i + 1 < len(starts) else len(plain)
        body = plain[found.end() : end]
        edges.setdefault(name, set()).update(_LARK_NAME.findall(body))
        extra = max((d for s, d in json_depth.items() if found.end() <= s < end), default=0)
        weight[name] = max(weight.get(name, 1), 1 + extra)
    for name in list(edges):
        edges[name] = {n for n in edges[name] if n in edges}
    depth, chain = _longest_chain(list(edges), edges, weight)
    if depth > MAX_LARK_DEPTH:
        shown = " -> ".join(chain[:4]) + (" -> ..." if len(chain) > 4 else "")
        raise _error(
            label,
            f"the grammar's rules refer to one another {depth:,} deep ({shown}); "
            f"Corral allows at most {MAX_LARK_DEPTH:,}",
        )


# ---- JSON schema ----

# Keywords whose value is a subschema, a list of them, or a map of names to them.
_ONE = (
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_NAMED = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")


def _children(node: dict[str, Any]) -> Iterator[Any]:
    for key in _ONE:
        value = node.get(key)
        if isinstance(value, dict | bool):
            yield value
    for key in _MANY:
        value = node.get(key)
        if isinstance(value, list):
            yield from (v for v in value if isinstance(v, dict | bool))
    for key in _NAMED:
        value = node.get(key)
        if isinstance(value, dict) and key not in ("$defs", "definitions"):
            yield from (v for v in value.values() if isinstance(v, dict | bool))


def _resolve(root: Any, ref: str) -> Any:
    """The subschema `ref` points at inside the document, or None (not a local pointer)."""
    if not ref.startswith("#"):
        return None
    target = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def nesting(value: Any) -> int:
    """How deeply `value` nests arrays and objects (iteratively; llguidance refuses JSON
    nested more than MAX_JSON_NESTING deep, with its position, when it parses it)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            values = item.values() if isinstance(item, dict) else item
            todo.extend((v, depth + 1) for v in values if isinstance(v, dict | list))
    return deepest


def check_schema(schema: Any, label: str = "JSON schema") -> int:
    """Refuse a JSON schema whose subschemas (followed through `$ref`) chain too deeply
    for llguidance; return that depth. `schema` is parsed JSON (an object or a boolean)."""
    if not isinstance(schema, dict):
        return 1
    ids: dict[int, str] = {}
    objects: dict[str, dict[str, Any]] = {}

    def key(node: dict[str, Any]) -> str:
        found = ids.get(id(node))
        if found is None:
            found = ids[id(node)] = f"#{len(ids)}"
            objects[found] = node
        return found

    edges: dict[str, set[str]] = {}
    todo = [schema]
    while todo:
        node = todo.pop()
        name = key(node)
        if name in edges:
            continue
        targets: set[str] = set()
        subs = [c for c in _children(node) if isinstance(c, dict)]
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _resolve(schema, ref)
            if isinstance(target, dict):
                subs.append(target)
        for sub in subs:
            targets.add(key(sub))
            todo.append(sub)
        edges[name] = targets
    depth, chain = _longest_chain(list(edges), edges, {})
    if depth > MAX_SCHEMA_DEPTH:
        raise _error(
            label,
            f"the schema's subschemas (following $ref) nest {depth:,} deep; "
            f"Corral allows at most {MAX_SCHEMA_DEPTH:,}",
        )
    return depth


def check_schema_text(text: str, label: str = "JSON schema") -> None:
    """`check_schema` for a schema given as JSON text (unparsable text is left to the
    caller, which reports it with its position)."""
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError):
        return
    check_schema(schema, label)
