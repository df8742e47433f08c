"""Calls written as XML-like tags with one tag per parameter.

Qwen3-Coder and Qwen3.5 (`<function=NAME><parameter=k>v</parameter>`), Seed-OSS (the same
inside `<seed:tool_call>`, values without the blank lines around them), MiniMax M2
(`<invoke name=…><parameter name=…>`), DeepSeek V3.2's DSML (`<｜DSML｜invoke>` with a
`string` attribute), Kimi K3's XTML (`<|open|>argument key=… type=…<|sep|>`) and GLM-4.5/4.6
(`<arg_key>k</arg_key><arg_value>v</arg_value>`). A string parameter is written raw up to
its closing tag; anything else as JSON; each held to its own subschema (values.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from engine.tools.formats.base import CALL_INDEX, RawCall, Schemas
from engine.tools.formats.region import RegionFormat
from engine.tools.formats.values import (
    is_raw_string,
    json_value,
    properties,
    raw_until,
    read_value,
    schema_of,
    sequence,
)

_NAME = r"[^\s<>\"=|]+"


def _value_schema(value: Any) -> dict[str, Any]:
    """The plainest schema `value` fits (what a history call's values tell about types)."""
    for kind, types in (("boolean", bool), ("string", str), ("integer", int), ("number", float)):
        if isinstance(value, types):
            return {"type": kind}
    return {"type": "null" if value is None else "array" if isinstance(value, list) else "object"}


class XmlParamsFormat(RegionFormat):
    """Base: a call is `call_head(NAME)`, its parameters, then `call_tail`."""

    call_sep: ClassVar[str] = ""  # between two calls
    region_close: ClassVar[str] = ""  # after the last call
    param_close: ClassVar[str] = ""
    call_tail: ClassVar[str] = ""
    # Parsing: a call (groups `name`, `body`) and a parameter (groups `key`, `value`,
    # optionally `kind`: the syntax's own type note).
    call_re: ClassVar[re.Pattern[str]]
    param_re: ClassVar[re.Pattern[str]]

    def call_head(self, name: str) -> str:
        raise NotImplementedError

    def call_head_lark(self, tool_name: str) -> str:
        return self.lark_text(self.call_head(tool_name))

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        raise NotImplementedError

    def region_lark(self, parallel: bool) -> str:
        sep = self.lark_text(self.call_sep) if self.call_sep else ""
        close = f" {self.lark_text(self.region_close)}" if self.region_close else ""
        return f"{self.calls_lark(sep, parallel)}{close}"

    def call_rules(self, rule: str, tool_name: str, schema: dict[str, Any]) -> list[str]:
        out: list[str] = []
        items = []
        closer = self.pieces(self.param_close)
        for i, (key, sub, required) in enumerate(properties(schema)):
            param, value = f"{rule}_p{i}", f"{rule}_v{i}"
            out.append(f"{param}: {self.lark_text(self.param_head(key, sub))} {value}")
            if is_raw_string(sub):
                out += raw_until(value, sub, closer)
            else:
                out.append(f"{value}: {value}_json {self.lark_text(self.param_close)}")
                out += self.value_rules(f"{value}_json", sub, schema)
            items.append((param, required))
        out += sequence(f"{rule}_params", items, "")
        head, tail = self.call_head_lark(tool_name), self.lark_text(self.call_tail)
        return [f"{rule}: {head} {rule}_params {tail}", *out]

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        calls: list[RawCall] = []
        for match in self.call_re.finditer(region):
            name = match.group("name")
            arguments: dict[str, Any] = {}
            for param in self.param_re.finditer(match.group("body")):
                key = param.group("key")
                kind = param.groupdict().get("kind")
                arguments[key] = self.read(
                    param.group("value"), kind, schema_of(schemas, name, key)
                )
            calls.append((name, arguments))
        return calls or None

    def read(self, text: str, kind: str | None, sub: dict[str, Any] | None) -> Any:
        return read_value(text, sub)

    def calls_as_text(self, calls: list[RawCall]) -> str:
        if self.numbered:
            return super().calls_as_text(calls)
        return self.numbered_calls_text(calls, 0)

    def numbered_calls_text(self, calls: list[RawCall], first: int) -> str:
        parts = []
        for i, (name, arguments) in enumerate(calls):
            params = "".join(
                self.param_head(k, _value_schema(v)) + self.value_text(v) + self.param_close
                for k, v in arguments.items()
            )
            parts.append(self.call_head_at(name, first + i) + params + self.call_tail)
        return self.opener_text() + self.call_sep.join(parts) + self.region_close

    def call_head_at(self, name: str, index: int) -> str:
        """The head of the call at `index` (numbered formats write it)."""
        return self.call_head(name)

    # A scalar that is not a string written as Python writes it (`True`, `None`), where the
    # template writes values with `| string` (Qwen3-Coder, Qwen3.5, Seed-OSS).
    python_scalars = False

    def value_rules(self, rule: str, sub: dict[str, Any], root: dict[str, Any]) -> list[str]:
        """Rules for a value that is not a raw string: JSON, or a Python scalar."""
        if self.python_scalars and sub.get("type") == "boolean" and "enum" not in sub:
            return [f'{rule}: "True" | "False"']
        if self.python_scalars and sub.get("type") == "null":
            return [f'{rule}: "None"']
        return json_value(rule, sub, root)

    def value_text(self, value: Any) -> str:
        """A parameter's value as written: strings raw, anything else as JSON (or Python)."""
        if isinstance(value, str):
            return value
        if self.python_scalars and (isinstance(value, bool) or value is None):
            return str(value)
        return json.dumps(value, ensure_ascii=False)


class QwenXmlFormat(XmlParamsFormat):
    """Qwen3-Coder / Qwen3.5 XML parameters:
    `<tool_call>\\n<function=NAME>\\n<parameter=k>\\nv\\n</parameter>\\n</function>\\n</tool_call>`."""

    name = "qwen_xml"
    checked_against: ClassVar[tuple[str, ...]] = ("qwen3-coder.jinja", "qwen3.5.jinja")
    opener = "<tool_call>"
    call_sep = "\n<tool_call>"
    param_close = "\n</parameter>\n"
    call_tail = "</function>\n</tool_call>"
    call_re = re.compile(rf"\s*<function=(?P<name>{_NAME})>\n?(?P<body>.*?)</function>", re.DOTALL)
    param_re = re.compile(
        rf"<parameter=(?P<key>{_NAME})>\n?(?P<value>.*?)\n?</parameter>", re.DOTALL
    )
    stream_closer = "</tool_call>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<function=" in template and "<parameter=" in template

    def layouts(self) -> list[dict[str, Any]]:
        python = "True, False and None written as Python writes them"
        return [{"python_scalars": True, "_describe": python}, {"python_scalars": False}]

    def call_head(self, name: str) -> str:
        return f"\n<function={name}>\n"

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        return f"<parameter={key}>\n"

    def calls_as_text(self, calls: list[RawCall]) -> str:
        # each call in a region of its own, as the template writes them
        one = super().calls_as_text
        return "\n".join(one([c]) for c in calls)


class SeedXmlFormat(QwenXmlFormat):
    """Seed-OSS: `<seed:tool_call>\\n<function=NAME>\\n<parameter=k>v</parameter>\\n
    </function>\\n</seed:tool_call>`, one region per call (its template writes them so)."""

    name = "seed_xml"
    checked_against = ("seed-oss.jinja",)
    opener = "<seed:tool_call>"
    call_sep = "\n<seed:tool_call>"
    param_close = "</parameter>\n"
    call_tail = "</function>\n</seed:tool_call>"
    param_re = re.compile(rf"<parameter=(?P<key>{_NAME})>(?P<value>.*?)</parameter>", re.DOTALL)
    stream_closer = "</seed:tool_call>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<seed:tool_call>" in template and "<function=" in template

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        return f"<parameter={key}>"


class MiniMaxFormat(XmlParamsFormat):
    """MiniMax M2: `<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter
    name="k">v</parameter>\\n</invoke>\\n</minimax:tool_call>`."""

    name = "minimax"
    checked_against = ("minimax-m2.jinja",)
    opener = "<minimax:tool_call>"
    region_close = "</minimax:tool_call>"
    param_close = "</parameter>\n"
    call_tail = "</invoke>\n"
    call_re = re.compile(r'<invoke name="(?P<name>[^"]+)">\n?(?P<body>.*?)</invoke>', re.DOTALL)
    param_re = re.compile(r'<parameter name="(?P<key>[^"]+)">(?P<value>.*?)</parameter>', re.DOTALL)

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<minimax:tool_call>" in template

    def call_head(self, name: str) -> str:
        return f'<invoke name="{name}">\n'

    def region_lark(self, parallel: bool) -> str:
        return '"\\n" ' + super().region_lark(parallel)

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        return f'<parameter name="{key}">'

    def calls_as_text(self, calls: list[RawCall]) -> str:
        text = super().calls_as_text(calls)
        return text.replace(self.opener, self.opener + "\n", 1)


class DsmlFormat(XmlParamsFormat):
    """DeepSeek V3.2 DSML: `<｜DSML｜function_calls>\\n<｜DSML｜invoke
    name="NAME">\\n<｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter>…`."""

    name = "deepseek_dsml"
    checked_against = ("deepseek-v3.2.jinja",)
    opener = "<｜DSML｜function_calls>"
    region_close = "</｜DSML｜function_calls>"
    param_close = "</｜DSML｜parameter>\n"
    call_tail = "</｜DSML｜invoke>\n"
    call_re = re.compile(
        r'<｜DSML｜invoke name="(?P<name>[^"]+)">\n?(?P<body>.*?)</｜DSML｜invoke>', re.DOTALL
    )
    param_re = re.compile(
        r'<｜DSML｜parameter name="(?P<key>[^"]+)" string="(?P<kind>true|false)">'
        r"(?P<value>.*?)</｜DSML｜parameter>",
        re.DOTALL,
    )

    @classmethod
    def detect(cls, template: str) -> bool:
        return "DSML" in template and "invoke" in template

    def region_lark(self, parallel: bool) -> str:
        return '"\\n" ' + super().region_lark(parallel)

    def call_head(self, name: str) -> str:
        return f'<｜DSML｜invoke name="{name}">\n'

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        return (
            f'<｜DSML｜parameter name="{key}" string="{"true" if is_raw_string(sub) else "false"}">'
        )

    def read(self, text: str, kind: str | None, sub: dict[str, Any] | None) -> Any:
        return text if kind == "true" else read_value(text, None)

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return super().calls_as_text(calls).replace(self.opener, self.opener + "\n", 1)


_XTML_TYPES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "object",
    "array": "array",
}


