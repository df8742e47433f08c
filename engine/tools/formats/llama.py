"""Llama 3.x's JSON calls and Functionary v3.2's `>>>NAME` calls (Llama 3 headers).

Pythonic lists (Llama 4) are in pythonic.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.tools.formats.base import (
    TEXT,
    RawCall,
    Schemas,
    ToolFormat,
    as_call,
    calls_into_text,
    decode_objects,
    json_arguments,
    lit,
)


class Llama3JsonFormat(ToolFormat):
    """Llama 3.1/3.2 JSON calls: the whole reply is `{"name": ..., "parameters": {...}}`
    (several joined by "; "); ends with `<|eot_id|>` or `<|eom_id|>`. (A reply read back
    may start with `<|python_tag|>`, which the built-in tools' calls begin with.)"""

    name = "llama3_json"
    checked_against = ("llama-3.2.jinja", "llama-3.3.jinja")
    call_start = '{"name": '
    marker_text = '{"name": '
    args_key = "parameters"
    stream_leading_openers = (("<|python_tag|>", True), ("{", False))

    @classmethod
    def detect(cls, template: str) -> bool:
        return (
            "<|start_header_id|>" in template
            and "tools" in template
            and ('"parameters": ' in template or "ipython" in template)
        )

    def reply_lark(self, required: bool, parallel: bool) -> str:
        # Bare JSON, as the template renders a past call (`<|python_tag|>` opens calls of
        # the built-in tools, which are code, not JSON).
        more = ' ("; " fn)*' if parallel else ""
        calls = f"calls: fn{more}\n"
        if required:
            return f"start: calls\n{calls}"
        # A text reply may not start with "{" (or blanks before one): that is a call.
        return f"start: TEXT | calls\nTEXT: /([^{{\\s](.|\\n)*)?/\n{calls}"

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        body = text.strip()
        if body.startswith("<|python_tag|>"):
            body = body[len("<|python_tag|>") :].lstrip()
        if not body.startswith("{"):
            return text.strip(), []
        values, end = decode_objects(body, 0, ";")
        calls = [as_call(v, ("parameters", "arguments")) for v in values]
        if not calls or any(c is None for c in calls):
            return text.strip(), []
        return body[end:].strip(), [c for c in calls if c is not None]

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "; ".join(self.call_json(name, args) for name, args in calls)

    def adapt_history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Llama templates raise on more than one call per turn; write those as text.
        several = [m for m in messages if len(m.get("tool_calls") or []) > 1]
        return calls_into_text(self, messages) if several else messages


class FunctionaryFormat(ToolFormat):
    """Functionary v3.2: `>>>NAME\\n{…}` per call (the prompt ends with `>>>`), text as
    `>>>all\\n…`."""

    name = "functionary"
    checked_against = ("functionary-v3.2.jinja",)
    call_start = ""
    marker_text = ">>>"
    json_objects = False
    history_arguments = "string"
    stream_openers = ((">>>", True),)
    stream_content_waits = True
    _call = re.compile(r"(?:^|>>>)\s*(?P<name>[^\s>]+)\n")

    @classmethod
    def detect(cls, template: str) -> bool:
        return ">>>all" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        return f"{lit(tool_name + chr(10))} {args_rule}"

    def reply_lark(self, required: bool, parallel: bool) -> str:
        more = ' (">>>" fn)*' if parallel else ""
        if required:
            return f"start: fn{more}\n"
        # Text is `all` then free text; calls may follow it.
        return (
            f'start: "all\\n" TAIL (">>>" fn{more})? | fn{more}\n'
            f"TAIL: {TEXT} & ~/(?s:.*)>>>(?s:.*)/\n"
        )

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        body = text.lstrip()
        content = ""
        if body.startswith("all\n"):
            content, _, body = body[4:].partition(">>>")
            if not body:
                return content.strip(), []
        calls: list[RawCall] = []
        for chunk in body.split(">>>"):
            name, newline, rest = chunk.partition("\n")
            values, end = decode_objects(rest, 0, "")
            arguments = json_arguments(values[0]) if values and newline else None
            if arguments is None or not name.strip() or rest[end:].strip():
                return text.strip(), []
            calls.append((name.strip(), arguments))
        return content.strip(), calls

    def text_reply(self, text: str) -> str:
        return f"all\n{text}"

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return ">>>".join(f"{n}\n{json.dumps(a, ensure_ascii=False)}" for n, a in calls)
