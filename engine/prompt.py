"""Render chat messages into prompt tokens with the model's chat template."""

from __future__ import annotations

from typing import Any

# Used when a model ships no chat template: ChatML, the most widely understood format.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Templates without tool support choke on None content; give them strings."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


def render_prompt(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> list[int]:
    """Token ids of `messages` rendered by the tokenizer's chat template (or ChatML)."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    template = getattr(hf, "chat_template", None)
    text = hf.apply_chat_template(
        _plain_messages(messages),
        chat_template=template or DEFAULT_CHAT_TEMPLATE,
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
        **template_kwargs,
    )
    # The template already wrote any BOS it wants; do not let the tokenizer add another.
    return list(hf.encode(text, add_special_tokens=False))


def render_continuation(tokenizer: Any, messages: list[dict[str, Any]]) -> list[int]:
    """Token ids that end inside the last (assistant) message, so the model writes on.

    The messages before it are rendered with the generation prompt and the reply's text
    is appended as tokens: the same shape as when the reply was first written, whatever
    the chat template.
    """
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("continuing needs an assistant message last")
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    head = render_prompt(tokenizer, messages[:-1])
    return head + list(hf.encode(messages[-1].get("content") or "", add_special_tokens=False))
