"""MiroThinker: an MCP-style `<use_mcp_tool>` block, its tools described by server.

Checked against llama.cpp's `models/templates/MiroThinker-v1.jinja`. Its system prompt
describes the tools grouped by MCP server and asks for one call, at the end of the reply:

    <use_mcp_tool>\\n<server_name>SERVER</server_name>\\n<tool_name>NAME</tool_name>
    <arguments>\\n{…}\\n</arguments>\\n</use_mcp_tool>

(newlines between each part). The server is the template's own choice for the tool's name
(`render_tool_server`): names with `_sandbox`, `python` or starting `run_` are
`tool-python`, names with `_search` `search_and_scrape_webpage`, `scrape_and_extract_info`
`jina_scrape_llm_summary`, any other `generic-extras`; the grammar writes that one. The
template's code moves a past call into the turn's text in this same block (its leftover
`<tool_call>` rendering of `tool_calls` never runs for them), so the history gives calls as
text, after the turn's text and a newline, as the model wrote them. Tool results become
user turns; every assistant turn starts with its `<think>` block.
"""

from __future__ import annotations

import json
import re

from engine.tools.formats.base import RawCall, Schemas, json_arguments, lit
from engine.tools.formats.region import RegionFormat

OPEN, CLOSE = "<use_mcp_tool>", "\n</use_mcp_tool>"
_CALL = re.compile(
    r"\s*<server_name>(?P<server>[^<]*)</server_name>\s*<tool_name>(?P<name>[^<]+)</tool_name>"
    r"\s*<arguments>\s*(?P<args>.*?)\s*</arguments>",
    re.DOTALL,
)


def server_of(tool_name: str) -> str:
    """The MCP server MiroThinker's template files a tool under."""
    if "_sandbox" in tool_name or tool_name.startswith("run_") or "python" in tool_name:
        return "tool-python"
    if "_search" in tool_name:
        return "search_and_scrape_webpage"
    if tool_name == "scrape_and_extract_info":
        return "jina_scrape_llm_summary"
    return "generic-extras"


def _head(name: str) -> str:
    return f"\n<server_name>{server_of(name)}</server_name>\n<tool_name>{name}</tool_name>\n"


class MiroThinkerFormat(RegionFormat):
    """MiroThinker: `<use_mcp_tool>` with `<server_name>`, `<tool_name>` and JSON
    `<arguments>`, one call at the end of the reply."""

    name = "mirothinker"
    opener = OPEN
    parallel = False
    history_as_text = True
    text_before_calls = "\n"
    checked_against = ("mirothinker-v1.jinja",)
    stream_closer = CLOSE

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<use_mcp_tool>" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        head, tail = lit(_head(tool_name) + "<arguments>\n"), lit("\n</arguments>")
        return f"{head} {args_rule} {tail}"

    def region_lark(self, parallel: bool) -> str:
        return f"{self.calls_lark('', parallel)} {lit(CLOSE)}"

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        if CLOSE.strip() not in region:
            return None
        calls: list[RawCall] = []
        for match in _CALL.finditer(region.split(CLOSE.strip(), 1)[0]):
            arguments = json_arguments(match.group("args"))
            if arguments is None:
                return None
            calls.append((match.group("name").strip(), arguments))
        return calls or None

    def calls_as_text(self, calls: list[RawCall]) -> str:
        body = "".join(
            f"{_head(n)}<arguments>\n{json.dumps(a, ensure_ascii=False)}\n</arguments>"
            for n, a in calls
        )
        return f"{OPEN}{body}{CLOSE}"
