"""Argument values in call syntaxes that are not JSON, each held to its part of the schema.

XML-parameter formats write a string parameter raw (up to the closing tag) and anything
else as JSON; Gemma 4 writes strings between `<|"|>` quotes and objects with bare keys;
pythonic calls write Python literals (`True`, `None`, quoted strings). Each builds Lark
rules from a parameter's subschema: enums and consts as alternatives, strings raw with
their length or pattern, numbers, objects and arrays through llguidance's `%json`
embedding where the syntax writes JSON, and recursively where it does not. Objects list
their declared properties in order, required ones always present, no unknown ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from engine.tools.formats.base import Marker, lit, without

Rules = list[str]


def embedded(sub: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """`sub` as a schema of its own: the root's definitions and llguidance options kept, so
    `$ref`s and the compact layout still hold."""
    out = dict(sub) if isinstance(sub, dict) else {}
    for key in ("$defs", "definitions", "x-guidance"):
        if key in root and key not in out:
            out[key] = root[key]
    return out


def properties(
    schema: dict[str, Any], sort: bool = False
) -> list[tuple[str, dict[str, Any], bool]]:
    """(name, subschema, required) of each declared property, in the schema's order (in
    the order of their names with `sort`: templates that write arguments `dictsort`ed)."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    found = [(k, v if isinstance(v, dict) else {}, k in required) for k, v in props.items()]
    return sorted(found, key=lambda p: p[0]) if sort else found


def is_raw_string(sub: dict[str, Any]) -> bool:
    """Whether values of `sub` are always strings (written raw where the syntax does)."""
    if "enum" in sub:
        return all(isinstance(v, str) for v in sub["enum"])
    if "const" in sub:
        return isinstance(sub["const"], str)
    return sub.get("type") == "string" and not any(
        k in sub for k in ("anyOf", "oneOf", "allOf", "$ref")
    )


def raw_regex(sub: dict[str, Any]) -> str:
    """A Lark regex for the raw text of a string value of `sub`."""
    if "enum" in sub:
        body = "|".join(re.escape(v) for v in sub["enum"])
    elif "const" in sub:
        body = re.escape(sub["const"])
    elif isinstance(sub.get("pattern"), str):
        body = sub["pattern"].removeprefix("^").removesuffix("$")
    else:
        low, high = sub.get("minLength"), sub.get("maxLength")
        if isinstance(low, int) or isinstance(high, int):
            body = f"(?s:.{{{low or 0},{high if isinstance(high, int) else ''}}})"
        else:
            body = "(?s:.*)"
    return "/(" + body.replace("/", "\\/") + ")/"


def raw_until(rule: str, sub: dict[str, Any], closer: list[Marker]) -> Rules:
    """Rules for `rule`: a raw string value of `sub`, then the `closer` markup. The value
    ends at the first closer: it never contains the closer's first piece as text, and a
    closer that is a token follows it as that token."""
    term = rule.upper() + "_RAW"
    first, rest = closer[0], " ".join(m.lark() for m in closer[1:])
    if first.token_id is not None:
        # no text spells the token, but the value must not hold its text either: a parse
        # reads the value up to the first closer
        return [
            f"{rule}: {term} {first.lark()} {rest}",
            f"{term}: {raw_regex(sub)} & {without(first.text)}",
        ]
    return [
        f"{rule}: {rule}_lazy {rest}",
        f"{term}: {raw_regex(sub)}",
        f"{rule}_lazy[lazy]: {term} {lit(first.text)}",
    ]


