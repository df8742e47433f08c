"""Render a conversation with tools into prompt text.

Templates that support tools (a native format) get the tools and the OpenAI-style
messages directly. Templates without tool support get the fallback: the tools described in
the system prompt with the Hermes call format, past calls written into the assistant text
and tool results as `<tool_response>` user turns, so any chat template can carry the
conversation on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.prompt.chat import KNOWN_ROLES, render_chat
from engine.tools.definitions import ToolDefinitionError, ToolSpec
from engine.tools.formats import ToolFormat

FALLBACK_INTRO = (
    "You can call functions to help with the user's request. The functions are described "
    "as JSON within <tools></tools> tags:\n<tools>\n{tools}\n</tools>\n\n"
    "To call a function, write a JSON object with its name and arguments within "
    "<tool_call></tool_call> tags:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


_IMAGE_PARTS = ("image", "image_url", "input_image")


def _text_content(content: Any) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        if any(isinstance(p, dict) and p.get("type") in _IMAGE_PARTS for p in content):
            # a vision family's parts (`engine.prompt.images`): the template places them
            return [dict(p) for p in content if isinstance(p, dict)]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return json.dumps(content, ensure_ascii=False)


def normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copy OpenAI messages into the shape templates expect: string content (a picture's
    content parts stay parts), tool-call
    arguments as parsed objects, tool results carrying the called function's name."""
    out: list[dict[str, Any]] = []
    names_by_id: dict[str, str] = {}
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ToolDefinitionError(f"message {i + 1}: expected an object with a role")
        if message.get("role") not in KNOWN_ROLES:
            raise ToolDefinitionError(
                f"message {i + 1}: unknown role {message.get('role')!r} (a message's role is "
                "system, user, assistant or tool)"
            )
        role = message["role"]
        item: dict[str, Any] = {"role": role, "content": _text_content(message.get("content"))}
        if role == "assistant" and isinstance(message.get("reasoning_content"), str):
            item["reasoning_content"] = message["reasoning_content"]  # templates keep or drop it
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for j, call in enumerate(message["tool_calls"]):
                function = call.get("function", call) if isinstance(call, dict) else None
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    raise ToolDefinitionError(f"message {i + 1}, tool call {j + 1}: no name")
                name: str = function["name"]
                arguments = function.get("arguments", {})
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments) if arguments.strip() else {}
                    except json.JSONDecodeError as exc:
                        raise ToolDefinitionError(
                            f'message {i + 1}, tool call {j + 1} ("{name}"): arguments are '
                            f"not valid JSON: {exc.msg}"
                        ) from None
                call_id = str(call.get("id") or f"call_{i}_{j}")
                names_by_id[call_id] = name
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                )
            item["tool_calls"] = calls
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            item["tool_call_id"] = call_id
            result_of = message.get("name") or names_by_id.get(call_id)
            if result_of:
                item["name"] = result_of
        out.append(item)
    return out


def tools_system_prompt(tools: list[ToolSpec]) -> str:
    """The fallback system-prompt text describing `tools` and the Hermes call format."""
    lines = "\n".join(json.dumps(t.to_openai()["function"], ensure_ascii=False) for t in tools)
    return FALLBACK_INTRO.format(tools=lines)


def fallback_messages(
    messages: list[dict[str, Any]], tools: list[ToolSpec] | None, fmt: ToolFormat
) -> list[dict[str, Any]]:
    """Plain user/assistant/system messages carrying tools, calls and results as text."""
    out: list[dict[str, Any]] = []
    rest = messages
    if tools:
        system = tools_system_prompt(tools)
        if messages and messages[0]["role"] == "system":
            system = messages[0]["content"].rstrip() + "\n\n" + system
            rest = messages[1:]
        out.append({"role": "system", "content": system})
    merging = False  # consecutive tool results share one user turn
    for message in rest:
        role = message["role"]
        if role == "tool":
            block = f"<tool_response>\n{message['content']}\n</tool_response>"
            if merging:
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block})
            merging = True
            continue
        merging = False
        if role == "assistant" and message.get("tool_calls"):
            calls = [
                (c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]
            ]
            text = message["content"].rstrip()
            content = (text + "\n" if text else "") + fmt.calls_as_text(calls)
            out.append({"role": "assistant", "content": content})
        else:
            out.append({"role": role, "content": message["content"]})
    return out


def _system_into_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """`messages` with a leading system message folded into the first user message (None
    when there is no system message or no user message after it)."""
    if not messages or messages[0]["role"] != "system":
        return None
    rest = messages[1:]
    for i, message in enumerate(rest):
        if message["role"] == "user":
            content = messages[0]["content"].rstrip() + "\n\n" + message["content"]
            return [*rest[:i], {**message, "content": content}, *rest[i + 1 :]]
    return None


def render_chat_with_tools(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: list[ToolSpec] | None,
    fmt: ToolFormat,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The prompt text for `messages` with `tools` (None: the tools are not offered);
    `template_kwargs` go to the template as well (`enable_thinking`)."""
    normalized = normalize_messages(messages)
    if fmt.native:
        rendered = fmt.adapt_messages(normalized)
        kwargs: dict[str, Any] = {}
        if tools:
            kwargs["tools"] = fmt.adapt_tools([dict(t.to_openai()) for t in tools])
    else:
        rendered = fallback_messages(normalized, tools, fmt)
        kwargs = {}
    try:
        try:
            return render_chat(
                tokenizer,
                rendered,
                none_content_of_calls=fmt.native and fmt.call_content_none,
                **kwargs,
                **(template_kwargs or {}),
            )
        except Exception:
            # Templates without a system role (Gemma 2) raise on the fallback's system
            # prompt: it goes at the head of the first user turn instead.
            merged = _system_into_user(rendered)
            if fmt.native or merged is None:
                raise
            return render_chat(tokenizer, merged, **(template_kwargs or {}))
    except Exception as exc:  # jinja errors and template raise_exception()
        raise ToolDefinitionError(
            f"the chat template could not render the conversation: {exc}"
        ) from exc


def reply_cuts(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: list[ToolSpec] | None,
    fmt: ToolFormat,
    template_kwargs: Mapping[str, Any] | None,
    text: str,
) -> list[int]:
    """Where in `text` (the rendering of `messages` with `tools`) each earlier assistant
    reply's generation prompt ends: the prompt that reply was written after, where the
    template renders the reply right after it."""
    cuts: list[int] = []
    for index, message in enumerate(messages):
        if index == 0 or message.get("role") != "assistant":
            continue
        try:
            head = render_chat_with_tools(tokenizer, messages[:index], tools, fmt, template_kwargs)
        except ToolDefinitionError:  # the template wants more than this prefix: no cut here
            continue
        if (
            0 < len(head) < len(text)
            and text.startswith(head)
            and (not cuts or len(head) > cuts[-1])
        ):
            cuts.append(len(head))
    return cuts
