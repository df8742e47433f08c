"""HTTP bodies into the engine's one request type, checked at the edge.

Everything a client can get wrong is caught here with a 400 naming the field (fields
Corral does not implement are screened before, by engine/server/compat.py): content a
text model cannot read, tool definitions, and grammars or schemas that do not compile
(with llguidance's line and column). Compiling checks run off the event
loop (`needs_worker`); their outcome is cached, since clients repeat the same schema and
tools request after request.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.constraints import ConstraintError
from engine.constraints.sources import (
    any_json_constraint,
    constraint_from_text,
    json_schema_constraint,
)
from engine.errors import ModelLoadError, ModelUnavailableError
from engine.server.config import ServerConfig
from engine.server.errors import APIError, model_unavailable
from engine.server.schema_errors import schema_error_path
from engine.server.schemas import (
    MAX_STOP_STRINGS,
    ChatCompletionBody,
    CompletionBody,
    ContentPart,
    MessageBody,
    MessageToolCall,
    _Generation,
)
from engine.tools import ToolDefinitionError, validate_tools
from engine.tools.grammar import resolve_choice
from engine.types import (
    MAX_TOP_LOGPROBS,
    ChatMessage,
    ChatRequest,
    ConstraintSpec,
    SamplingSettings,
    ToolCallMessage,
    ToolChoiceOption,
    ToolDefinition,
    effort_budget,
)

if TYPE_CHECKING:
    from engine.api import EngineAPI


# Choices one request may ask for (`n`): they decode side by side, one row each.
MAX_CHOICES = 16


@dataclass
class Prepared:
    """A request ready for the engine, with what the server reports beside the reply."""

    request: ChatRequest
    constraint: str | None = None  # what constrains the reply, for the log
    warnings: list[str] = field(default_factory=list)
    n: int = 1  # choices: replies to the request, decoded side by side


Check = Callable[[ConstraintSpec], "CheckedConstraint"]


def needs_worker(body: _Generation) -> bool:
    """Whether translating `body` compiles something (schema, grammar, tools)."""
    rf = body.response_format
    tools = getattr(body, "tools", None)
    return bool(body.grammar or (rf and rf.type != "text") or tools)


def chat_request(body: ChatCompletionBody, config: ServerConfig, check: Check) -> Prepared:
    """The ChatRequest for a chat completion body; APIError(400) for what cannot be served."""
    warnings: list[str] = []
    constraint, constraint_param = _constraint(body, check, warnings)
    tools = None
    tool_choice: ToolChoiceOption = "auto"
    label: str | None = constraint.kind if constraint else None
    if body.tools is not None:
        tools, tool_choice, tools_label = tool_setup(
            body.tools, body.tool_choice, constraint_param if constraint else None
        )
        label = tools_label or label
    elif body.tool_choice not in (None, "none", "auto"):
        raise APIError(400, "tool_choice: no tools were given", param="tool_choice")
    request = ChatRequest(
        messages=[_message(m, i, config) for i, m in enumerate(body.messages)],
        sampling=_chat_sampling(body, config),
        constraint=constraint,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        logprobs=_chat_logprobs(body),
    )
    return Prepared(request, label, warnings, _choices(body))


def completion_request(body: CompletionBody, config: ServerConfig, check: Check) -> Prepared:
    """The ChatRequest (a raw prompt) for a text completion body."""
    prompt = body.prompt
    if isinstance(prompt, list):
        if len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        elif all(isinstance(p, str) for p in prompt):
            raise APIError(
                400,
                "prompt: several prompts in one request are not supported yet; send one each",
                param="prompt",
                code="unsupported_parameter",
            )
        else:
            raise APIError(
                400, "prompt: token-id prompts are not supported; send text", param="prompt"
            )
    if not isinstance(prompt, str) or not prompt:
        raise APIError(400, "prompt: empty", param="prompt")
    warnings: list[str] = []
    constraint, _ = _constraint(body, check, warnings)
    request = ChatRequest(
        messages=[],
        sampling=_sampling(body, body.max_tokens, config),
        constraint=constraint,
        raw_prompt=prompt,
        logprobs=_completion_logprobs(body),
    )
    return Prepared(request, constraint.kind if constraint else None, warnings, _choices(body))


# ---- pieces the dialects share ----


def tool_setup(
    tools: list[dict[str, Any]], tool_choice: Any, constraint_param: str | None
) -> tuple[list[ToolDefinition], ToolChoiceOption, str | None]:
    """OpenAI-shaped `tools` checked, with `tool_choice` resolved against them: (the tools,
    the choice, the log's label; None under "none"). `constraint_param` names the
    request's own constraint, if it has one: it cannot apply when the choice forces a call.
    APIError(400) naming the tool (`tools[i].function.parameters...`) for what is wrong."""
    try:
        specs = validate_tools(tools)
    except ToolDefinitionError as exc:
        param = _tool_param(tools, str(exc))
        raise APIError(400, f"tools: {exc}", param=param, code="invalid_tools") from None
    try:
        choice = resolve_choice(tool_choice, specs)
    except ToolDefinitionError as exc:
        raise APIError(400, f"tool_choice: {exc}", param="tool_choice") from None
    if constraint_param is not None and choice.mode in ("required", "function"):
        raise APIError(
            400,
            f"{constraint_param} cannot apply when tool_choice forces a call: the reply "
            'is the call. Use tool_choice "auto" (a text reply then follows it) or "none"',
            param=constraint_param,
            code="unsupported_combination",
        )
    option: ToolChoiceOption
    if choice.mode == "function" and choice.function is not None:
        option = {"type": "function", "function": {"name": choice.function}}
    else:
        option = choice.mode
    label = None if choice.mode == "none" else f"tools ({choice.describe()})"
    return [s.to_openai() for s in specs], option, label


def sampling_settings(
    config: ServerConfig,
    max_tokens: int | None,
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    repetition_penalty: float | None = None,
    seed: int | None = None,
    stop: list[str] | None = None,
    stop_param: str = "stop",
    think: bool | None = None,
    max_thinking_tokens: int | None = None,
) -> SamplingSettings:
    """The engine's sampling settings: what the request gives, the model's defaults for
    the rest (its settings in a model pool: `config.sampling_defaults`, else Corral's).
    APIError(400) naming the setting that is out of range."""
    defaults = config.sampling_defaults or SamplingSettings()
    stop = list(stop or [])
    if len(stop) > MAX_STOP_STRINGS:
        raise APIError(400, f"{stop_param}: at most {MAX_STOP_STRINGS} strings", param=stop_param)
    settings = SamplingSettings(
        temperature=defaults.temperature if temperature is None else temperature,
        top_p=defaults.top_p if top_p is None else top_p,
        top_k=defaults.top_k if top_k is None else top_k,
        min_p=defaults.min_p if min_p is None else min_p,
        repetition_penalty=(
            defaults.repetition_penalty if repetition_penalty is None else repetition_penalty
        ),
        seed=seed,
        max_tokens=max_tokens or config.default_max_tokens,
        stop=[s for s in stop if s],
        think=think,
        max_thinking_tokens=max_thinking_tokens,
    )
    try:
        settings.validate()
    except ValueError as exc:
        param = str(exc).split(" ", 1)[0]
        raise APIError(400, str(exc), param=param, code="invalid_value") from None
    return settings


def checked_constraint(
    make: Callable[[], ConstraintSpec],
    param: str,
    check: Check,
    warnings: list[str],
    schema: Any = None,
) -> ConstraintSpec:
    """The constraint `make()` builds, compiled for the loaded model; its warnings are added
    to `warnings`. APIError(400) at `param` for one that does not compile, placed inside
    `schema` (the JSON schema it came from, if any) where the error can be told."""
    try:
        spec = make()
    except ConstraintError as exc:
        raise invalid_constraint(param, str(exc), schema) from None
    checked = check(spec)
    if checked.error is not None:
        raise invalid_constraint(param, checked.error, schema)
    warnings += list(checked.warnings)
    return checked.spec


def invalid_constraint(param: str, error: str, schema: Any = None) -> APIError:
    """The 400 for a constraint that does not compile. Grammar errors carry their line and
    column; a schema's error is placed by its path inside the schema, in `param`."""
    if schema is not None:
        path = schema_error_path(schema, error)
        if path:
            param += _schema_path(path)
    return APIError(400, f"{param}: {error}", param=param, code="invalid_grammar")


# ---- pieces ----


def _choices(body: _Generation) -> int:
    n = body.n or 1
    if n > MAX_CHOICES:
        raise APIError(400, f"n: at most {MAX_CHOICES} choices per request, got {n}", param="n")
    return n


def _chat_logprobs(body: ChatCompletionBody) -> int | None:
    """Alternatives to record per token (ChatRequest.logprobs), or None: `logprobs` is a
    boolean and `top_logprobs` (0 to 20) needs it, as in OpenAI's API."""
    if body.logprobs is not None and not isinstance(body.logprobs, bool):
        raise APIError(400, "logprobs: must be true or false", param="logprobs")
    if body.top_logprobs is not None and not body.logprobs:
        raise APIError(400, "top_logprobs: needs logprobs set to true", param="top_logprobs")
    return (body.top_logprobs or 0) if body.logprobs else None


def _completion_logprobs(body: CompletionBody) -> int | None:
    """Alternatives to record per token for a text completion: `logprobs` is their number."""
    value = body.logprobs
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS:
        raise APIError(
            400,
            f"logprobs: the number of alternatives per token, 0 to {MAX_TOP_LOGPROBS}",
            param="logprobs",
        )
    return value


def _sampling(body: _Generation, max_tokens: int | None, config: ServerConfig) -> SamplingSettings:
    return sampling_settings(
        config,
        max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        min_p=body.min_p,
        repetition_penalty=body.repetition_penalty,
        seed=body.seed,
        stop=[body.stop] if isinstance(body.stop, str) else list(body.stop or []),
    )


def _chat_sampling(body: ChatCompletionBody, config: ServerConfig) -> SamplingSettings:
    """A chat's settings, its thinking too: `reasoning_effort` ("none" turns thinking off)
    and Corral's `max_thinking_tokens`, which wins where both are given."""
    think, budget = reasoning_settings(body.reasoning_effort, "reasoning_effort")
    if body.max_thinking_tokens is not None:
        budget = body.max_thinking_tokens
    settings = _sampling(body, body.max_completion_tokens or body.max_tokens, config)
    settings.think, settings.max_thinking_tokens = think, budget
    return settings


def reasoning_settings(effort: str | None, param: str) -> tuple[bool | None, int | None]:
    """(think, budget) for an effort word; APIError(400) for one that is not."""
    if effort is None:
        return None, None
    if effort == "none":
        return False, None
    try:
        return True, effort_budget(effort)
    except ValueError as exc:
        raise APIError(400, f"{param}: {exc}", param=param, code="invalid_value") from None


def _constraint(
    body: _Generation, check: Check, warnings: list[str]
) -> tuple[ConstraintSpec | None, str | None]:
    rf = body.response_format
    if body.grammar is not None and rf is not None and rf.type != "text":
        raise APIError(
            400, "give response_format or grammar, not both", param="grammar", code="conflict"
        )
    grammar = body.grammar
    if grammar is not None:
        param, kind = "grammar.value", grammar.type
        spec = checked_constraint(
            lambda: constraint_from_text(grammar.value, kind, name=f"{kind} grammar"),
            param,
            check,
            warnings,
        )
        return spec, param
    if rf is not None and rf.type == "json_object":
        return checked_constraint(any_json_constraint, "response_format", check, warnings), (
            "response_format"
        )
    if rf is not None and rf.type == "json_schema":
        param = "response_format.json_schema.schema"
        schema = rf.json_schema
        if schema is None:
            raise APIError(
                400,
                'response_format.json_schema: required when type is "json_schema"',
                param="response_format.json_schema",
            )
        spec = checked_constraint(
            lambda: json_schema_constraint(schema.schema_, schema.name),
            param,
            check,
            warnings,
            schema.schema_,
        )
        return spec, param
    return None, None


_TOOL_INDEX = re.compile(r"tool (\d+)\b")


def _schema_path(path: tuple[int | str, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _tool_param(tools: list[dict[str, Any]], error: str) -> str:
    """Where in `tools` a ToolDefinitionError is: the tool, and inside its parameters
    schema where that can be told."""
    found = _TOOL_INDEX.match(error)
    if found is None or not 0 < int(found.group(1)) <= len(tools):
        return "tools"
    index = int(found.group(1)) - 1
    param = f"tools[{index}]"
    function = tools[index].get("function")
    if '"parameters"' in error and isinstance(function, dict):
        param += ".function.parameters"
        path = schema_error_path(function.get("parameters"), error)
        param += _schema_path(path) if path else ""
    return param


@dataclass(frozen=True)
class CheckedConstraint:
    """A constraint checked for the loaded model: compiled (`spec.compiled` set) or not."""

    spec: ConstraintSpec
    error: str | None = None
    warnings: tuple[str, ...] = ()


class ConstraintChecker:
    """`Engine.check_constraint` with a small cache per model: clients send the same
    schema request after request, and the spec it returns carries the compiled grammar,
    which the engine then reuses instead of compiling again. Called with the model that
    answers (a pool's id; None: the default), since a grammar is compiled for its
    tokenizer."""

    def __init__(self, engine: EngineAPI, size: int = 128) -> None:
        self._engine = engine
        self._size = size
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, ConstraintSpec], CheckedConstraint] = OrderedDict()

    def __call__(self, spec: ConstraintSpec, model: str | None = None) -> CheckedConstraint:
        served = self._engine.snapshot.find_model(model)
        key = (f"{served.id}\0{served.spec}" if served is not None else "", spec)
        with self._lock:
            if (found := self._cache.get(key)) is not None:
                self._cache.move_to_end(key)
                return found
        try:
            report = self._engine.check_constraint(spec, model)
        except (ModelUnavailableError, ModelLoadError) as exc:  # a pool's model, not loaded
            raise model_unavailable(exc) from None
        parts = [str(d) + (f"\n{d.detail}" if d.detail else "") for d in report.errors]
        checked = CheckedConstraint(
            report.spec, "; ".join(parts) or None, tuple(str(w) for w in report.warnings)
        )
        with self._lock:
            self._cache[key] = checked
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return checked


def _text(content: str | list[ContentPart] | None, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    pieces = []
    for k, part in enumerate(content):
        if part.type == "image_url":
            continue  # read by _images
        if part.type != "text" or part.text is None:
            raise APIError(
                400,
                f"{where}.content[{k}]: {part.type!r} parts are not supported; "
                "this model reads text only",
                param=f"{where}.content[{k}]",
                code="unsupported_content",
            )
        pieces.append(part.text)
    return "".join(pieces)


def _images(content: str | list[ContentPart] | None, where: str, config: ServerConfig) -> list[Any]:
    """The `image_url` parts of a message's content, checked at the edge."""
    from engine.server.images import ImagePolicy, from_url

    found = []
    for k, part in enumerate(content if isinstance(content, list) else []):
        if part.type != "image_url":
            continue
        place = f"{where}.content[{k}]"
        url = (part.image_url or {}).get("url")
        if not isinstance(url, str):
            raise APIError(400, f"{place}.image_url.url: a URL is required", param=place)
        found.append(from_url(url, place, ImagePolicy(allow_urls=config.allow_image_urls)))
    return found


def _message(message: MessageBody, index: int, config: ServerConfig) -> ChatMessage:
    where = f"messages[{index}]"
    role = "system" if message.role == "developer" else message.role
    item: ChatMessage = {"role": role, "content": _text(message.content, where)}
    if images := _images(message.content, where, config):
        item["images"] = images
    if message.tool_calls:
        if role != "assistant":
            raise APIError(
                400,
                f"{where}.tool_calls: only assistant messages carry tool calls",
                param=f"{where}.tool_calls",
            )
        item["tool_calls"] = [
            _tool_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(message.tool_calls)
        ]
    if message.reasoning_content and role == "assistant":
        item["reasoning_content"] = message.reasoning_content
    if role == "tool":
        if not message.tool_call_id:
            raise APIError(
                400,
                f"{where}.tool_call_id: required in tool messages",
                param=f"{where}.tool_call_id",
                code="missing_required_parameter",
            )
        item["tool_call_id"] = message.tool_call_id
        if message.name:
            item["name"] = message.name
    return item


def _tool_call(call: MessageToolCall, where: str) -> ToolCallMessage:
    arguments = call.function.arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise APIError(
                400,
                f"{where}.function.arguments: not valid JSON ({exc.msg} at line {exc.lineno}, "
                f"column {exc.colno})",
                param=f"{where}.function.arguments",
            ) from None
        if not isinstance(parsed, dict):
            raise APIError(
                400,
                f"{where}.function.arguments: must be a JSON object",
                param=f"{where}.function.arguments",
            )
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.function.name, "arguments": arguments},
    }
