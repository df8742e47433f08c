"""Render chat messages with the model's chat template: as text, and as prompt tokens.

`render_chat` is the one place a conversation becomes prompt text (tool requests add their
tools and messages in `engine.tools.prompt` and render here too), so the same history gives
the same text, and shares the prompt cache, with tools on or off. Messages are untrusted:
their roles must be known ones, and `encode_chat` tokenizes their text as plain text, so
only the template's own markers become control tokens (`engine.prompt.shield`). System
messages after the first stay in place where the template renders them there, and join the
system prompt where it refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from engine.prompt.images import rewrite_images, with_image_markers
from engine.prompt.shield import TextShield
from engine.prompt.tokenizer import ModelTokenizer

KNOWN_ROLES = ("system", "user", "assistant", "tool")


def check_roles(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise ValueError naming the first message whose role is not one a chat has."""
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in KNOWN_ROLES:
            raise ValueError(
                f"message {index + 1}: unknown role {role!r} (a message's role is "
                f"{', '.join(KNOWN_ROLES[:-1])} or {KNOWN_ROLES[-1]})"
            )


def _plain_messages(
    messages: Sequence[Mapping[str, Any]], none_content_of_calls: bool = False
) -> list[dict[str, Any]]:
    """Templates without tool support choke on None content; give them strings (but for a
    call turn whose template wants its empty text as None, when told so)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None and not (none_content_of_calls and m.get("tool_calls")):
            m["content"] = ""
        out.append(m)
    return out


def render_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    none_content_of_calls: bool = False,
    **template_kwargs: Any,
) -> str:
    """`messages` as prompt text, by the tokenizer's chat template (or ChatML).

    `tokenizer` is a ModelTokenizer, mlx-lm's TokenizerWrapper or a Hugging Face tokenizer;
    `template_kwargs` go to the template (`tools=...`); `none_content_of_calls` keeps a
    call turn's None text (the call format's choice: DeepSeek R1's llama.cpp template).
    Raises ValueError for a message whose role is unknown (templates would render it
    silently).
    """
    check_roles(messages)
    tok = ModelTokenizer.of(tokenizer)
    plain = _plain_messages(messages, none_content_of_calls)
    try:
        return tok.apply_chat_template(
            plain, add_generation_prompt=add_generation_prompt, **template_kwargs
        )
    except (ValueError, jinja2.TemplateError):
        merged = merge_system_messages(plain)
        if merged == plain:
            raise
    # The template refuses a system message after the first (agents send them mid-
    # conversation): it joins the system prompt instead.
    return tok.apply_chat_template(
        merged, add_generation_prompt=add_generation_prompt, **template_kwargs
    )


def merge_system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with every system message's text joined into one system message first,
    in their order; the other messages unchanged."""
    systems = [m for m in messages if m.get("role") == "system"]
    if len(systems) < 2 and (not systems or messages[0] is systems[0]):
        return messages
    text = "\n\n".join(str(m.get("content") or "") for m in systems)
    return [{"role": "system", "content": text}] + [m for m in messages if m["role"] != "system"]


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> list[int]:
    """Token ids of `messages` rendered by `render_chat`: the template's markers as control
    tokens, the messages' (and tools') text as plain text, whatever it contains.

    Each earlier reply starts a new piece of text to tokenize where the template renders it
    after the very prompt it was generated from, so the reply's tokens follow that prompt's
    tokens unchanged (a generation prompt ending in "\n\n" would otherwise merge with the
    reply's first word) and the prompt cache reuses the whole turn."""
    check_roles(messages)
    shield = TextShield(tokenizer)
    shown = with_image_markers(tokenizer, shield.value(list(messages)))
    kwargs = shield.value(template_kwargs)
    text = render_chat(shield.tok, shown, add_generation_prompt=add_generation_prompt, **kwargs)
    # The template already wrote any BOS it wants; the shield adds none.
    cuts = reply_starts(shield.tok, shown, text, kwargs)
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    # Image markers are rewritten within each piece (a marker never spans a reply's start).
    return [
        token
        for piece in pieces
        if piece
        for token in shield.encode(rewrite_images(tokenizer, piece))
    ]


def reply_starts(
    tokenizer: Any, messages: list[dict[str, Any]], text: str, template_kwargs: dict[str, Any]
) -> list[int]:
    """Where in `text` (the rendering of `messages`) each assistant reply's generation
    prompt ends, for the replies the template renders right after that prompt."""
    cuts: list[int] = []
    for index, message in enumerate(messages):
        if index == 0 or message.get("role") != "assistant":
            continue
        try:
            head = render_chat(tokenizer, messages[:index], **template_kwargs)
        except ValueError:  # the template wants more than this prefix; no cut here
            continue
        if (
            0 < len(head) < len(text)
            and text.startswith(head)
            and (not cuts or len(head) > cuts[-1])
        ):
            cuts.append(len(head))
    return cuts


def render_continuation(tokenizer: Any, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Token ids that end inside the last (assistant) message, so the model writes on.

    The messages before it are rendered with the generation prompt and the reply's text
    is appended as tokens: the same shape as when the reply was first written, whatever
    the chat template.
    """
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("continuing needs an assistant message last")
    head = encode_chat(tokenizer, messages[:-1])
    shield = TextShield(tokenizer)
    return head + shield.encode(shield.text(str(messages[-1].get("content") or "")))
