"""The model's context length, checked before any prompt is processed.

A prompt longer than the model reads would run for minutes (20,000 tokens: over 500 s on
the default model here) and then decode from positions the model never saw. So the prompt,
tool definitions included, is counted before prefill and refused with the numbers; a reply
that would run past the context stops there (stop reason "length").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.errors import CorralError

if TYPE_CHECKING:
    from engine.types import ChatRequest, ChatResult

CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"  # OpenAI's error code for the same


class ContextLengthError(CorralError, ValueError):
    """A prompt does not fit in the model's context; the message gives both numbers."""

    code = CONTEXT_LENGTH_EXCEEDED

    def __init__(self, prompt_tokens: int, context_length: int, tool_tokens: int = 0) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length
        self.tool_tokens = tool_tokens
        message = f"prompt is {prompt_tokens:,} tokens; this model reads at most {context_length:,}"
        if prompt_tokens == context_length:
            message += ", and a reply needs at least one more"
        if tool_tokens:
            message += f" (the tool definitions take {tool_tokens:,} of them)"
        super().__init__(message)


def reply_budget(
    prompt_tokens: int,
    context_length: int | None,
    max_tokens: int,
    tool_tokens: Any = None,
) -> int:
    """How many tokens the reply may have: `max_tokens`, or fewer where the context ends.

    Raises ContextLengthError when the prompt leaves no room for a reply. `tool_tokens` is
    called (only then) for how many of the prompt's tokens the tool definitions take.
    """
    if not context_length or context_length <= 0:
        return max_tokens
    if prompt_tokens >= context_length:
        tools = int(tool_tokens()) if callable(tool_tokens) else 0
        raise ContextLengthError(prompt_tokens, context_length, max(0, tools))
    return min(max_tokens, context_length - prompt_tokens)


def tool_definition_tokens(tokenizer: Any, request: ChatRequest, prompt_tokens: int) -> int:
    """How many of a tool request's `prompt_tokens` its tool definitions take: the prompt
    rendered again without them (for the error message only)."""
    from engine.tools import prepare_tool_request

    if not request.tools:
        return 0
    bare = prepare_tool_request(tokenizer, request.messages, request.tools, "none")
    return prompt_tokens - len(bare.prompt_tokens)


def annotate_error(result: ChatResult, exc: BaseException) -> None:
    """Put what a front end needs to offer a way out on a failed result: the error's code
    and, for a prompt too long, its length."""
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        result.error_code = code
    if isinstance(exc, ContextLengthError):
        result.stats.prompt_tokens = exc.prompt_tokens