def _xtml_type(sub: dict[str, Any]) -> str:
    if is_raw_string(sub):
        return "string"
    kind = sub.get("type")
    if isinstance(kind, list) and kind:
        kind = kind[0]
    return _XTML_TYPES.get(kind if isinstance(kind, str) else "", "object")


class KimiK3Format(XmlParamsFormat):
    """Kimi K3 XTML: `<|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|>
    <|open|>argument key="k" type="string"<|sep|>v<|close|>argument<|sep|>…`."""

    name = "kimi_xtml"
    numbered = True
    checked_against = ("kimi-k3.jinja",)
    opener = "<|close|>response<|sep|><|open|>tools<|sep|>"
    region_close = "<|close|>tools<|sep|>"
    param_close = "<|close|>argument<|sep|>"
    call_tail = "<|close|>call<|sep|>"
    call_re = re.compile(
        r'<\|open\|>call tool="(?P<name>[^"]+)"(?: index="\d+")?<\|sep\|>'
        r"(?P<body>.*?)<\|close\|>call<\|sep\|>",
        re.DOTALL,
    )
    param_re = re.compile(
        r'<\|open\|>argument key="(?P<key>[^"]+)" type="(?P<kind>[a-z]+)"<\|sep\|>'
        r"(?P<value>.*?)<\|close\|>argument<\|sep\|>",
        re.DOTALL,
    )

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|open|>" in template and "'argument'" in template

    def call_head_lark(self, tool_name: str) -> str:
        # The call's index (1, 2, … within the reply, as the template numbers them).
        head = self.lark_text(f'<|open|>call tool="{tool_name}" index="')
        return f"{head} {CALL_INDEX} {self.lark_text(chr(34) + '<|sep|>')}"

    def call_head(self, name: str) -> str:
        return self.call_head_at(name, 1)

    def call_head_at(self, name: str, index: int) -> str:
        return f'<|open|>call tool="{name}" index="{index}"<|sep|>'

    def first_call_index(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return 1  # each reply's calls count from 1

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        return f'<|open|>argument key="{key}" type="{_xtml_type(sub)}"<|sep|>'

    def read(self, text: str, kind: str | None, sub: dict[str, Any] | None) -> Any:
        return text if kind == "string" else read_value(text, None)


class GlmFormat(XmlParamsFormat):
    """GLM-4.5/4.6:
    `<tool_call>NAME\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>`."""

    name = "glm"
    checked_against = ("glm-4.5.jinja", "glm-4.6.jinja")
    opener = "<tool_call>"
    call_sep = "\n<tool_call>"
    param_close = "</arg_value>\n"
    call_tail = "</tool_call>"
    call_re = re.compile(
        rf"\s*(?P<name>{_NAME})\s*(?P<body>(?:<arg_key>.*?)?)</tool_call>", re.DOTALL
    )
    param_re = re.compile(
        r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL
    )
    stream_closer = "</tool_call>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<arg_key>" in template

    name_sep = "\n"  # after the call's name

    def layouts(self) -> list[dict[str, Any]]:
        tight = "no newline after the name or between arguments (GLM-4.5's llama.cpp layout)"
        return [{}, {"name_sep": "", "param_close": "</arg_value>", "_describe": tight}]

    def call_head(self, name: str) -> str:
        return f"{name}{self.name_sep}"

    def param_head(self, key: str, sub: dict[str, Any]) -> str:
        return f"<arg_key>{key}</arg_key>\n<arg_value>"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        calls = []
        for chunk in region.split("<tool_call>"):
            found = super().parse_region(chunk, schemas)
            if not found:
                return None
            calls += found
        return calls or None

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "\n".join(super(GlmFormat, self).calls_as_text([c]) for c in calls)
