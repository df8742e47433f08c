"""Responses bodies into the engine's ChatRequest, checked at the edge.

`input` (text or items) becomes chat messages: `message` items by role, neighbouring
`function_call` items one assistant turn's tool calls, `function_call_output` items tool
messages; `instructions` the system message. A stored response named by
`previous_response_id` puts its conversation first. Function tools, `tool_choice` and
`text.format` become the same tool definitions and constraints as in chat completions,
so every call's arguments fit its parameters and every JSON reply its schema.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.constraints.sources import any_json_constraint, json_schema_constraint
from engine.server.compat import HOSTED_TOOLS
from engine.server.config import ServerConfig
from engine.server.errors import APIError, from_validation_error
from engine.server.images import ImagePolicy, from_url
from engine.server.openai_responses.schemas import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MediaPart,
    MessageItem,
    ReasoningItem,
    ResponsesBody,
    TextPart,
)
from engine.server.translate import (
    Check,
    Prepared,
    checked_constraint,
    reasoning_settings,
    sampling_settings,
)
from engine.server.translate import tool_setup as shared_tool_setup
from engine.types import ChatMessage, ChatRequest, ConstraintSpec, ImageInput, ToolChoiceOption

log = logging.getLogger("corral.server.compat")

_ITEMS: dict[str, type[BaseModel]] = {
    "message": MessageItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
    "reasoning": ReasoningItem,
}


@dataclass
class Translated:
    """The request for the engine, and the conversation it continues (without the
    instructions), which a stored response keeps."""

    prepared: Prepared
    conversation: list[ChatMessage]


def compiles(body: ResponsesBody) -> bool:
    fmt = body.text.format if body.text is not None else None
    return bool(body.tools or (fmt is not None and fmt.type != "text"))


def responses_request(
    body: ResponsesBody,
    previous: list[ChatMessage] | None,
    config: ServerConfig,
    check: Check,
) -> Translated:
    """The ChatRequest for a Responses body after the `previous` conversation."""
    warnings: list[str] = []
    constraint, constraint_param = _constraint(body, check, warnings)
    label: str | None = constraint.name if constraint is not None else None
    tools = None
    tool_choice: ToolChoiceOption = "auto"
    if body.tools and (offered := _offered_tools(body.tools, warnings)):
        tools, tool_choice, tools_label = _tools(offered, body.tool_choice, constraint_param)
        label = tools_label or label
    elif body.tool_choice not in (None, "none", "auto"):
        raise APIError(400, "tool_choice: no tools were given", param="tool_choice")
    conversation = list(previous or []) + _input(body.input, config.allow_image_urls)
    if not conversation:
        raise APIError(400, "input: empty", param="input")
    system: list[ChatMessage] = (
        [{"role": "system", "content": body.instructions}] if body.instructions else []
    )
    request = ChatRequest(
        messages=system + conversation,
        sampling=sampling_settings(
            config,
            body.max_output_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            top_k=body.top_k,
            min_p=body.min_p,
            repetition_penalty=body.repetition_penalty,
            seed=body.seed,
            **_reasoning(body.reasoning),
        ),
        constraint=constraint,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=body.parallel_tool_calls is not False,
    )
    return Translated(Prepared(request, label, warnings), conversation)


def _reasoning(reasoning: dict[str, Any] | None) -> dict[str, Any]:
    """`think` and `max_thinking_tokens` from `reasoning.effort` ("none": no thinking)."""
    effort = (reasoning or {}).get("effort")
    if effort is not None and not isinstance(effort, str):
        raise APIError(400, "reasoning.effort must be a string", param="reasoning.effort")
    think, budget = reasoning_settings(effort, "reasoning.effort")
    return {"think": think, "max_thinking_tokens": budget}


def _constraint(
    body: ResponsesBody, check: Check, warnings: list[str]
) -> tuple[ConstraintSpec | None, str | None]:
    fmt = body.text.format if body.text is not None else None
    if fmt is None or fmt.type == "text":
        return None, None
    if fmt.type == "json_object":
        param = "text.format"
        return checked_constraint(any_json_constraint, param, check, warnings), param
    param = "text.format.schema"
    schema = fmt.schema_
    if schema is None:
        raise APIError(400, f'{param}: required when type is "json_schema"', param=param)
    spec = checked_constraint(
        lambda: json_schema_constraint(schema, fmt.name), param, check, warnings, schema
    )
    return spec, param


def _offered_tools(
    tools: list[dict[str, Any]], warnings: list[str]
) -> list[tuple[int, dict[str, Any]]]:
    """(index, tool) of the tools the model is offered: those of the provider's own service
    (web search, namespaces of them: compat.HOSTED_TOOLS) are left out, with a warning."""
    offered = []
    for i, tool in enumerate(tools):
        if tool.get("type") in HOSTED_TOOLS:
            warnings.append(f"tools[{i}]: {tool['type']!r} tools are left out on a local server")
            log.debug("left out tools[%d] (%s)", i, tool["type"])
        else:
            offered.append((i, tool))
    return offered


def _tools(
    offered: list[tuple[int, dict[str, Any]]], choice: Any, constraint_param: str | None
) -> tuple[Any, Any, str | None]:
    definitions = []
    for i, tool in offered:
        if tool.get("type") != "function":
            raise APIError(
                400,
                f"tools[{i}]: {tool.get('type')!r} tools are not supported by a local server; "
                "give function tools",
                param=f"tools[{i}].type",
                code="unsupported_parameter",
            )
        function = {k: v for k, v in tool.items() if k in ("name", "description", "parameters")}
        unknown = sorted(set(tool) - {"type", "name", "description", "parameters", "strict"})
        if unknown:
            raise APIError(
                400,
                f"tools[{i}]: unrecognized argument {unknown[0]}",
                param=f"tools[{i}].{unknown[0]}",
            )
        definitions.append({"type": "function", "function": function})
    if isinstance(choice, dict) and choice.get("type") == "function":  # {"type", "name"}
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    try:
        return shared_tool_setup(definitions, choice or "auto", constraint_param)
    except APIError as exc:
        message = exc.message.replace(".function.", ".")
        param = exc.param.replace(".function.", ".") if exc.param else None
        raise APIError(exc.status, message, param=param, code=exc.code) from None


def _item(data: dict[str, Any], where: str) -> BaseModel:
    kind = data.get("type", "message")
    model = _ITEMS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise APIError(
            400,
            f"{where}: {kind!r} items are not supported (message, function_call, "
            "function_call_output and reasoning are)",
            param=f"{where}.type",
            code="unsupported_parameter",
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = from_validation_error(exc)
        param = f"{where}.{error.param}" if error.param else where
        raise APIError(400, f"{where}.{error.message}", param=param, code=error.code) from None


def _text(content: str | list[Any], where: str, joiner: str = "") -> str:
    if isinstance(content, str):
        return content
    pieces = []
    for k, part in enumerate(content):
        if isinstance(part, MediaPart) and part.type == "input_image":
            continue  # read by _images
        if isinstance(part, MediaPart):
            raise APIError(
                400,
                f"{where}[{k}]: {part.type} parts are not supported; this model reads text only",
                param=f"{where}[{k}]",
                code="unsupported_content",
            )
        assert isinstance(part, TextPart)
        pieces.append(part.text)
    return joiner.join(pieces)


def _images(content: str | list[Any], where: str, allow_urls: bool) -> list[ImageInput]:
    """The `input_image` parts of a message (`image_url`: a data: URL, or a URL where the
    server allows)."""
    found = []
    for k, part in enumerate(content if isinstance(content, list) else []):
        if isinstance(part, MediaPart) and part.type == "input_image":
            at = f"{where}[{k}]"
            url = (part.model_extra or {}).get("image_url")
            if not isinstance(url, str):
                raise APIError(400, f"{at}.image_url: a data: URL is required", param=at)
            found.append(from_url(url, at, ImagePolicy(allow_urls=allow_urls)))
    return found


def _input(given: str | list[dict[str, Any]], allow_urls: bool = False) -> list[ChatMessage]:
    if isinstance(given, str):
        return [{"role": "user", "content": given}] if given else []
    out: list[ChatMessage] = []
    names: dict[str, str] = {}  # call_id -> function name, for the outputs
    for i, data in enumerate(given):
        where = f"input[{i}]"
        if not isinstance(data, dict):
            raise APIError(400, f"{where}: must be an object", param=where)
        item = _item(data, where)
        if isinstance(item, MessageItem):
            role = "system" if item.role == "developer" else item.role
            message: ChatMessage = {
                "role": role,
                "content": _text(item.content, f"{where}.content"),
            }
            if images := _images(item.content, f"{where}.content", allow_urls):
                message["images"] = images
            out.append(message)
        elif isinstance(item, FunctionCallItem):
            try:
                arguments = json.loads(item.arguments) if item.arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise APIError(
                    400,
                    f"{where}.arguments: not valid JSON ({exc.msg})",
                    param=f"{where}.arguments",
                ) from None
            if not isinstance(arguments, dict):
                raise APIError(
                    400, f"{where}.arguments: must be a JSON object", param=f"{where}.arguments"
                )
            names[item.call_id] = item.name
            call: Any = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": arguments},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":  # one turn's calls together
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif isinstance(item, FunctionCallOutputItem):
            result: ChatMessage = {
                "role": "tool",
                "tool_call_id": item.call_id,
                "content": _text(item.output, f"{where}.output"),
            }
            if item.call_id in names:
                result["name"] = names[item.call_id]
            out.append(result)
    return out
