"""Calls written as Python: `[get_weather(city="Paris", days=2)]`.

Llama 4 and Gemma 3 (vLLM's templates) write a list of calls as the whole reply; OLMo 3
writes one call a line inside `<function_calls>…</function_calls>`. Values are Python
literals (`True`, `None`, quoted strings), each held to its subschema (values.py); calls
are read back with Python's own parser, never evaluated.
"""

from __future__ import annotations

import ast
import json
from typing import Any, ClassVar

from engine.tools.formats.base import RawCall, Schemas, lit
from engine.tools.formats.region import RegionFormat
from engine.tools.formats.values import (
    LiteralSyntax,
    Rules,
    json_value,
    properties,
    raw_regex,
    sequence,
)


class PythonSyntax(LiteralSyntax):
    """Python literals: `True`, `None`, strings in double quotes (JSON's escapes)."""

    true, false, null = "True", "False", "None"
    item_sep = ", "
    key_sep = ": "

    def key(self, name: str) -> str:
        return lit(json.dumps(name))  # a dict's keys are quoted strings

    def write(self, value: Any) -> str:
        """`value` as this syntax writes it."""
        if isinstance(value, bool) or value is None:
            return {True: self.true, False: self.false, None: self.null}[value]
        if isinstance(value, list):
            return "[" + ", ".join(self.write(x) for x in value) + "]"
        if isinstance(value, dict):
            items = ", ".join(f"{json.dumps(k)}: {self.write(x)}" for k, x in value.items())
            return "{" + items + "}"
        return json.dumps(value, ensure_ascii=False)


class JsonCallSyntax(PythonSyntax):
    """Each argument's value as JSON (`key=value | tojson`: `true`, `null`)."""

    true, false, null = "true", "false", "null"


class OlmoSyntax(PythonSyntax):
    """OLMo 3's template: strings raw in single quotes (no quote, backslash or newline
    inside: the template writes them as they are), `true`/`false`/`null`, anything else as
    JSON."""

    true, false, null = "true", "false", "null"

    def string(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        if "enum" in sub or "const" in sub:
            values = sub["enum"] if "enum" in sub else [sub["const"]]
            return [f"{rule}: " + " | ".join(lit(f"'{v}'") for v in values)]
        return [f'{rule}: "\'" {rule.upper()}_Q "\'"', f"{rule.upper()}_Q: {quoted(sub)}"]

    def rules(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        if sub.get("type") in ("array", "object"):
            return json_value(rule, sub, root)  # the template writes them with tojson
        return super().rules(rule, sub, root)

    def write(self, value: Any) -> str:
        if isinstance(value, str):
            return f"'{value}'"
        if isinstance(value, (list, dict)):
            return json.dumps(value, ensure_ascii=False)
        return super().write(value)


def quoted(sub: dict[str, Any]) -> str:
    """A Lark regex for a string value of `sub` without `'`, backslash or newline."""
    return f"{raw_regex(sub)} & /[^'\\\\\\n]*/"


_NAMES = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}


def literal(node: ast.AST) -> Any:
    """A Python (or JSON) literal's value; ValueError for anything else."""
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -literal(node.operand)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            literal(k): literal(v)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    raise ValueError(f"not a literal: {ast.dump(node)[:60]}")


def read_calls(source: str) -> list[RawCall] | None:
    """Calls from Python source: a list of calls, or calls one per line; None if it is not."""
    try:
        tree = ast.parse(source.strip(), mode="exec")
    except SyntaxError:
        return None
    nodes: list[ast.AST] = []
    for statement in tree.body:
        if not isinstance(statement, ast.Expr):
            return None
        value = statement.value
        nodes += value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    calls: list[RawCall] = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = _dotted(node.func)
        try:
            arguments = {k.arg: literal(k.value) for k in node.keywords if k.arg is not None}
        except ValueError:
            return None
        if name is None:
            return None
        calls.append((name, arguments))
    return calls or None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def python_call(name: str, arguments: dict[str, Any], syntax: PythonSyntax | None = None) -> str:
    """A call as Python source, its values in `syntax` (Python literals by default)."""
    write = (syntax or PythonSyntax()).write
    return f"{name}(" + ", ".join(f"{k}={write(v)}" for k, v in arguments.items()) + ")"


class PythonicFormat(RegionFormat):
    """Pythonic list (Llama 4, Gemma 3): `[get_weather(city="Paris"), get_time(zone="CET")]`."""

    name = "pythonic"
    opener = "["
    leading_only = True
    syntax: PythonSyntax = PythonSyntax()
    checked_against: ClassVar[tuple[str, ...]] = (
        "llama-4-vllm-pythonic.jinja",
        "gemma-3-vllm-pythonic.jinja",
    )

    def layouts(self) -> list[dict[str, Any]]:
        json_values = "each value written as JSON (`true`, `null`)"
        return [{"syntax": PythonSyntax()}, {"syntax": JsonCallSyntax(), "_describe": json_values}]

    @classmethod
    def detect(cls, template: str) -> bool:
        return "[func_name1(" in template

    def call_rules(self, rule: str, tool_name: str, schema: dict[str, Any]) -> list[str]:
        items, out = [], []
        for i, (key, sub, required) in enumerate(properties(schema)):
            value = f"{rule}_v{i}"
            out.append(f"{rule}_k{i}: {lit(key + '=')} {value}")
            out += self.syntax.rules(value, sub, schema)
            items.append((f"{rule}_k{i}", required))
        out += sequence(f"{rule}_args", items, lit(", "))
        return [f"{rule}: {lit(tool_name + '(')} {rule}_args {lit(')')}", *out]

    def region_lark(self, parallel: bool) -> str:
        more = ' (", " fn)*' if parallel else ""
        return f'fn{more} "]"'

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        end = region.rfind("]")
        return read_calls("[" + region[: end + 1]) if end >= 0 else None

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "[" + ", ".join(python_call(n, a, self.syntax) for n, a in calls) + "]"


class OlmoFormat(PythonicFormat):
    """OLMo 3: `<function_calls>\\nget_weather(city="Paris")\\n</function_calls>`, a call a line."""

    name = "olmo"
    opener = "<function_calls>"
    leading_only = False
    stream_closer = "</function_calls>"
    checked_against = ("olmo-3-vllm.jinja",)

    def layouts(self) -> list[dict[str, Any]]:
        quotes = "strings in single quotes, true/false/null (the template's own writing)"
        return [{"syntax": OlmoSyntax(), "_describe": quotes}, {"syntax": PythonSyntax()}]

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<function_calls>" in template

    def region_lark(self, parallel: bool) -> str:
        more = ' ("\\n" fn)*' if parallel else ""
        return f'"\\n" fn{more} {self.lark_text(chr(10) + "</function_calls>")}'

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        body, closed, _ = region.partition("</function_calls>")
        return read_calls(body) if closed else None

    def calls_as_text(self, calls: list[RawCall]) -> str:
        lines = "\n".join(python_call(n, a, self.syntax) for n, a in calls)
        return f"<function_calls>\n{lines}\n</function_calls>"
