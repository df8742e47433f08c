"""One request with tools: its prompt, the grammar it decodes under, and how its calls are read.

`prepare_tool_request` validates the tools, picks the call format from the chat template,
renders the prompt and builds the Lark grammar that makes every call's arguments match
its tool's schema, joined with the user's own grammar where one is given. The engine
prefills `prompt_tokens`, decodes under `constraint`, and hands the final text to
`ToolPlan.parse`. Tool grammars are compiled once per tool set and choice (a small cache),
so a conversation's requests with the same tools share one compiled grammar.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llguidance import LLMatcher

from engine.constraints.compiled import CompiledGrammar, compiled_of
from engine.constraints.validate import compile_constraint
from engine.prompt.images import rewrite_images, with_image_markers
from engine.prompt.shield import TextShield
from engine.tools.definitions import (
    DEFAULT_OPTIONS,
    ToolSpec,
    validate_tools,
)
from engine.tools.formats import ToolFormat, choose_format
from engine.tools.grammar import (
    ToolChoice,
    resolve_choice,
    tool_grammar,
    validate_grammar,
    with_user_grammar,
)
from engine.tools.parse import parse_tool_calls
from engine.tools.prompt import render_chat_with_tools, reply_cuts
from engine.tools.stream import ToolCallStream
from engine.types import (
    KIND_NAMES,
    ConstraintSpec,
    ConstraintUse,
    SchemaOptions,
    ToolCall,
    ToolChoiceOption,
    ToolDefinition,
)


@dataclass
class ToolPlan:
    """What the engine needs to run one request with tools."""

    prompt_tokens: list[int]  # the rendered prompt, ready to prefill
    # the grammar to decode under (compiled): the tools', the tools' joined with the user's,
    # the user's alone (tool_choice "none"), or None
    constraint: ConstraintSpec | None
    # what became of the user's own constraint, if the request had one
    user_constraint: ConstraintUse | None = None
    format: str = "hermes"  # the call format's name
    native: bool = False  # True when the chat template itself renders the tools
    choice: ToolChoice = field(default_factory=lambda: ToolChoice("auto"))
    prompt_text: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # markup left out of the reply's text: the format's tool-result tags, which a model
    # copies from its prompt when it repeats a result
    hidden: list[str] = field(default_factory=list)
    _format: ToolFormat | None = field(default=None, repr=False)

    def stream(self) -> ToolCallStream | None:
        """A splitter giving content and calls while the reply streams (None under "none")."""
        if self.choice.mode == "none" or self._format is None:
            return None
        return ToolCallStream(self._format, self.schemas())

    def parse(self, text: str) -> tuple[str, list[ToolCall]]:
        """(content without the call markup, calls). Under "none" the text is all content."""
        if self.choice.mode == "none" or self._format is None:
            return text, []
        return parse_tool_calls(self._format, text, self.schemas())

    def end_markers(self) -> list[str]:
        """Markup that ends a reply of calls as its end token (gpt-oss's `<|call|>`, which
        its first template never writes: the model still ends a call with it)."""
        fmt = self._format
        if self.choice.mode == "none" or fmt is None or not fmt.reply_end:
            return []
        return [fmt.reply_end]

    def schemas(self) -> dict[str, dict[str, Any]]:
        """Each tool's parameters schema, by name."""
        return {t.name: t.parameters for t in self.tools}


def tool_warnings(tools: list[ToolSpec]) -> list[str]:
    """One line per thing about the tools that Corral cannot enforce, naming the tool."""
    return [f'tool "{t.name}": {w}' for t in tools for w in t.warnings]


