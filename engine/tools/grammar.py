"""The llguidance Lark grammar for a tool_choice.

The grammar defines `fn`: one call whose name is one of the allowed tools and whose
arguments follow that tool's parameter schema, in the format's own syntax (`call_rules`:
a `%json` embed per tool for JSON formats, one rule per parameter for the others). The
format's `reply_lark` places `fn` in a reply: free text until the call opener under
`auto`, calls only under `required`, exactly one call to one function for a named choice;
several calls unless parallel calls are turned off. `none` has no grammar at all.

With a grammar of the user's under `auto`, `with_user_grammar` joins the two: the reply is
either text that follows the user's grammar or the calls (llguidance runs the user's
grammar as a sub-grammar). That works when the two cannot start alike: a model that writes
calls as bare JSON cannot also be held to a JSON schema from the first byte, so there the
user's grammar is paused and the reply says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.constraints.compiled import CompiledGrammar
from engine.tools.definitions import (
    DEFAULT_OPTIONS,
    ToolDefinitionError,
    ToolSpec,
    arguments_grammar_schema,
)
from engine.tools.formats import ToolFormat
from engine.tools.formats.base import CALL_INDEX, MAX_NUMBERED_CALLS
from engine.types import SchemaOptions

ChoiceMode = Literal["auto", "required", "none", "function"]


@dataclass(frozen=True)
class ToolChoice:
    """A resolved tool_choice: the mode and, for a named choice, the function."""

    mode: ChoiceMode
    function: str | None = None

    def describe(self) -> str:
        return self.function if self.mode == "function" and self.function else self.mode


def resolve_choice(
    tool_choice: str | Mapping[str, Any] | None, tools: list[ToolSpec]
) -> ToolChoice:
    """Read an OpenAI tool_choice ("auto", "required", "none", a function name, or
    {"type": "function", "function": {"name": ...}}); unknown names raise naming them."""
    names = [t.name for t in tools]
    if tool_choice is None:
        return ToolChoice("auto")
    if isinstance(tool_choice, Mapping):
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
    fmt: ToolFormat,
    tools: list[ToolSpec],
    choice: ToolChoice,
    parallel: bool = True,
    options: SchemaOptions = DEFAULT_OPTIONS,
    first_index: int = 0,
) -> str:
    """The Lark grammar constraining a reply to `fmt` calls of `tools` under `choice`; a
    numbered format's calls are numbered from `first_index` (ToolFormat.first_call_index)."""
    if choice.mode == "none":
        raise ValueError("tool_choice none has no grammar")
    parallel = parallel and fmt.parallel  # a family that writes one call at a time
    if choice.mode == "function":  # exactly one call, to that function
        allowed = [t for t in tools if t.name == choice.function]
        parallel = False
        rules = fmt.reply_lark(required=True, parallel=False)
    else:
        allowed = list(tools)
        rules = fmt.reply_lark(required=choice.mode == "required", parallel=parallel)
    lines = ["%llguidance {}", rules.rstrip("\n")]
    per_tool = []
    for i, tool in enumerate(allowed):
        schema = arguments_grammar_schema(tool.parameters, options)
        per_tool.append(fmt.call_rules(f"fn_{i}", tool.name, schema))
    if not fmt.numbered:
        lines.append("fn: " + " | ".join(f"fn_{i}" for i in range(len(allowed))))
        for rules_of_tool in per_tool:
            lines.extend(rules_of_tool)
        return "\n".join(lines) + "\n"
    # Each position's call carries its own number: the call rule once per position.
    positions = MAX_NUMBERED_CALLS if parallel else 1
    for k in range(positions):
        lines.append(f"fn_at{k}: " + " | ".join(f"fn_{i}_at{k}" for i in range(len(allowed))))
    for i, (head, *rest) in enumerate(per_tool):
        name, body = head.split(": ", 1)
        if name != f"fn_{i}" or CALL_INDEX not in body:
            raise ValueError(f"{fmt.name}: a numbered call rule must hold the call's index")
        for k in range(positions):
            number = json.dumps(str(first_index + k))
            lines.append(f"fn_{i}_at{k}: " + body.replace(CALL_INDEX, number))
        lines.extend(rest)
    return "\n".join(lines) + "\n"


def with_user_grammar(
    fmt: ToolFormat,
    tools: list[ToolSpec],
    user: CompiledGrammar,
    parallel: bool = True,
    options: SchemaOptions = DEFAULT_OPTIONS,
    first_index: int = 0,
) -> str | None:
    """llguidance's grammar (JSON) for `auto` with the user's grammar as the free text: the
    reply follows `user`, or it is calls only. None if the two could start with the same
    byte, which llguidance's sub-grammars cannot tell apart."""
    if not fmt.call_start or _can_start_with(user.grammar, fmt.call_start):
        return None
    calls = tool_grammar(fmt, tools, ToolChoice("required"), parallel, options, first_index)
    head, rules = calls.split("\n", 1)  # "%llguidance {}", then rules that start with `start`
    if not rules.startswith("start:"):
        raise ValueError(f"{fmt.name}: the calls grammar must begin with its start rule")
    grammars = user.grammars()
    name = grammars[0].get("name") or "user"
    grammars[0] = {**grammars[0], "name": name}
    lark = f"{head}\nstart: @{name} | tool_calls\ntool_calls:{rules[len('start:') :]}"
    return json.dumps({"grammars": [{"name": "tools", "lark_grammar": lark}, *grammars]})


def _can_start_with(grammar: str, text: str) -> bool:
    """Whether `grammar` allows `text`'s first byte first (True when it cannot be told)."""
    from llguidance import LLMatcher

    from engine.constraints.tokenizer import byte_tokenizer

    matcher = LLMatcher(byte_tokenizer(), grammar, log_level=0)
    mask = matcher.compute_bitmask()
    if matcher.is_error():
        return True
    first = text.encode()[0]
    return bool(mask[first // 8] & (1 << (first % 8)))


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
