"""A model's thinking syntax, found from its chat template and tokenizer, and where a reply
starts with respect to its thinking block.

One module per syntax (`think_tags`, `seed`, `mistral`, `command_r`, `gemma4`, `kimi`,
`apriel`, `granite`, `harmony`, `apertus`), tried in the order of `SYNTAXES` (the most
specific first). `detect_reasoning` gives the model's ReasoningFormat: steered (separated,
budgeted, constrained after its block) when its markers are tokens of their own, shown
only otherwise; None for a model that does not think, served exactly as before.

`thinking_kwargs` is what the template is told for a request (`enable_thinking`,
`thinking`, `reasoning_effort`, `thinking_effort`: whichever the template reads), and
`reply_start` reads the rendered prompt: the reply starts inside an open block, before
one it may open, or with thinking closed (switched off).
"""

from __future__ import annotations

from typing import Any, Literal

from engine.prompt.reasoning.apertus import APERTUS
from engine.prompt.reasoning.apriel import APRIEL
from engine.prompt.reasoning.base import ThinkingSyntax
from engine.prompt.reasoning.command_r import COMMAND_R
from engine.prompt.reasoning.gemma4 import GEMMA4
from engine.prompt.reasoning.granite import GRANITE
from engine.prompt.reasoning.harmony import HARMONY
from engine.prompt.reasoning.kimi import KIMI_K3
from engine.prompt.reasoning.mistral import MISTRAL
from engine.prompt.reasoning.seed import SEED
from engine.prompt.reasoning.think_tags import THINK, THINKING
from engine.prompt.tokenizer import ModelTokenizer
from engine.types import ReasoningFormat

SYNTAXES: tuple[ThinkingSyntax, ...] = (
    HARMONY,
    GEMMA4,
    KIMI_K3,
    APRIEL,
    COMMAND_R,
    APERTUS,
    SEED,
    MISTRAL,
    GRANITE,
    THINK,
    THINKING,
)

# "before": the reply may open a thinking block; "inside": the prompt opened it; "off": no
# thinking this reply (switched off, or closed by the prompt).
ReplyStart = Literal["before", "inside", "off"]

# Effort words templates take, by the thinking budget they stand for.
_EFFORT_WORDS = ((256, "low"), (1024, "medium"))

__all__ = [
    "SYNTAXES",
    "ReplyStart",
    "ThinkingSyntax",
    "detect_reasoning",
    "describe_reasoning",
    "reply_start",
    "switched_messages",
    "syntax_of",
    "thinking_kwargs",
    "wants_thinking",
]


def syntax_of(template: str) -> ThinkingSyntax | None:
    """The thinking syntax `template` speaks, or None."""
    return next((s for s in SYNTAXES if s.found_in(template)), None)


def detect_reasoning(tokenizer: Any) -> ReasoningFormat | None:
    """The reasoning format of the model whose tokenizer is `tokenizer` (a ModelTokenizer,
    mlx-lm's wrapper or a Hugging Face tokenizer), or None if its template has none."""
    tok = ModelTokenizer.of(tokenizer)
    template = tok.chat_template or ""
    syntax = syntax_of(template)
    if syntax is None:
        return None
    fmt = syntax.build(tok, template)
    if fmt.steerable and not fmt.opens_in_prompt and reply_start(fmt, _probe(tok, fmt)) == "inside":
        from dataclasses import replace

        fmt = replace(fmt, opens_in_prompt=True)
    return fmt


def describe_reasoning(fmt: ReasoningFormat | None) -> str:
    """The thinking syntax in words, for `engine info` and the model library."""
    if fmt is None:
        return "none"
    name = fmt.syntax or fmt.kind
    markers = " … ".join(m for m in (fmt.start, fmt.end) if m)
    shown = "" if fmt.steerable else ", shown only (the engine cannot write its markers)"
    several = ", its end written as several tokens" if fmt.end_is_text else ""
    return f"{name} ({markers}){several}{shown}"


def _probe(tok: ModelTokenizer, fmt: ReasoningFormat) -> list[int]:
    """The generation prompt of a one-message conversation, thinking on."""
    messages = [{"role": "user", "content": "hi"}]
    try:
        text = tok.apply_chat_template(messages, **thinking_kwargs(fmt, True))
    except Exception:  # a template that needs more than this; it cannot open the block then
        return []
    return tok.encode(text)


def thinking_kwargs(
    fmt: ReasoningFormat | None, think: bool, budget: int | None = None
) -> dict[str, Any]:
    """What the chat template is given for a reply that thinks (or not), with the effort
    word its thinking budget stands for where the template reads one."""
    if fmt is None:
        return {}
    out: dict[str, Any] = dict.fromkeys(fmt.switches, think)
    if fmt.effort_variable and think and budget is not None:
        word = next((w for limit, w in _EFFORT_WORDS if budget <= limit), "high")
        out[fmt.effort_variable] = word
    return out


def switched_messages(fmt: ReasoningFormat | None, messages: list[Any], think: bool) -> list[Any]:
    """`messages` with the word that switches thinking off (`/no_think`) in the system
    message, for a template that reads it there (Nemotron, SmolLM3) and a reply that does
    not think; unchanged otherwise, or where a message already says either word."""
    if think or fmt is None or not fmt.switch_words:
        return messages
    said = any(
        isinstance(m, dict) and isinstance(m.get("content"), str) and w in m["content"]
        for m in messages
        for w in fmt.switch_words
    )
    if said:
        return messages
    off = fmt.switch_words[-1]
    first = messages[0] if messages else None
    if (
        isinstance(first, dict)
        and first.get("role") == "system"
        and isinstance(first.get("content"), str)
    ):
        return [{**first, "content": f"{first['content']} {off}".strip()}, *messages[1:]]
    return [{"role": "system", "content": off}, *messages]


def wants_thinking(fmt: ReasoningFormat | None, think: bool | None) -> bool:
    """Whether a reply thinks: the request's choice, else on for a model that can."""
    if fmt is None or not fmt.steerable:
        return False
    return True if think is None else think


def reply_start(fmt: ReasoningFormat, prompt: list[int]) -> ReplyStart:
    """Where a reply to `prompt` starts: inside a block the prompt opened and left open,
    after a block the prompt closed at its very end (thinking off), or before any."""
    end = fmt.closing if fmt.end_is_text else () if fmt.end_id is None else (fmt.end_id,)
    if not end:
        return "off"
    last_end = _last(prompt, end)
    closed_at_end = last_end >= 0 and last_end + len(end) - 1 >= len(prompt) - 3
    if not fmt.opening:  # only the generation prompt opens it (Apriel)
        return "off" if closed_at_end or not fmt.opens_in_prompt else "inside"
    opening = fmt.opening
    last_start = _last(prompt, opening)
    if last_start > last_end:
        return "inside"
    # the template closed an empty block at the end (Qwen3 with enable_thinking false)
    if closed_at_end and last_start > len(prompt) - 8 - len(opening):
        return "off"
    return "before"


def _last(tokens: list[int], run: tuple[int, ...]) -> int:
    """Where `run` last starts in `tokens` (-1: nowhere)."""
    n = len(run)
    for i in range(len(tokens) - n, -1, -1):
        if tuple(tokens[i : i + n]) == run:
            return i
    return -1
