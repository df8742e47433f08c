"""Calls as JSON objects inside the family's tags.

Hermes / Qwen2.5 / Qwen3 / Granite 4 (`<tool_call>{…}</tool_call>`, also the fallback for
templates without tools), Phi-4-mini (`<|tool_call|>{…}<|/tool_call|>`), and the JSON lists
of Granite 3.3 (`<|tool_call|>[…]`), LFM2 (`<|tool_call_start|>[…]<|tool_call_end|>`),
Nemotron (`<TOOLCALL>[…]</TOOLCALL>`), Apriel (`<tool_calls>[…]</tool_calls>`), Command R7B
(`<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>`) and Apertus
(`<|tools_prefix|>[{"NAME": {…}}]<|tools_suffix|>`). Arguments are JSON, held to the
tool's schema by llguidance's `%json`.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from engine.tools.formats.base import (
    CALL_INDEX,
    RawCall,
    Schemas,
    ToolFormat,
    as_call,
    decode_objects,
    lit,
    text_then,
)
from engine.tools.formats.region import RegionFormat, json_region_calls


class HermesFormat(ToolFormat):
    """Hermes / Qwen: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`.

    Also the fallback for templates without tool support (tools go in the system prompt).
    """

    name = "hermes"
    checked_against = (
        "hermes-3-llama-3.1.jinja",
        "qwen2.5.jinja",
        "qwen3.jinja",
        "qwq.jinja",
        "granite-4.0.jinja",
    )
    call_start = "<tool_call>"
    marker_text = "<tool_call>"
    stream_openers = (("<tool_call>", True),)
    stream_closer = "</tool_call>"
    result_markers = ("<tool_response>", "</tool_response>")

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<tool_call>" in template

    def reply_lark(self, required: bool, parallel: bool) -> str:
        opener = self.marker("<tool_call>")
        close = self.marker("</tool_call>")
        if required:
            # Calls only, and the reply ends after the last (as the template writes it back).
            more = ' ("\\n" call)*' if parallel else ""
            return f'start: call{more}\ncall: {opener.lark()} "\\n" fn "\\n" {close.lark()}\n'
        # Free text runs until the opener, then the call is constrained. The final text
        # may not contain the opener, so a call can never slip through as free text.
        head, rules = text_then(opener)
        return (
            "\n".join(
                [
                    f"start: call{'*' if parallel else '?'} tail",
                    "tail: TAIL",
                    f'call: {head} "\\n" fn "\\n" {close.lark()}',
                    *rules,
                ]
            )
            + "\n"
        )

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        calls: list[RawCall] = []
        kept: list[str] = []
        pos = 0
        for match in re.finditer(r"<tool_call>\s*(.*?)\s*</tool_call>", text, re.DOTALL):
            values, end = decode_objects(match.group(1), 0, "")
            call = as_call(values[0], ("arguments", "parameters")) if values else None
            if call is None or match.group(1)[end:].strip():
                continue  # not a call: leave the markup in the text
            calls.append(call)
            kept.append(text[pos : match.start()])
            pos = match.end()
        kept.append(text[pos:])
        return "".join(kept).strip(), calls

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "\n".join(
            f"<tool_call>\n{self.call_json(name, args)}\n</tool_call>" for name, args in calls
        )


class JsonListFormat(RegionFormat):
    """Base: `opener[{"name": …, "arguments": {…}}, …]closer` (`list_open` "[" or "")."""

    json_objects = True
    list_open: ClassVar[str] = "["
    list_sep: ClassVar[str] = ", "
    list_close: ClassVar[str] = "]"
    closer: ClassVar[str] = ""

    def __init__(self, tokenizer: Any, native: bool) -> None:
        super().__init__(tokenizer, native)
        self.stream_closer = self.closer or None  # type: ignore[misc]

    def region_lark(self, parallel: bool) -> str:
        close = f" {self.lark_text(self.closer)}" if self.closer else ""
        calls = self.calls_lark(lit(self.list_sep), parallel)
        return f"{lit(self.list_open)} {calls} {lit(self.list_close)}{close}"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        return json_region_calls(region, "", self.closer)

    def calls_as_text(self, calls: list[RawCall]) -> str:
        if self.numbered:
            return super().calls_as_text(calls)
        body = self.list_sep.join(self.call_json(n, a) for n, a in calls)
        return f"{self.opener_text()}{self.list_open}{body}{self.list_close}{self.closer}"


class Granite33Format(JsonListFormat):
    """Granite 3.3: `<|tool_call|>[{"name": …, "arguments": {…}}]`."""

    name = "granite"
    checked_against = ("granite-3.3.jinja",)
    opener = "<|tool_call|>"
    history_as_text = True  # the template does not render past calls

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|tool_call|>" in template and "<|start_of_role|>" in template


class Phi4Format(JsonListFormat):
    """Phi-4-mini: `<|tool_call|>{"name": …, "arguments": {…}}<|/tool_call|>`."""

    name = "phi4"
    checked_against = ("phi-4-mini.jinja",)
    opener = "<|tool_call|>"
    closer = "<|/tool_call|>"
    list_open = list_close = ""

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|tool_call|>" in template and "<|/tool_call|>" in template

    def region_lark(self, parallel: bool) -> str:
        one = f"fn {self.lark_text(self.closer)}"
        return f"{one} ({self.lark_text(self.opener)} {one})*" if parallel else one

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        calls = []
        for chunk in region.split(self.opener):
            found = json_region_calls(chunk, "", self.closer)
            if not found:
                return None
            calls += found
        return calls

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "".join(f"{self.opener}{self.call_json(n, a)}{self.closer}" for n, a in calls)


class Lfm2Format(JsonListFormat):
    """LFM2: `<|tool_call_start|>[{"name": …, "arguments": {…}}]<|tool_call_end|>`."""

    name = "lfm2"
    checked_against = ("lfm2-llamacpp.jinja",)
    opener = "<|tool_call_start|>"
    closer = "<|tool_call_end|>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|tool_call_start|>" in template


class NemotronFormat(JsonListFormat):
    """Nemotron: `<TOOLCALL>[{"name": …, "arguments": {…}}]</TOOLCALL>`."""

    name = "nemotron"
    checked_against = ("nemotron-nano-v2.jinja",)
    opener = "<TOOLCALL>"
    closer = "</TOOLCALL>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<TOOLCALL>" in template


class AprielFormat(JsonListFormat):
    """Apriel: `<tool_calls>[{"name": …, "arguments": {…}}]</tool_calls>`."""

    name = "apriel"
    checked_against = ("apriel-1.6-thinker.jinja",)
    opener = "<tool_calls>"
    closer = "</tool_calls>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<tool_calls>" in template


class CommandR7BFormat(JsonListFormat):
    """Command R7B: `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": …, "parameters":
    {…}}]<|END_ACTION|>`."""

    name = "command_r7b"
    json_objects = False
    numbered = True  # the template numbers every call of the conversation from 0
    checked_against = ("command-r7b.jinja",)
    opener = "<|START_ACTION|>"
    closer = "<|END_ACTION|>"
    list_open, list_sep, list_close = "[\n    ", ",\n    ", "\n]"
    args_key = "parameters"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|START_ACTION|>" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        head = lit('{"tool_call_id": "')
        name = lit('", "tool_name": ' + json.dumps(tool_name) + ', "parameters": ')
        return f"{head} {CALL_INDEX} {name} {args_rule} {lit('}')}"

    def numbered_calls_text(self, calls: list[RawCall], first: int) -> str:
        body = self.list_sep.join(
            json.dumps(
                {"tool_call_id": str(first + i), "tool_name": n, "parameters": a},
                ensure_ascii=False,
            )
            for i, (n, a) in enumerate(calls)
        )
        return f"{self.opener}{self.list_open}{body}{self.list_close}{self.closer}"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        return json_region_calls(region, "", self.closer, "tool_name", ("parameters",))


class ApertusFormat(JsonListFormat):
    """Apertus: `<|tools_prefix|>[{"NAME": {…}}]<|tools_suffix|>`."""

    name = "apertus"
    checked_against = ("apertus.jinja",)
    json_objects = False
    history_arguments = "string"
    opener = "<|tools_prefix|>"
    closer = "<|tools_suffix|>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|tools_prefix|>" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        return f"{lit('{' + json.dumps(tool_name) + ': ')} {args_rule} {lit('}')}"

    def call_json(self, name: str, arguments: dict[str, Any]) -> str:
        return json.dumps({name: arguments}, ensure_ascii=False)

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        values, stop = decode_objects(region, 0, "")
        if (
            not values
            or not isinstance(values[0], list)
            or not region[stop:].lstrip().startswith(self.closer)
        ):
            return None
        calls: list[RawCall] = []
        for item in values[0]:
            if not (isinstance(item, dict) and len(item) == 1):
                return None
            ((name, arguments),) = item.items()
            if not isinstance(arguments, dict):
                return None
            calls.append((name, arguments))
        return calls

    def adapt_tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The template reads each tool's name, description and parameters at the top.
        return [t.get("function", t) for t in super().adapt_tools(tools)]
