"""Render chat messages with the model's chat template: as text, and as prompt tokens.

`render_chat` is the one place a conversation becomes prompt text (tool requests add their
tools and messages in `engine.tools.prompt` and render here too), so the same history gives
the same text, and shares the prompt cache, with tools on or off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.tokenizer import ModelTokenizer


def _plain_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Templates without tool support choke on None content; give them strings."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


def render_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> str:
    """`messages` as prompt text, by the tokenizer's chat template (or ChatML).

    `tokenizer` is a ModelTokenizer, mlx-lm's TokenizerWrapper or a Hugging Face tokenizer;
    `template_kwargs` go to the template (`tools=...`).
    """
    return ModelTokenizer.of(tokenizer).apply_chat_template(
        _plain_messages(messages), add_generation_prompt=add_generation_prompt, **template_kwargs
    )


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> list[int]:
    """Token ids of `messages` rendered by `render_chat`."""
    tok = ModelTokenizer.of(tokenizer)
    text = render_chat(
        tok, messages, add_generation_prompt=add_generation_prompt, **template_kwargs
    )
    # The template already wrote any BOS it wants; do not let the tokenizer add another.
    return tok.encode(text)
