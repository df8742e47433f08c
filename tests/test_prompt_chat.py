"""engine/prompt/chat.py: system messages after the first stay in place where the chat
template renders them there, and join the system prompt where it refuses them (agents such
as Claude Code send them mid-conversation)."""

from __future__ import annotations

from typing import Any

from engine.prompt.chat import merge_system_messages, render_chat

# A template that, as many do, takes a system message only first.
REFUSING = (
    "{% for m in messages %}"
    "{% if m.role == 'system' and not loop.first %}"
    "{{ raise_exception('System message must be at the beginning') }}"
    "{% endif %}"
    "<{{ m.role }}>{{ m.content }}</{{ m.role }}>"
    "{% endfor %}"
)
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "system", "content": "Tools: Bash."},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "List files"},
]


def test_a_template_that_renders_system_messages_in_place_keeps_them_there(tiny_model) -> None:
    text = render_chat(tiny_model[1], CONVERSATION)
    assert text.index("Hi") < text.index("Tools: Bash.") < text.index("Hello")


def test_a_template_that_refuses_them_gets_them_in_the_system_prompt(tiny_model) -> None:
    text = render_chat(tiny_model[1], CONVERSATION, chat_template=REFUSING)
    assert text.startswith("<system>Be brief.\n\nTools: Bash.</system><user>Hi</user>")
    assert text.count("<system>") == 1


def test_merging_keeps_the_order_of_everything_else() -> None:
    merged = merge_system_messages(CONVERSATION)
    assert [m["role"] for m in merged] == ["system", "user", "assistant", "user"]
    lone = [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]
    assert merge_system_messages(lone)[0] == {"role": "system", "content": "b"}
    assert merge_system_messages(CONVERSATION[:2]) == CONVERSATION[:2]
