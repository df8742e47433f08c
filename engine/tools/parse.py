"""Turn a finished reply into its text and its tool calls (engine.types.ToolCall)."""

from __future__ import annotations

from engine.tools.formats import Schemas, ToolFormat
from engine.types import ToolCall


def parse_tool_calls(
    fmt: ToolFormat, text: str, schemas: Schemas | None = None
) -> tuple[str, list[ToolCall]]:
    """Split `text` into the content without call markup and the calls, each with a fresh id
    and its arguments as parsed JSON (`schemas`, the tools' parameters, tell how to read
    values written raw). Incomplete call markup (a reply cut short) stays in
    the content and yields no call."""
    content, raw = fmt.parse(text, schemas)
    ids = fmt.call_ids(text)
    if len(ids) != len(raw):  # the model wrote none (or not one per call): fresh ones
        ids = [fmt.new_call_id() for _ in raw]
    return content, [
        ToolCall(id=i, name=n, arguments=a) for i, (n, a) in zip(ids, raw, strict=True)
    ]
