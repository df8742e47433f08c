"""Command R+'s `Action:` block: a JSON list of `{"tool_name", "parameters"}` in a fence.

The template (CohereForAI/c4ai-command-r-plus, its `tool_use` template, as llama.cpp's
`models/templates/CohereForAI-c4ai-command-r-plus-tool_use.jinja` carries it) writes a
past call turn as its text, then (newlines shown as written)

    \\nAction:\\n```json\\n[\\n    {\\n        "tool_name": "NAME",
    \\n        "parameters": {…}\\n    }\\n]```\\n

with the parameters as `tojson(indent=4)|indent(8)` lays them out (one key a line), so the
grammar writes them in that layout too and the call renders back as written. Command R7B's
`<|START_ACTION|>` list is json_tags.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.tools.formats.base import RawCall, Schemas, lit
from engine.tools.formats.region import RegionFormat, json_region_calls
from engine.tools.formats.values import IndentedJson

OPENER = "Action:\n```json\n"  # after a newline, which the grammar writes
CALL_HEAD = '    {\n        "tool_name": '
ARGS_HEAD = ',\n        "parameters": '
CALL_TAIL = "\n    }"
CLOSE = "\n]```\n"
PARAMETERS = IndentedJson(step=4, base=8)


class CommandRPlusFormat(RegionFormat):
    """Command R+: `Action:` then a fenced JSON list of `{"tool_name": …, "parameters":
    {…}}`, one key a line."""

    name = "command_r_plus"
    opener = OPENER
    checked_against = ("command-r-plus.jinja",)
    stream_closer = CLOSE

    @classmethod
    def detect(cls, template: str) -> bool:
        return "\\nAction:\\n```json" in template and '"tool_name": ' in template

    def written_opener(self) -> str:
        return "\n" + OPENER

    def call_rules(self, rule: str, tool_name: str, schema: dict[str, Any]) -> list[str]:
        head = lit(CALL_HEAD + json.dumps(tool_name) + ARGS_HEAD)
        args = f"{rule}_args"
        return [
            f"{rule}: {head} {args} {lit(CALL_TAIL)}",
            *PARAMETERS.rules(args, schema, schema),
        ]

    def region_lark(self, parallel: bool) -> str:
        return f"{lit('[' + chr(10))} {self.calls_lark(lit(',' + chr(10)), parallel)} {lit(CLOSE)}"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        if not re.search(r"\]\s*```", region):
            return None
        return json_region_calls(region, "", "```", "tool_name", ("parameters",))

    def calls_as_text(self, calls: list[RawCall]) -> str:
        written = ",\n".join(
            CALL_HEAD
            + json.dumps(name, ensure_ascii=False)
            + ARGS_HEAD
            + (PARAMETERS.write(arguments) if arguments else "{}")
            + CALL_TAIL
            for name, arguments in calls
        )
        return f"\n{OPENER}[\n{written}{CLOSE}"
