"""Tool definitions for the GUI: validate edited JSON, list and run the built-in tools.

Validation and the built-in tools are the engine's (engine.tools.definitions and
engine.tools.builtins, no MLX).
"""

from __future__ import annotations

import json
from typing import Any

from app.store.records import ToolsConfig
from engine.types import ToolDefinition

# The one wording of a tool policy (docs/design.md): short in chips and a reply's tag, a
# sentence in menus and the Tools panel.
POLICY_SHORT = {"auto": "auto", "required": "must call one", "none": "off"}
POLICY_LONG = {
    "auto": "The model decides when to call a tool",
    "required": "The model must call a tool",
    "none": "No tool calls (tools stay listed)",
}


# What the window calls each built-in tool (docs/design.md); the model calls it by its name,
# which the tooltip shows. A tool the user defined is called by the name they gave it.
BUILTIN_TITLES = {
    "calculator": "Calculator",
    "current_datetime": "Clock",
    "convert_units": "Unit converter",
}


def tool_title(name: str) -> str:
    """The words the window shows for the tool `name`."""
    return BUILTIN_TITLES.get(name, name)


def policy_words(choice: str) -> str:
    """A tool_choice in the chip's short words: "auto", "must call one", "off", or for one
    tool "must call Clock" (by its title)."""
    return POLICY_SHORT.get(choice, f"must call {tool_title(choice)}")


def tools_tag(asked: str, applied: str | None = None) -> str:
    """A reply's tag for the tools rule it was written under, in the chip's words: the
    rule the user chose (`asked`), and what it meant for this reply when that differs
    (`applied`): after a result the model may answer ("then auto"), after the turn's last
    round of calls it must ("now off")."""
    words = policy_words(asked)
    if applied is None or applied == asked:
        return f"Tools ({words})"
    if applied == "none":
        return f"Tools ({words}, now off: enough calls)"
    return f"Tools ({words}, then auto)"


class ToolsError(ValueError):
    """Tool definitions the user wrote or loaded are not usable; the message says why."""


def parse_tools_text(text: str, source: str = "") -> list[ToolDefinition]:
    """Validate tool definitions given as JSON text; return them in the OpenAI format."""
    from engine.tools.definitions import ToolDefinitionError, tools_from_text

    if not text.strip():
        return []
    try:
        return tools_from_text(text, source)
    except ToolDefinitionError as exc:
        raise ToolsError(str(exc)) from None


def looks_like_tools(path: str) -> bool:
    """Whether a .json file holds tool definitions (rather than a JSON schema)."""
    from engine.files import FileRefused, read_text_limited
    from engine.tools.definitions import MAX_FILE_BYTES

    try:  # a regular file only: a pipe would block the window, a device never end
        data = json.loads(read_text_limited(path, MAX_FILE_BYTES, "tools file"))
    except (FileRefused, ValueError, RecursionError):
        return False
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        return True
    items = data if isinstance(data, list) else [data]
    return bool(items) and all(
        isinstance(t, dict) and (t.get("type") == "function" or "function" in t) for t in items
    )


def builtin_tools() -> list[ToolDefinition]:
    """The engine's built-in tools in the OpenAI format."""
    from engine.tools import builtins

    try:
        return list(builtins.builtin_tools())
    except (OSError, ValueError):  # a damaged bundled schema: offer the others nothing
        return []


def builtin_names() -> list[str]:
    return [t["function"]["name"] for t in builtin_tools()]


def run_builtin(name: str, arguments: dict[str, Any]) -> str:
    """Run a built-in tool; its result (or error) as text for the tool message."""
    from engine.tools import builtins

    return str(builtins.run_builtin(name, arguments))


def enabled_tool_warnings(config: ToolsConfig) -> list[str]:
    """What Corral cannot enforce about the tools a request would offer (blocking: each
    tool's schema is compiled)."""
    from engine.tools import tool_warnings, validate_tools

    try:
        return tool_warnings(validate_tools(enabled_tool_definitions(config)))
    except ValueError as exc:  # the panel only applies valid tools; a stored one may not be
        return [str(exc)]


def enabled_tool_definitions(config: ToolsConfig) -> list[ToolDefinition]:
    """The tools a request offers: the user's definitions plus the enabled built-ins."""
    tools = list(config.definitions)
    names = {t.get("function", t).get("name") for t in tools}
    if config.builtins:
        for tool in builtin_tools():
            name = tool["function"]["name"]
            if name in config.builtins and name not in names:
                tools.append(tool)
    return tools
