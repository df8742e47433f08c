"""Mistral's call syntaxes, one per generation of its templates.

Mistral v0.3 / Nemo / Small 3.1 write a JSON list after `[TOOL_CALLS]` (call ids of nine
letters and digits); Magistral writes `[TOOL_CALLS]NAME[ARGS]{…}` per call; Mistral Small
3.2 adds the id, `[TOOL_CALLS]NAME[CALL_ID]id[ARGS]{…}`.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import uuid
from typing import Any, ClassVar

from engine.tools.formats.base import (
    RawCall,
    Schemas,
    ToolFormat,
    as_call,
    decode_objects,
    json_arguments,
    lit,
    text_then,
)
from engine.tools.formats.region import RegionFormat


def short_id(call_id: Any) -> str:
    """A nine-character alphanumeric id for `call_id`, stable (Mistral templates insist)."""
    text = str(call_id or "")
    if len(text) == 9 and text.isalnum():
        return text
    return uuid.uuid5(uuid.NAMESPACE_OID, text).hex[:9]


def short_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                dict(c, id=short_id(c.get("id"))) for c in message["tool_calls"]
            ]
        if message.get("role") == "tool":
            message["tool_call_id"] = short_id(message.get("tool_call_id"))
        out.append(message)
    return out


def nine_char_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(9))


class MistralFormat(ToolFormat):
    """Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`, call ids of nine
    letters and digits."""

    name = "mistral"
    checked_against = ("mistral-nemo.jinja", "mistral-small-3.1.jinja")
    marker_text = "[TOOL_CALLS]"

    @property
    def gap(self) -> str:
        """What the template writes between the marker and the list (Nemo: nothing)."""
        return "" if "[TOOL_CALLS][" in self._template else " "

    call_start = "[TOOL_CALLS]"
    stream_openers = (("[TOOL_CALLS]", True),)
    stream_leading_openers = (("[{", False),)
    stream_closer = "]"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "[TOOL_CALLS]" in template

    def __init__(self, tokenizer: Any, native: bool) -> None:
        super().__init__(tokenizer, native)
        # Templates that write each call's id (Nemo, v0.3): the model writes one too, and
        # the calls then stream whole, so the id they stream with is the model's.
        self.with_ids = '"id": "' in self._template
        self.json_objects = not self.with_ids  # type: ignore[misc]

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        if not self.with_ids:
            return super().call_lark(tool_name, args_rule)
        # the id the template writes back (and results refer to): the model's own
        head = '{"name": ' + json.dumps(tool_name) + ', "arguments": '
        return f'{lit(head)} {args_rule} ", \\"id\\": \\"" /[A-Za-z0-9]{{9}}/ "\\"}}"'

    def call_ids(self, text: str) -> list[str]:
        return re.findall(r'"id": "([A-Za-z0-9]{9})"', text) if self.with_ids else []

    def reply_lark(self, required: bool, parallel: bool) -> str:
        opener = self.marker("[TOOL_CALLS]")
        more = ' (", " fn)*' if parallel else ""
        block = f'{lit(self.gap + "[")} fn{more} "]"'
        if required:
            return f"start: {opener.lark()} {block}\n"
        head, rules = text_then(opener)
        tail, *rest = rules
        return (
            "\n".join(
                [
                    f"start: TAIL | {head} block",
                    f"block: {block}",
                    # Text may not look like a call list either: parse() accepts one without the
                    # marker, for detokenizers that drop special tokens.
                    f"{tail} & ~/\\s*\\[\\{{(?s:.*)/",
                    *rest,
                ]
            )
            + "\n"
        )

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        index = text.find("[TOOL_CALLS]")
        if index >= 0:
            before, rest = text[:index], text[index + len("[TOOL_CALLS]") :]
        elif text.lstrip().startswith('[{"name"'):
            before, rest = "", text  # the marker was dropped as a special token
        else:
            return text.strip(), []
        values, end = decode_objects(rest, 0, "")
        if not values or not isinstance(values[0], list):
            return text.strip(), []
        calls = [as_call(v, ("arguments", "parameters")) for v in values[0]]
        if not calls or any(c is None for c in calls):
            return text.strip(), []
        return (before + rest[end:]).strip(), [c for c in calls if c is not None]

    def call_json(self, name: str, arguments: dict[str, Any]) -> str:
        if not self.with_ids:
            return super().call_json(name, arguments)
        call = {"name": name, "arguments": arguments, "id": nine_char_id()}
        return json.dumps(call, ensure_ascii=False)

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return (
            "[TOOL_CALLS]"
            + self.gap
            + "["
            + ", ".join(self.call_json(n, a) for n, a in calls)
            + "]"
        )

    def new_call_id(self) -> str:
        return nine_char_id()

    def adapt_history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return short_ids(messages)


class MistralArgsFormat(RegionFormat):
    """Magistral: `[TOOL_CALLS]NAME[ARGS]{…}`, one block per call."""

    name = "mistral_args"
    checked_against = ("magistral-small-2509.jinja",)
    opener = "[TOOL_CALLS]"
    marker_text = "[ARGS]"
    with_id: ClassVar[bool] = False
    _call = re.compile(r"\s*(?P<name>[^\s\[\]{}]+)(?:\[CALL_ID\](?P<id>[A-Za-z0-9]+))?\[ARGS\]")

    @classmethod
    def detect(cls, template: str) -> bool:
        return "[ARGS]" in template and "[CALL_ID]" not in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        head = lit(tool_name)
        if self.with_id:
            head += f" {self.lark_text('[CALL_ID]')} /[A-Za-z0-9]{{9}}/"
        return f"{head} {self.lark_text('[ARGS]')} {args_rule}"

    def region_lark(self, parallel: bool) -> str:
        return f"fn ({self.lark_text(self.opener)} fn)*" if parallel else "fn"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        calls: list[RawCall] = []
        for chunk in region.split(self.opener):
            found = self._call.match(chunk)
            if found is None:
                return None
            values, end = decode_objects(chunk, found.end(), "")
            arguments = json_arguments(values[0]) if values else None
            if arguments is None:
                return None
            calls.append((found.group("name"), arguments))
        return calls

    def calls_as_text(self, calls: list[RawCall]) -> str:
        middle = "[CALL_ID]" + nine_char_id() if self.with_id else ""
        return "".join(
            f"[TOOL_CALLS]{n}{middle}[ARGS]{json.dumps(a, ensure_ascii=False)}" for n, a in calls
        )

    def new_call_id(self) -> str:
        return nine_char_id()

    def call_ids(self, text: str) -> list[str]:
        return re.findall(r"\[CALL_ID\]([A-Za-z0-9]+)\[ARGS\]", text) if self.with_id else []

    def adapt_history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return short_ids(messages)


class MistralCallIdFormat(MistralArgsFormat):
    """Mistral Small 3.2: `[TOOL_CALLS]NAME[CALL_ID]id[ARGS]{…}`."""

    name = "mistral_call_id"
    checked_against = ("mistral-small-3.2.jinja",)
    with_id = True

    @classmethod
    def detect(cls, template: str) -> bool:
        return "[ARGS]" in template and "[CALL_ID]" in template
