"""A model's reasoning format, found from its chat template and tokenizer, and where a reply
starts with respect to its thinking block.

`detect_reasoning` recognises `<think>…</think>` models (Qwen3 and its successors with
`enable_thinking`, DeepSeek-R1 distills whose generation prompt opens the block, Magistral)
when both tags are single tokens the template writes, and gpt-oss's channels. A model
without one gets None and is served exactly as before.

`thinking_kwargs` is what the template is given for a request (`enable_thinking`), and
`reply_start` reads the rendered prompt: the reply starts inside an open block, before
one it may open, or with thinking closed (switched off).
"""

from __future__ import annotations

from typing import Any, Literal

from engine.prompt.tokenizer import ModelTokenizer
from engine.types import ReasoningFormat

# Tag pairs, most common first.
_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"), ("[THINK]", "[/THINK]"))
_CHANNEL_START, _CHANNEL_END = "<|channel|>analysis<|message|>", "<|end|>"

# "before": the reply may open a thinking block; "inside": the prompt opened it; "off": no
# thinking this reply (switched off, or closed by the prompt).
ReplyStart = Literal["before", "inside", "off"]


def detect_reasoning(tokenizer: Any) -> ReasoningFormat | None:
    """The reasoning format of the model whose tokenizer is `tokenizer` (a ModelTokenizer,
    mlx-lm's wrapper or a Hugging Face tokenizer), or None if its template has none."""
    tok = ModelTokenizer.of(tokenizer)
    template = tok.chat_template or ""
    if "<|channel|>" in template and "analysis" in template:
        return ReasoningFormat("channels", _CHANNEL_START, _CHANNEL_END)
    for start, end in _TAGS:
        if start not in template and end not in template:
            continue
        start_id, end_id = _single(tok, start), _single(tok, end)
        if start_id is None or end_id is None:
            continue
        switchable = "enable_thinking" in template
        fmt = ReasoningFormat("think_tags", start, end, start_id, end_id, switchable)
        opens = reply_start(fmt, _probe(tok, fmt)) == "inside"
        return ReasoningFormat("think_tags", start, end, start_id, end_id, switchable, opens)
    return None


def _single(tok: ModelTokenizer, text: str) -> int | None:
    found = tok.added_token_id(text)
    if found is not None:
        return found
    ids = tok.encode(text)
    return ids[0] if len(ids) == 1 else None


def _probe(tok: ModelTokenizer, fmt: ReasoningFormat) -> list[int]:
    """The generation prompt of a one-message conversation, thinking on."""
    messages = [{"role": "user", "content": "hi"}]
    try:
        text = tok.apply_chat_template(messages, **thinking_kwargs(fmt, True))
    except Exception:  # a template that needs more than this; it cannot open the block then
        return []
    return tok.encode(text)


def thinking_kwargs(fmt: ReasoningFormat | None, think: bool) -> dict[str, Any]:
    """What the chat template is given for a reply that thinks (or not)."""
    if fmt is None or not fmt.switchable:
        return {}
    return {"enable_thinking": think}


def wants_thinking(fmt: ReasoningFormat | None, think: bool | None) -> bool:
    """Whether a reply thinks: the request's choice, else on for a model that can."""
    if fmt is None or not fmt.steerable:
        return False
    return True if think is None else think


def reply_start(fmt: ReasoningFormat, prompt: list[int]) -> ReplyStart:
    """Where a reply to `prompt` starts: inside a block the prompt opened and left open,
    after a block the prompt closed at its very end (thinking off), or before any."""
    if fmt.start_id is None or fmt.end_id is None:
        return "off"
    last_start = _last(prompt, fmt.start_id)
    last_end = _last(prompt, fmt.end_id)
    if last_start > last_end:
        return "inside"
    # the template closed an empty block at the end (Qwen3 with enable_thinking false)
    if last_end >= 0 and last_end >= len(prompt) - 3 and last_start > len(prompt) - 8:
        return "off"
    return "before"


def _last(tokens: list[int], token: int) -> int:
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i] == token:
            return i
    return -1
