"""Kimi K2: `<|tool_calls_section_begin|>
<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`.

The call's id is part of the syntax (`functions.NAME:N`, N counting the conversation's
calls): the grammar writes each call's N, and history ids are rewritten to that shape (the
same numbers) so results refer to them. The first K2 template renders no past calls: they
are written into the turn's text (fitting finds that). (K3: xml_params.py.)

Checked against moonshotai/Kimi-K2-Instruct's first template and Kimi-K2-Thinking's, as
llama.cpp's `models/templates` carries them (`moonshotai-Kimi-K2.jinja`,
`moonshotai-Kimi-K2-Thinking.jinja`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.tools.formats.base import CALL_INDEX, RawCall, Schemas, json_arguments, lit
from engine.tools.formats.region import RegionFormat

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGS_BEGIN, CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
_CALL = re.compile(
    re.escape(CALL_BEGIN)
    + r"\s*(?:functions\.)?(?P<name>[^\s:<]+)(?::\d+)?\s*"
    + re.escape(ARGS_BEGIN)
    + r"(?P<args>.*?)"
    + re.escape(CALL_END),
    re.DOTALL,
)


class KimiK2Format(RegionFormat):
    """Kimi K2: `<|tool_calls_section_begin|>
    <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`."""

    name = "kimi_k2"
    opener = SECTION_BEGIN
    numbered = True
    checked_against = ("kimi-k2.jinja", "kimi-k2-thinking.jinja")

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|im_middle|>" in template and "tool" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        head = f"{self.lark_text(CALL_BEGIN)} {lit(f'functions.{tool_name}:')} {CALL_INDEX}"
        return f"{head} {self.lark_text(ARGS_BEGIN)} {args_rule} {self.lark_text(CALL_END)}"

    def region_lark(self, parallel: bool) -> str:
        return f"{self.calls_lark('', parallel)} {self.lark_text(SECTION_END)}"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        if SECTION_END not in region:
            return None
        calls: list[RawCall] = []
        for match in _CALL.finditer(region):
            arguments = json_arguments(match.group("args"))
            if arguments is None:
                return None
            calls.append((match.group("name"), arguments))
        return calls or None

    def call_ids(self, text: str) -> list[str]:
        found = re.findall(re.escape(CALL_BEGIN) + r"\s*(functions\.[^\s:<]+:\d+)", text)
        return [str(f) for f in found]

    def numbered_calls_text(self, calls: list[RawCall], first: int) -> str:
        body = "".join(
            f"{CALL_BEGIN}functions.{n}:{first + i}{ARGS_BEGIN}"
            f"{json.dumps(a, ensure_ascii=False)}{CALL_END}"
            for i, (n, a) in enumerate(calls)
        )
        return SECTION_BEGIN + body + SECTION_END

    def adapt_history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ids: dict[str, str] = {}
        out = []
        for message in messages:
            message = dict(message)
            if message.get("tool_calls"):
                calls = []
                for call in message["tool_calls"]:
                    kimi = f"functions.{call['function']['name']}:{len(ids)}"
                    ids[str(call.get("id"))] = kimi
                    calls.append({**call, "id": kimi})
                message["tool_calls"] = calls
            if message.get("role") == "tool":
                message["tool_call_id"] = ids.get(
                    str(message.get("tool_call_id")), message.get("tool_call_id")
                )
            out.append(message)
        return out
