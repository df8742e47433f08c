"""Anthropic Messages bodies into the engine's ChatRequest, checked at the edge.

The conversation becomes chat messages (`tool_use` blocks the assistant's tool calls,
`tool_result` blocks tool messages, `system` the system message), tools and
`tool_choice` become the same tool definitions chat completions use (so every
`tool_use` input is constrained by the tool's `input_schema`), and
`output_config.format` the same JSON-schema constraint as `response_format`. What
cannot be served is a 400 whose message and `param` say where, in Anthropic's terms.
"""

from __future__ import annotations

from typing import Any

from engine.constraints.sources import json_schema_constraint
from engine.server.anthropic.schemas import (
    CountTokensBody,
    MediaBlock,
    Message,
    MessagesBody,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from engine.server.config import ServerConfig
from engine.server.errors import APIError
from engine.server.images import ImagePolicy, from_base64, from_url
from engine.server.translate import (
    Check,
    Prepared,
    checked_constraint,
    reasoning_settings,
    sampling_settings,
    tool_setup,
)
from engine.types import ChatMessage, ChatRequest, ConstraintSpec, ImageInput, ToolChoiceOption

SCHEMA_PARAM = "output_config.format.schema"


def compiles(body: CountTokensBody | MessagesBody) -> bool:
    """Whether translating `body` compiles something (tools or a schema)."""
    config = body.output_config
    return bool(body.tools or (config is not None and config.format is not None))


def messages_request(
    body: MessagesBody | CountTokensBody, config: ServerConfig, check: Check
) -> Prepared:
    """The ChatRequest for a Messages (or count_tokens) body; APIError(400) for what
    cannot be served."""
    warnings: list[str] = []
    constraint = _constraint(body, check, warnings)
    label: str | None = constraint.name if constraint is not None else None
    tools = None
    tool_choice: ToolChoiceOption = "auto"
    parallel = True
    if body.tools:
        tools, tool_choice, tools_label = _tools(body, constraint is not None)
        label = tools_label or label
        parallel = not (body.tool_choice and body.tool_choice.disable_parallel_tool_use)
    elif body.tool_choice is not None and body.tool_choice.type in ("any", "tool"):
        raise APIError(400, "tool_choice: no tools were given", param="tool_choice")
    messages = _messages(body, config.allow_image_urls)
    ends_in_reply = messages[-1]["role"] == "assistant"
    if isinstance(body, MessagesBody):
        sampling = sampling_settings(
            config,
            body.max_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            top_k=body.top_k,
            seed=body.seed,
            stop=body.stop_sequences,
            stop_param="stop_sequences",
        )
        sampling.think, sampling.max_thinking_tokens = _thinking(body)
    else:
        sampling = sampling_settings(config, 1)
    request = ChatRequest(
        messages=messages,
        sampling=sampling,
        constraint=constraint,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        # A last assistant message is the start of the reply, which the model continues.
        continue_final_message=ends_in_reply,
    )
    return Prepared(request, label, warnings)


def _thinking(body: MessagesBody) -> tuple[bool | None, int | None]:
    """(think, budget) from `thinking` (enabled with `budget_tokens`, or disabled) and
    `output_config.effort`, for a model that thinks."""
    effort = body.output_config.effort if body.output_config is not None else None
    think, budget = reasoning_settings(effort, "output_config.effort")
    thinking = body.thinking
    if thinking is not None and thinking.type == "disabled":
        return False, None
    if thinking is not None and thinking.type == "enabled":
        think = True
        if thinking.budget_tokens is not None:
            if thinking.budget_tokens < 0:
                raise APIError(
                    400, "thinking.budget_tokens must be >= 0", param="thinking.budget_tokens"
                )
            budget = thinking.budget_tokens
    return think, budget


def _constraint(
    body: CountTokensBody | MessagesBody, check: Check, warnings: list[str]
) -> ConstraintSpec | None:
    config = body.output_config
    if config is None or config.format is None:
        return None
    schema = config.format.schema_
    return checked_constraint(
        lambda: json_schema_constraint(schema, "output"), SCHEMA_PARAM, check, warnings, schema
    )


def _tools(
    body: CountTokensBody | MessagesBody, constrained: bool
) -> tuple[Any, ToolChoiceOption, str | None]:
    assert body.tools is not None
    definitions: list[dict[str, Any]] = []
    for i, tool in enumerate(body.tools):
        if tool.type not in (None, "custom"):
            raise APIError(
                400,
                f"tools[{i}]: {tool.type!r} is one of Anthropic's server tools, which a local "
                "server does not have; give client tools (name, description, input_schema)",
                param=f"tools[{i}].type",
                code="unsupported",
            )
        function: dict[str, Any] = {"name": tool.name}
        if tool.description is not None:
            function["description"] = tool.description
        function["parameters"] = (
            tool.input_schema if tool.input_schema is not None else {"type": "object"}
        )
        definitions.append({"type": "function", "function": function})
    try:
        return tool_setup(
            definitions, _choice(body.tool_choice), SCHEMA_PARAM if constrained else None
        )
    except APIError as exc:
        raise _in_anthropic_terms(exc) from None


def _choice(choice: ToolChoice | None) -> Any:
    if choice is None or choice.type == "auto":
        return "auto"
    if choice.type == "any":
        return "required"
    if choice.type == "none":
        return "none"
    if not choice.name:
        raise APIError(
            400, 'tool_choice.name: required when type is "tool"', param="tool_choice.name"
        )
    return {"type": "function", "function": {"name": choice.name}}


def _in_anthropic_terms(exc: APIError) -> APIError:
    """A tool error from the shared checks, its place named as Anthropic's body has it."""

    def rename(text: str) -> str:
        return text.replace(".function.parameters", ".input_schema").replace(
            '"parameters"', '"input_schema"'
        )

    return APIError(
        exc.status,
        rename(exc.message),
        param=rename(exc.param) if exc.param else None,
        code=exc.code,
    )


def _text_of(blocks: list[Any], where: str) -> str:
    pieces = []
    for k, block in enumerate(blocks):
        if isinstance(block, MediaBlock):
            raise _media(block, f"{where}[{k}]")
        pieces.append(block.text)
    return "\n\n".join(pieces)


def _media(block: MediaBlock, where: str) -> APIError:
    return APIError(
        400,
        f"{where}: {block.type} blocks are not supported; this model reads text only",
        param=where,
        code="unsupported_content",
    )


def _messages(body: CountTokensBody | MessagesBody, allow_urls: bool = False) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    if isinstance(body.system, str) and body.system:
        out.append({"role": "system", "content": body.system})
    elif isinstance(body.system, list) and body.system:
        out.append({"role": "system", "content": "\n\n".join(b.text for b in body.system)})
    names: dict[str, str] = {}  # tool_use id -> tool name, for the tool results
    for i, message in enumerate(body.messages):
        out += _message(message, f"messages[{i}]", names, allow_urls)
    return out


def _system_text(blocks: list[Any], where: str) -> str:
    """The text of a system message's blocks (text blocks only)."""
    for k, block in enumerate(blocks):
        if not isinstance(block, TextBlock):
            at = f"{where}.content[{k}]"
            raise APIError(
                400, f"{at}: a system message holds text blocks, not {block.type}", param=at
            )
    return "\n\n".join(block.text for block in blocks)


def _image(block: MediaBlock, where: str, allow_urls: bool) -> ImageInput:
    """An `image` block's picture: a base64 source, or a URL source where the server allows."""
    source = (block.model_extra or {}).get("source")
    if not isinstance(source, dict):
        raise APIError(400, f"{where}.source: an image block needs a source", param=where)
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return from_base64(source["data"], source.get("media_type"), where)
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return from_url(source["url"], where, ImagePolicy(allow_urls=allow_urls))
    raise APIError(
        400, f"{where}.source: give a base64 source (type, media_type, data)", param=where
    )


def _message(
    message: Message, where: str, names: dict[str, str], allow_urls: bool = False
) -> list[ChatMessage]:
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    if message.role == "system":
        return [{"role": "system", "content": _system_text(message.content, where)}]
    images: list[ImageInput] = []
    texts: list[str] = []
    calls: list[Any] = []
    results: list[ChatMessage] = []
    for k, block in enumerate(message.content):
        at = f"{where}.content[{k}]"
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, MediaBlock) and block.type == "image" and message.role == "user":
            images.append(_image(block, at, allow_urls))
        elif isinstance(block, MediaBlock):
            raise _media(block, at)
        elif isinstance(block, ToolUseBlock):
            if message.role != "assistant":
                raise APIError(400, f"{at}: tool_use blocks belong to assistant messages", param=at)
            names[block.id] = block.name
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": block.input},
                }
            )
        elif isinstance(block, ToolResultBlock):
            if message.role != "user":
                raise APIError(400, f"{at}: tool_result blocks belong to user messages", param=at)
            content = block.content
            text = content if isinstance(content, str) else _text_of(content, f"{at}.content")
            result: ChatMessage = {
                "role": "tool",
                "tool_call_id": block.tool_use_id,
                "content": f"Error: {text}" if block.is_error else text,
            }
            if block.tool_use_id in names:
                result["name"] = names[block.tool_use_id]
            results.append(result)
        else:
            assert isinstance(block, ThinkingBlock)  # an earlier reply's thinking: left out
    if message.role == "assistant":
        reply: ChatMessage = {"role": "assistant", "content": "".join(texts)}
        if calls:
            reply["tool_calls"] = calls
        return [reply]
    user: list[ChatMessage] = (
        [{"role": "user", "content": "\n\n".join(texts)}] if texts or images else []
    )
    if images:
        user[0]["images"] = images
    return results + user if results else user or [{"role": "user", "content": ""}]
