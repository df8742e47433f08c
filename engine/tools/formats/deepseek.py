"""DeepSeek's call syntaxes: R1 (and its distills) and V3/V3.1.

R1: `<｜tool▁calls▁begin｜>
<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{…}\\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`;
V3.1: `<｜tool▁calls▁begin｜>
<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`.
Both templates want history arguments as a JSON string. (V3.2's DSML: xml_params.py.)
"""

from __future__ import annotations

import re
from typing import ClassVar

from engine.tools.formats.base import RawCall, Schemas, json_arguments, lit
from engine.tools.formats.region import RegionFormat

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


class DeepSeekV31Format(RegionFormat):
    """DeepSeek V3/V3.1: `<｜tool▁calls▁begin｜>
    <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`."""

    name = "deepseek_v3"
    checked_against = ("deepseek-v3.1.jinja",)
    opener = CALLS_BEGIN
    history_arguments = "string"
    head: ClassVar[str] = ""  # before the name
    args_open: ClassVar[str] = SEP
    args_close: ClassVar[str] = ""
    _call = re.compile(
        re.escape(CALL_BEGIN) + r"(?:function" + re.escape(SEP) + r")?(?P<name>[^\s<]+?)\s*"
        r"(?:"
        + re.escape(SEP)
        + r")?\s*(?:```json\s*)?(?P<args>\{.*?\})\s*(?:```\s*)?"
        + re.escape(CALL_END),
        re.DOTALL,
    )

    @classmethod
    def detect(cls, template: str) -> bool:
        return "tool▁sep" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        parts = [
            self.lark_text(CALL_BEGIN + self.head),
            lit(tool_name),
            self.lark_text(self.args_open),
        ]
        parts += [args_rule]
        if self.args_close:
            parts.append(self.lark_text(self.args_close))
        parts.append(self.lark_text(CALL_END))
        return " ".join(parts)

    def region_lark(self, parallel: bool) -> str:
        sep = lit("\n") + " " if self.head else ""
        more = f" ({sep}fn)*" if parallel else ""
        return f"fn{more} {self.lark_text(CALLS_END)}"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        if CALLS_END not in region:
            return None
        calls: list[RawCall] = []
        for match in self._call.finditer(region.split(CALLS_END, 1)[0]):
            arguments = json_arguments(match.group("args"))
            if arguments is None:
                return None
            calls.append((match.group("name"), arguments))
        return calls or None

    def calls_as_text(self, calls: list[RawCall]) -> str:
        import json

        body = ("\n" if self.head else "").join(
            f"{CALL_BEGIN}{self.head}{n}{self.args_open}{json.dumps(a, ensure_ascii=False)}"
            f"{self.args_close}{CALL_END}"
            for n, a in calls
        )
        return CALLS_BEGIN + body + CALLS_END


class DeepSeekR1Format(DeepSeekV31Format):
    """DeepSeek R1: `<｜tool▁calls▁begin｜>
    <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{…}\\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>`."""

    name = "deepseek_r1"
    checked_against = ("deepseek-r1-distill-qwen.jinja",)
    head = "function" + SEP
    args_open = "\n```json\n"
    args_close = "\n```"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "tool▁sep" in template and "```json" in template