def prepare_tool_request(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolDefinition | Mapping[str, Any] | ToolSpec],
    tool_choice: ToolChoiceOption | Mapping[str, Any],
    *,
    parallel_tool_calls: bool = True,
    user_constraint: ConstraintSpec | None = None,
    schema_options: SchemaOptions = DEFAULT_OPTIONS,
    template_kwargs: Mapping[str, Any] | None = None,
) -> ToolPlan:
    """Validate `tools`, render the prompt and build the grammar for `tool_choice`.

    `tokenizer` is mlx-lm's TokenizerWrapper (an HF tokenizer works too). As in the OpenAI
    API, `parallel_tool_calls=False` allows at most one call per reply. `user_constraint`
    (the request's own grammar) applies alone under "none", joins the tools' under "auto"
    when the call format allows it (the reply follows it or is calls), and is paused under
    "required" or a named tool, or when it cannot be joined; `warnings` then say so.
    Raises ToolDefinitionError for malformed tools, an unknown tool_choice name or a
    conversation the chat template cannot render, and ConstraintError for a user
    constraint that does not convert.
    """
    given = list(tools)
    specs = [t for t in given if isinstance(t, ToolSpec)]
    if not given or len(specs) != len(given):
        specs = validate_tools(given, options=schema_options)
    choice = resolve_choice(tool_choice, specs)
    fmt = choose_format(tokenizer)
    # Messages and tool definitions are untrusted: their text is tokenized as plain text.
    shield = TextShield(tokenizer)
    offered = None if choice.mode == "none" else [shield_spec(shield, s) for s in specs]
    shown = with_image_markers(tokenizer, shield.value(list(messages)))
    text = render_chat_with_tools(tokenizer, shown, offered, fmt, template_kwargs)
    cuts = reply_cuts(tokenizer, shown, offered, fmt, template_kwargs, text)
    user = compile_constraint(user_constraint) if user_constraint is not None else None
    # `template_kwargs`: what else the chat template is told (`enable_thinking`).
    constraint, use, notes = _reply_constraint(
        fmt,
        specs,
        choice,
        parallel_tool_calls,
        user,
        schema_options,
        fmt.first_call_index(list(messages)) if fmt.numbered else 0,
    )
    # Each earlier reply is tokenized from where its generation prompt ended, so a reply
    # the template renders back as written keeps its tokens (the prompt cache reuses it).
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    tokens = [
        t for piece in pieces if piece for t in shield.encode(rewrite_images(tokenizer, piece))
    ]
    return ToolPlan(
        prompt_tokens=tokens,
        constraint=constraint,
        user_constraint=use,
        format=fmt.name,
        native=fmt.native,
        choice=choice,
        prompt_text=shield.restore(text),
        tools=specs,
        warnings=tool_warnings(specs) + notes,
        hidden=list(fmt.result_markers),
        _format=fmt,
    )


def shield_spec(shield: TextShield, spec: ToolSpec) -> ToolSpec:
    """`spec` as the prompt shows it: its description and schema shielded (its name is
    already plain: the name rule allows no markup)."""
    return replace(
        spec, description=shield.text(spec.description), parameters=shield.value(spec.parameters)
    )


def _reply_constraint(
    fmt: ToolFormat,
    specs: list[ToolSpec],
    choice: ToolChoice,
    parallel: bool,
    user: ConstraintSpec | None,
    options: SchemaOptions = DEFAULT_OPTIONS,
    first_index: int = 0,
) -> tuple[ConstraintSpec | None, ConstraintUse | None, list[str]]:
    """The compiled grammar a reply decodes under, what became of the user's constraint,
    and notes about both (llguidance's warnings, why a grammar is paused); a numbered
    format's calls are numbered from `first_index`."""
    if choice.mode == "none":
        return user, None if user is None else "alone", []
    grammar = tool_grammar(fmt, specs, choice, parallel, options, first_index)
    compiled, warnings = _compiled_tool_grammar(grammar)
    name = f"tools: {choice.describe()} ({fmt.name})"
    tools_only = ConstraintSpec(kind="lark", source=grammar, name=name, compiled=compiled)
    notes = list(warnings)
    if user is None:
        return tools_only, None, notes
    label = user.name or KIND_NAMES.get(user.kind, user.kind)
    if choice.mode == "auto":
        user_grammar = compiled_of(user)
        assert user_grammar is not None
        joined = with_user_grammar(fmt, specs, user_grammar, parallel, options, first_index)
        if joined is not None:
            both = ConstraintSpec(
                kind="lark",
                source=joined,  # llguidance's grammar (JSON), already compiled
                name=f"{label} or tool calls ({fmt.name})",
                compiled=_compiled_joined_grammar(joined),
            )
            return both, "with_tools", notes
        why = f"the model writes {fmt.name} calls, which {label} could be mistaken for"
    else:
        why = f'tool_choice "{choice.describe()}" allows only tool calls'
    notes.append(f"{label} is paused while tools are on: {why}")
    return tools_only, "paused", notes


@functools.lru_cache(maxsize=16)
def _compiled_tool_grammar(grammar: str) -> tuple[CompiledGrammar, tuple[str, ...]]:
    """The compiled tool grammar (shared by every request with the same tools and choice)
    and llguidance's warnings about it."""
    warnings = tuple(validate_grammar(grammar))
    return CompiledGrammar(LLMatcher.grammar_from_lark(grammar)), warnings


@functools.lru_cache(maxsize=16)
def _compiled_joined_grammar(grammar: str) -> CompiledGrammar:
    """The compiled grammar of tools joined with a user's grammar (llguidance's JSON)."""
    return CompiledGrammar(grammar)
