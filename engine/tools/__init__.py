"""Tool calling: tools in, a prompt and a grammar out, calls parsed back from the reply.

`prepare_tool_request` validates the tools, picks the call format from the chat template,
renders the prompt and builds the Lark grammar that makes every call's arguments match
its tool's schema. The engine prefills `prompt_tokens`, decodes under `constraint`, and
hands the final text to `ToolPlan.parse`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.tools.definitions import (
    ToolDefinitionError,
    ToolSpec,
    load_tools,
    validate_tools,
)
from engine.tools.formats import ToolFormat, choose_format
from engine.tools.grammar import ToolChoice, resolve_choice, tool_grammar, validate_grammar
from engine.tools.parse import parse_tool_calls
from engine.tools.prompt import render_prompt
from engine.tools.stream import ToolCallStream
from engine.types import ConstraintSpec, ToolCall

__all__ = [
    "ToolDefinitionError",
    "ToolPlan",
    "ToolSpec",
    "ToolCallStream",
    "load_tools",
    "prepare_tool_request",
    "validate_tools",
]


@dataclass
class ToolPlan:
    """What the engine needs to run one request with tools."""

    prompt_tokens: list[int]  # the rendered prompt, ready to prefill
    constraint: ConstraintSpec | None  # a Lark grammar, or None for tool_choice "none"
    format: str = "hermes"  # the call format's name
    native: bool = False  # True when the chat template itself renders the tools
    choice: ToolChoice = field(default_factory=lambda: ToolChoice("auto"))
    prompt_text: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    _format: ToolFormat | None = field(default=None, repr=False)

    def stream(self) -> ToolCallStream | None:
        """A splitter giving content and calls while the reply streams (None under "none")."""
        if self.choice.mode == "none" or self._format is None:
            return None
        return ToolCallStream(self._format)

    def parse(self, text: str) -> tuple[str, list[ToolCall]]:
        """(content without the call markup, calls). Under "none" the text is all content."""
        if self.choice.mode == "none" or self._format is None:
            return text, []
        return parse_tool_calls(self._format, text)


def _tokenize(tokenizer: Any, text: str) -> list[int]:
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    return list(hf.encode(text, add_special_tokens=False))


def prepare_tool_request(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | list[ToolSpec],
    tool_choice: str | dict[str, Any],
    *,
    parallel_tool_calls: bool = True,
) -> ToolPlan:
    """Validate `tools`, render the prompt and build the grammar for `tool_choice`.

    `tokenizer` is mlx-lm's TokenizerWrapper (an HF tokenizer works too). As in the OpenAI
    API, `parallel_tool_calls=False` allows at most one call per reply. Raises
    ToolDefinitionError for malformed tools, an unknown tool_choice name or a conversation
    the chat template cannot render.
    """
    specs = (
        list(tools)
        if tools and all(isinstance(t, ToolSpec) for t in tools)
        else validate_tools(tools)
    )
    choice = resolve_choice(tool_choice, specs)
    fmt = choose_format(tokenizer)
    offered = None if choice.mode == "none" else specs
    text = render_prompt(tokenizer, messages, offered, fmt)
    warnings = [f'tool "{t.name}": {w}' for t in specs for w in t.warnings]
    constraint = None
    if choice.mode != "none":
        grammar = tool_grammar(fmt, specs, choice, parallel_tool_calls)
        warnings += validate_grammar(grammar)
        constraint = ConstraintSpec(
            kind="lark", source=grammar, name=f"tools: {choice.describe()} ({fmt.name})"
        )
    return ToolPlan(
        prompt_tokens=_tokenize(tokenizer, text),
        constraint=constraint,
        format=fmt.name,
        native=fmt.native,
        choice=choice,
        prompt_text=text,
        tools=specs,
        warnings=warnings,
        _format=fmt,
    )
