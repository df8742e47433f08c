"""Tool calling: tools in, a prompt and a grammar out, calls parsed back from the reply.

`plan.prepare_tool_request` validates the tools, picks the call format from the chat
template (`formats`), renders the prompt (`prompt`) and builds the Lark grammar that makes
every call's arguments match its tool's schema (`grammar`); the engine decodes under it,
streams calls out of the text (`stream`) and parses them (`parse`). `definitions` reads and
checks tools; `builtins` are the tools Corral ships. This module only re-exports.
"""

from engine.tools.definitions import ToolDefinitionError, ToolSpec, load_tools, validate_tools
from engine.tools.plan import ToolPlan, prepare_tool_request, tool_warnings
from engine.tools.stream import ToolCallStream

__all__ = [
    "ToolDefinitionError",
    "ToolPlan",
    "ToolSpec",
    "ToolCallStream",
    "load_tools",
    "prepare_tool_request",
    "tool_warnings",
    "validate_tools",
]
