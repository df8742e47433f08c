"""The llguidance Lark grammar for a tool_choice.

The grammar defines `fn`: one call object whose name is one of the allowed tools and
whose arguments follow that tool's parameter schema (a `%json` embed per tool). The
format's `reply_lark` places `fn` in a reply: free text until the call opener under
`auto`, calls only under `required`, exactly one call to one function for a named choice;
several calls unless parallel calls are turned off. `none` has no grammar at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from engine.tools.definitions import ToolDefinitionError, ToolSpec, arguments_grammar_schema
from engine.tools.formats import ToolFormat

ChoiceMode = Literal["auto", "required", "none", "function"]


@dataclass(frozen=True)
class ToolChoice:
    """A resolved tool_choice: the mode and, for a named choice, the function."""

    mode: ChoiceMode
    function: str | None = None

    def describe(self) -> str:
        return self.function if self.mode == "function" and self.function else self.mode


def resolve_choice(tool_choice: str | dict[str, Any] | None, tools: list[ToolSpec]) -> ToolChoice:
    """Read an OpenAI tool_choice ("auto", "required", "none", a function name, or
    {"type": "function", "function": {"name": ...}}); unknown names raise naming them."""
    names = [t.name for t in tools]
    if tool_choice is None:
        return ToolChoice("auto")
    if isinstance(tool_choice, dict):
        kind = tool_choice.get("type")
        if kind in ("auto", "required", "none"):
            return ToolChoice(kind)
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else tool_choice.get("name")
        if kind not in (None, "function") or not isinstance(name, str):
            raise ToolDefinitionError(
                f"tool_choice {json.dumps(tool_choice)}: expected "
                '{"type": "function", "function": {"name": ...}}'
            )
    elif isinstance(tool_choice, str):
        if tool_choice in ("auto", "required", "none"):
            return ToolChoice(tool_choice)  # type: ignore[arg-type]
        name = tool_choice
    else:
        raise ToolDefinitionError(f"tool_choice must be a string or an object, got {tool_choice!r}")
    if name not in names:
        raise ToolDefinitionError(
            f'tool_choice names "{name}", which is not one of the tools ({", ".join(names)})'
        )
    return ToolChoice("function", name)


def tool_grammar(
    fmt: ToolFormat, tools: list[ToolSpec], choice: ToolChoice, parallel: bool = True
) -> str:
    """The Lark grammar constraining a reply to `fmt` calls of `tools` under `choice`."""
    if choice.mode == "none":
        raise ValueError("tool_choice none has no grammar")
    if choice.mode == "function":  # exactly one call, to that function
        allowed = [t for t in tools if t.name == choice.function]
        rules = fmt.reply_lark(required=True, parallel=False)
    else:
        allowed = list(tools)
        rules = fmt.reply_lark(required=choice.mode == "required", parallel=parallel)
    lines = ["%llguidance {}", rules.rstrip("\n")]
    lines.append("fn: " + " | ".join(f"fn_{i}" for i in range(len(allowed))))
    for i, tool in enumerate(allowed):
        lines.append(f"fn_{i}: {fmt.call_lark(tool.name, f'args_{i}')}")
        lines.append(f"args_{i}: %json {json.dumps(arguments_grammar_schema(tool.parameters))}")
    return "\n".join(lines) + "\n"


def validate_grammar(grammar: str, ll_tokenizer: Any = None) -> list[str]:
    """Compile `grammar` with llguidance; raise ValueError on error, return warnings.

    Without a tokenizer, special-token references cannot be checked; that warning is
    dropped (the engine compiles again with the model's tokenizer).
    """
    from llguidance import LLMatcher

    is_error, messages = LLMatcher.validate_grammar_with_warnings(
        LLMatcher.grammar_from_lark(grammar), ll_tokenizer
    )
    if is_error:
        raise ValueError(f"tool grammar does not compile: {messages[0] if messages else ''}")
    return [m for m in messages if "no tokenizer" not in m]
