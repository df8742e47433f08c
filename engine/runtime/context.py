"""The model's context length, checked before any prompt is processed.

A prompt longer than the model reads would run for minutes (20,000 tokens: over 500 s on
the default model here) and then decode from positions the model never saw. So the prompt,
tool definitions included, is counted before prefill and refused with the numbers; a reply
that would run past the context stops there (stop reason "length", ending "cut" or
"filled").

"No room for a reply" means fewer tokens left than the reply can use at all: the model must
be able to write at least one token of its own. Without a constraint one token of room is
enough (`reply_budget` refuses a prompt that leaves none). Under a constraint that is closed
to fit, the closing policy keeps the tokens of the format's ending and a margin from the
model: `reply_budget` refuses a prompt that leaves no more than that margin before any
prefill, and when what the context leaves is so little that the closing takes over before
the model has written a token (an ending longer than the margin), the reply is refused
the same way once the grammar has said so (`room_taken`), rather than handed back as a
reply the model never wrote (an agent at 8,187 of 8,192 tokens got
0-token replies ended `stop` and retried them for minutes). A prompt that leaves a little
more decodes, and its reply ends "length".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import CorralError

if TYPE_CHECKING:
    from engine.types import ChatRequest, ChatResult

CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"  # OpenAI's error code for the same


@dataclass(frozen=True)
class KVMemory:
    """What a token's KV state costs and how much memory the KV caches may take."""

    bytes_per_token: int  # at the precision requests get
    full_bytes_per_token: int  # at the model's own precision
    budget_bytes: int
    kv_bits: int | None = None

    @property
    def max_tokens(self) -> int:
        return self.budget_bytes // max(1, self.bytes_per_token)

    def describe(self) -> str:
        """The numbers, as a clause of a sentence."""
        precision = f"{self.kv_bits}-bit precision" if self.kv_bits else "full precision"
        text = f"the KV cache takes {_size(self.bytes_per_token)} per token at {precision}"
        if self.kv_bits:
            text += f" ({_size(self.full_bytes_per_token)} at full precision)"
        return text + (
            f" and may use {_size(self.budget_bytes)}, room for {self.max_tokens:,} tokens"
        )


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class ContextLengthError(CorralError, ValueError):
    """A prompt does not fit in the model's context, or its KV cache in the KV budget; the
    message gives the numbers."""

    code = CONTEXT_LENGTH_EXCEEDED

    def __init__(
        self,
        prompt_tokens: int,
        context_length: int,
        tool_tokens: int = 0,
        memory: KVMemory | None = None,
        reply_needs: int = 1,
    ) -> None:
        """`reply_needs`: the fewest tokens of room the reply can use at all (one, or more
        under a format closed to fit, see the module doc)."""
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length
        self.tool_tokens = tool_tokens
        # the most prompt tokens that leave the reply room, in the context and in memory
        limits = [context_length - reply_needs] if context_length > 0 else []
        if memory is not None:
            limits.append(memory.max_tokens - 1)
        self.max_prompt_tokens = max(0, min(limits)) if limits else 0
        tools = f" (the tool definitions take {tool_tokens:,} of them)" if tool_tokens else ""
        message = (
            f"prompt is {prompt_tokens:,} tokens{tools}; this model reads at most "
            f"{context_length:,}"
        )
        left = context_length - prompt_tokens
        if reply_needs > 1 and left > 0:
            message += (
                f", which leaves {left:,} for the reply: its format takes "
                f"{reply_needs - 1:,} of them to end validly (what it forces, an ending and a "
                "margin), so the model could write none; at most "
                f"{self.max_prompt_tokens:,} prompt tokens leave it room"
            )
        elif prompt_tokens == context_length:
            message += ", and a reply needs at least one more"
        if memory is not None and prompt_tokens >= memory.max_tokens:  # memory binds too
            message += f"; {memory.describe()}"
            if memory.kv_bits is None:
                message += " (--kv-bits 8 or 4 makes room for more)"
        super().__init__(message)


def reply_budget(
    prompt_tokens: int,
    context_length: int | None,
    max_tokens: int,
    tool_tokens: Any = None,
    memory: KVMemory | None = None,
    reply_needs: int = 1,
) -> int:
    """How many tokens the reply may have: `max_tokens`, or fewer where the context ends.

    Raises ContextLengthError when the prompt leaves no room for a reply: none in the
    context, or fewer than `reply_needs` where the context rather than `max_tokens` limits
    the reply (a constrained reply closed to fit needs the closing policy's margin and one
    more, see the module doc), or none in the KV budget (with `memory`). `tool_tokens` is
    called (only then) for how many of the prompt's tokens the tool definitions take.
    """
    too_big = memory is not None and prompt_tokens >= memory.max_tokens
    if (not context_length or context_length <= 0) and not too_big:
        return max_tokens
    left = (context_length or 0) - prompt_tokens
    # none left; or too few for the format, where the context (not max_tokens) binds
    if too_big or (context_length and (left < 1 or left < min(reply_needs, max_tokens))):
        tools = int(tool_tokens()) if callable(tool_tokens) else 0
        raise ContextLengthError(
            prompt_tokens, context_length or 0, max(0, tools), memory, reply_needs
        )
    assert context_length
    return min(max_tokens, context_length - prompt_tokens)


def room_taken(
    prompt_tokens: int, context_length: int | None, taken: int, budget: int, max_tokens: int
) -> ContextLengthError | None:
    """The refusal for a reply whose closing policy took over before the model wrote a
    token, the format having taken `taken` tokens of the `budget` the context left (the
    tokens it forced, the ending and the margin kept for it), when the context (not
    `max_tokens`) is what left so little; else None (a small `max_tokens` is the client's
    own choice, and its reply ends "filled")."""
    if not context_length or budget >= max_tokens:
        return None
    return ContextLengthError(prompt_tokens, context_length, reply_needs=taken + 1)


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
        result.max_prompt_tokens = exc.max_prompt_tokens