def json_value(rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
    return [f"{rule}: %json {json.dumps(embedded(sub, root))}"]


def sequence(rule: str, items: list[tuple[str, bool]], sep: str, empty_ok: bool = True) -> Rules:
    """Rules for `rule`: the item rules in order, optional ones skippable, `sep` (Lark)
    between those present; at least one present unless `empty_ok`."""
    n = len(items)
    out: Rules = []
    for i in range(n + 1):
        if i == n:
            out += [f"{rule}_f{i}: ", f"{rule}_a{i}: "] if empty_ok else [f"{rule}_a{i}: "]
            continue
        item, required = items[i]
        after = f"{sep} {item} {rule}_a{i + 1}" if sep else f"{item} {rule}_a{i + 1}"
        first = f"{item} {rule}_a{i + 1}"
        if required:
            out.append(f"{rule}_a{i}: {after}")
            out.append(f"{rule}_f{i}: {first}")
        else:
            out.append(f"{rule}_a{i}: {after} | {rule}_a{i + 1}")
            # with empty_ok False, the last item is there if no other one is
            skip = f" | {rule}_f{i + 1}" if empty_ok or i + 1 < n else ""
            out.append(f"{rule}_f{i}: {first}{skip}")
    out.insert(0, f"{rule}: {rule}_f0")
    return out


# ---- literals written recursively (Gemma 4, pythonic) ----


class LiteralSyntax:
    """How one syntax writes literals: override the leaves."""

    true, false, null = "true", "false", "null"
    item_sep = ","
    key_sep = ":"
    sort_keys = False  # objects' keys in the order of their names

    def string(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        return json_value(rule, sub, root)

    def key(self, name: str) -> str:
        return lit(name)

    def rules(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        """Rules for `rule`: a value of `sub` in this syntax."""
        sub = _resolve(sub, root)
        if "enum" in sub or "const" in sub:
            values = sub["enum"] if "enum" in sub else [sub["const"]]
            if all(isinstance(v, str) for v in values):
                return self.string(rule, sub, root)
            return [f"{rule}: " + " | ".join(self.constant(v) for v in values)]
        for key in ("anyOf", "oneOf"):
            if isinstance(sub.get(key), list):
                branches = [{**{k: v for k, v in sub.items() if k != key}, **b} for b in sub[key]]
                return self._alternatives(rule, branches, root)
        kind = sub.get("type")
        if isinstance(kind, list):
            return self._alternatives(rule, [{**sub, "type": k} for k in kind], root)
        if kind == "string":
            return self.string(rule, sub, root)
        if kind == "boolean":
            return [f"{rule}: {lit(self.true)} | {lit(self.false)}"]
        if kind == "null":
            return [f"{rule}: {lit(self.null)}"]
        if kind in ("integer", "number"):
            return json_value(rule, sub, root)
        if kind == "array" and isinstance(sub.get("items"), dict):
            return self._array(rule, sub, root)
        if kind == "object" and sub.get("properties"):
            return self._object(rule, sub, root)
        return self.any_value(rule, sub, root)

    def any_value(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        return json_value(rule, sub, root)

    def constant(self, value: Any) -> str:
        if value is True:
            return lit(self.true)
        if value is False:
            return lit(self.false)
        if value is None:
            return lit(self.null)
        return lit(json.dumps(value))

    def _alternatives(
        self, rule: str, branches: list[dict[str, Any]], root: dict[str, Any]
    ) -> Rules:
        out = [f"{rule}: " + " | ".join(f"{rule}_b{i}" for i in range(len(branches)))]
        for i, branch in enumerate(branches):
            out += self.rules(f"{rule}_b{i}", branch, root)
        return out

    def _array(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        item = f"{rule}_item"
        low = sub.get("minItems", 0)
        high = sub.get("maxItems")
        sep = lit(self.item_sep)
        if isinstance(high, int) and high <= 8:  # small bounds: spelled out
            forms = [
                " ".join([item] + [f"{sep} {item}"] * (n - 1)) for n in range(max(low, 1), high + 1)
            ]
            body = " | ".join(forms + ([""] if low == 0 else []))
            out = [f"{rule}: {lit('[')} ({body}) {lit(']')}" if forms else f"{rule}: {lit('[]')}"]
        else:
            many = f"{item} ({sep} {item})*"
            out = [f"{rule}: {lit('[')} {'' if low else '('}{many}{'' if low else ')?'} {lit(']')}"]
        return out + self.rules(item, sub["items"], root)

    def _object(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        items, out = [], []
        for i, (name, prop, required) in enumerate(properties(sub, self.sort_keys)):
            value = f"{rule}_p{i}"
            out.append(f"{value}_kv: {self.key(name)} {lit(self.key_sep)} {value}")
            out += self.rules(value, prop, root)
            items.append((f"{value}_kv", required))
        body = sequence(f"{rule}_body", items, lit(self.item_sep))
        return [f"{rule}: {lit('{')} {rule}_body {lit('}')}", *body, *out]


# ---- JSON as `tojson(indent=...)` writes it (Command R+) ----


class IndentedJson:
    """JSON written one key or item a line, as `tojson(indent=step)|indent(base)` writes
    it: nested lines `step` deeper each level, every line after the first `base` further in.
    Objects with declared properties and arrays are laid out so; anything else (strings,
    numbers, free-form objects) is compact JSON held to its subschema."""

    def __init__(self, step: int = 4, base: int = 0) -> None:
        self.step, self.base = step, base

    def newline(self, depth: int) -> str:
        return "\n" + " " * (self.base + self.step * depth)

    def rules(self, rule: str, sub: dict[str, Any], root: dict[str, Any], depth: int = 0) -> Rules:
        """Rules for `rule`: a value of `sub` at nesting `depth`."""
        sub = _resolve(sub, root)
        plain = not any(k in sub for k in ("anyOf", "oneOf", "allOf", "enum", "const"))
        if plain and sub.get("type") == "object" and sub.get("properties"):
            return self._object(rule, sub, root, depth)
        if plain and sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            return self._array(rule, sub, root, depth)
        return json_value(rule, sub, root)

    def write(self, value: Any) -> str:
        """`value` as these rules write it."""
        text = json.dumps(value, ensure_ascii=False, indent=self.step)
        return text.replace("\n", "\n" + " " * self.base)

    def _object(self, rule: str, sub: dict[str, Any], root: dict[str, Any], depth: int) -> Rules:
        items, out = [], []
        for i, (name, prop, required) in enumerate(properties(sub)):
            value = f"{rule}_p{i}"
            out.append(f"{value}_kv: {lit(json.dumps(name) + ': ')} {value}")
            out += self.rules(value, prop, root, depth + 1)
            items.append((f"{value}_kv", required))
        inner, outer = self.newline(depth + 1), self.newline(depth)
        body = sequence(f"{rule}_body", items, lit("," + inner), empty_ok=False)
        full = f"{lit('{' + inner)} {rule}_body {lit(outer + '}')}"
        empty = "" if any(required for _, required in items) else f" | {lit('{}')}"
        return [f"{rule}: {full}{empty}", *body, *out]

    def _array(self, rule: str, sub: dict[str, Any], root: dict[str, Any], depth: int) -> Rules:
        item = f"{rule}_item"
        inner, outer = self.newline(depth + 1), self.newline(depth)
        low, high = sub.get("minItems", 0), sub.get("maxItems")
        sep, head, tail = lit("," + inner), lit("[" + inner), lit(outer + "]")
        if isinstance(high, int) and high <= 8:  # small bounds: spelled out
            counts = range(max(low, 1), high + 1)
            forms = [" ".join([head, item, *[f"{sep} {item}"] * (n - 1), tail]) for n in counts]
        else:
            forms = [f"{head} {item} ({sep} {item})* {tail}"]
        if not low:
            forms.append(lit("[]"))
        return [f"{rule}: {' | '.join(forms)}", *self.rules(item, sub["items"], root, depth + 1)]


def _resolve(sub: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """`sub` with a local `$ref` followed (once per level)."""
    ref = sub.get("$ref") if isinstance(sub, dict) else None
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        rest = {k: v for k, v in sub.items() if k != "$ref"}
        return {**target, **rest} if isinstance(target, dict) else rest
    return sub if isinstance(sub, dict) else {}


def read_value(text: str, sub: dict[str, Any] | None) -> Any:
    """A raw-or-JSON value (XML parameters): raw where the schema says string, else JSON,
    else the text itself."""
    if sub is not None and is_raw_string(sub):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        lowered = {"True": True, "False": False, "None": None}
        return lowered.get(text.strip(), text)


def schema_of(
    schemas: dict[str, dict[str, Any]] | None, tool: str, key: str
) -> dict[str, Any] | None:
    if not schemas or tool not in schemas:
        return None
    props = schemas[tool].get("properties") or {}
    sub = props.get(key)
    return sub if isinstance(sub, dict) else None


Unquote = Callable[[str], Any]
