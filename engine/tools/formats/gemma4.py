"""Gemma 4: `<|tool_call>call:NAME{city:<|"|>Paris<|"|>,days:2}<tool_call|>`.

Keys are bare, strings sit between `<|"|>` quotes (written raw inside), numbers and
booleans as in JSON, objects and arrays recursively in the same syntax; each value held to
its subschema (values.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.tools.formats.base import RawCall, Schemas, lit
from engine.tools.formats.region import RegionFormat
from engine.tools.formats.values import LiteralSyntax, Rules, properties, raw_until, sequence

QUOTE = '<|"|>'
OPEN, CLOSE = "<|tool_call>", "<tool_call|>"
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_KEY = re.compile(r"[^\s:{}\[\],]+")


class GemmaSyntax(LiteralSyntax):
    def __init__(self, fmt: Gemma4Format) -> None:
        self.fmt = fmt
        self.sort_keys = fmt.sorted_keys

    def key(self, name: str) -> str:
        return lit(name)

    def string(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> Rules:
        quote = self.fmt.pieces(QUOTE)
        inner = f"{rule}_s"
        return [f"{rule}: {self.fmt.lark_text(QUOTE)} {inner}", *raw_until(inner, sub, quote)]


def read_value(text: str, pos: int) -> tuple[Any, int]:
    """A Gemma 4 value at `pos`: (value, where it ends); ValueError if there is none."""
    if text.startswith(QUOTE, pos):
        end = text.index(QUOTE, pos + len(QUOTE))
        return text[pos + len(QUOTE) : end], end + len(QUOTE)
    if text.startswith('"', pos):
        return json.JSONDecoder().raw_decode(text, pos)
    if text.startswith("{", pos):
        return read_object(text, pos)
    if text.startswith("[", pos):
        items, pos = [], pos + 1
        while not text.startswith("]", pos):
            item, pos = read_value(text, pos)
            items.append(item)
            pos += 1 if text.startswith(",", pos) else 0
        return items, pos + 1
    found = _SCALAR.match(text, pos)
    if found is None:
        raise ValueError(f"no value at {pos}")
    return json.loads(found.group(0)), found.end()


def read_object(text: str, pos: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    pos += 1  # "{"
    while not text.startswith("}", pos):
        key = _KEY.match(text, pos)
        if key is None or not text.startswith(":", key.end()):
            raise ValueError(f"no key at {pos}")
        out[key.group(0)], pos = read_value(text, key.end() + 1)
        pos += 1 if text.startswith(",", pos) else 0
    return out, pos + 1


def gemma_value(value: Any, sort: bool = False) -> str:
    """A value as Gemma 4 writes it (objects' keys by name with `sort`)."""
    if isinstance(value, str):
        return QUOTE + value + QUOTE
    if isinstance(value, dict):
        items = sorted(value.items()) if sort else list(value.items())
        return "{" + ",".join(f"{k}:{gemma_value(v, sort)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(gemma_value(v, sort) for v in value) + "]"
    return json.dumps(value)


class Gemma4Format(RegionFormat):
    """Gemma 4: `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`."""

    name = "gemma4"
    opener = OPEN
    stream_closer = CLOSE
    checked_against = ("gemma-4.jinja",)
    sorted_keys = False  # arguments in the order of their names (the template dictsorts)

    def layouts(self) -> list[dict[str, Any]]:
        return [
            {},
            {"sorted_keys": True, "_describe": "arguments in the order of their names"},
        ]

    @classmethod
    def detect(cls, template: str) -> bool:
        return OPEN in template and "call:" in template

    def call_rules(self, rule: str, tool_name: str, schema: dict[str, Any]) -> list[str]:
        syntax = GemmaSyntax(self)
        items, out = [], []
        for i, (key, sub, required) in enumerate(properties(schema, self.sorted_keys)):
            value = f"{rule}_v{i}"
            out.append(f"{rule}_k{i}: {lit(key + ':')} {value}")
            out += syntax.rules(value, sub, schema)
            items.append((f"{rule}_k{i}", required))
        out += sequence(f"{rule}_args", items, lit(","))
        return [f"{rule}: {lit('call:' + tool_name + '{')} {rule}_args {lit('}')}", *out]

    def region_lark(self, parallel: bool) -> str:
        close, open_ = self.lark_text(CLOSE), self.lark_text(OPEN)
        return f"fn {close}" + (f" ({open_} fn {close})*" if parallel else "")

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        calls: list[RawCall] = []
        for chunk in region.split(OPEN):
            found = re.match(r"\s*call:(?P<name>[^\s{]+)", chunk)
            if found is None:
                return None
            try:
                arguments, end = read_object(chunk, found.end())
            except (ValueError, IndexError):
                return None
            if not chunk[end:].lstrip().startswith(CLOSE):
                return None
            calls.append((found.group("name"), arguments))
        return calls

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "".join(f"{OPEN}call:{n}{gemma_value(a, self.sorted_keys)}{CLOSE}" for n, a in calls)
