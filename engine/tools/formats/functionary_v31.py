"""Functionary v3.1 (Llama 3.1 style): `<function=NAME>{…}</function>` after the text.

Checked against meetkai/functionary-medium-v3.1's template as llama.cpp's
`models/templates/meetkai-functionary-medium-v3.1.jinja` carries it: Llama 3.1 headers,
a past call written `<function=NAME>` + its arguments as JSON text + `</function>` and the
turn ended with `<|eom_id|>`; its system prompt asks for one call at a time. (Its `python`
tool's `<|python_tag|>` code is not a JSON call: offered as a tool, it is called in this
syntax too. Functionary v3.2's `>>>NAME` calls are llama.py's.)
"""

from __future__ import annotations

import json
import re

from engine.tools.formats.base import RawCall, Schemas, decode_objects, json_arguments, lit
from engine.tools.formats.region import RegionFormat

OPEN, CLOSE = "<function=", "</function>"
_HEAD = re.compile(r"(?P<name>[^\s<>]+)>")


class FunctionaryV31Format(RegionFormat):
    """Functionary v3.1: `<function=NAME>{…}</function>`, one call at a time."""

    name = "functionary_v3_1"
    opener = OPEN
    parallel = False
    history_arguments = "string"
    checked_against = ("functionary-v3.1.jinja",)
    stream_closer = CLOSE

    @classmethod
    def detect(cls, template: str) -> bool:
        return (
            "<|start_header_id|>" in template
            and "<function=" in template
            and "<parameter=" not in template
        )

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        return f"{lit(tool_name + '>')} {args_rule} {lit(CLOSE)}"

    def region_lark(self, parallel: bool) -> str:
        return self.calls_lark(lit(OPEN), parallel)

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        calls: list[RawCall] = []
        for chunk in region.split(OPEN):
            head = _HEAD.match(chunk)
            if head is None:
                return None
            values, end = decode_objects(chunk, head.end(), "")
            arguments = json_arguments(values[0]) if values else None
            if arguments is None or not chunk[end:].lstrip().startswith(CLOSE):
                return None
            calls.append((head.group("name"), arguments))
        return calls

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "".join(
            f"{OPEN}{name}>{json.dumps(arguments, ensure_ascii=False)}{CLOSE}"
            for name, arguments in calls
        )
