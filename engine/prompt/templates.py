"""The one place a chat template is rendered: the variables real templates read, the Jinja
behaviour they rely on, and errors that name the template's own line.

The Jinja environment is transformers' (`apply_chat_template`'s): a sandbox with loop
controls (`{% break %}`, `{% continue %}`), namespaces that take attribute assignment,
`raise_exception`, `strftime_now` and a `tojson` with `ensure_ascii`, `indent`,
`separators` and `sort_keys`. Around it this module adds what templates of 2025-26 expect
and `apply_chat_template` does not give them (llama.cpp's renderer gives them):

- the tokenizer's special tokens (`bos_token`, `eos_token`, ...) and today's
  `date_string`, always; `functions` as the tools for a template that reads that name (as
  JSON text where the template joins it to text: FireFunction), `datetime` as today's date;
- a `tojson` that also writes what a template builds with filters (`tools | map(...)`,
  a generator: llama.cpp's DeepSeek R1 template) and the records below, and a `safe` that
  leaves text as it is (transformers' made `"text"|safe + value` HTML-escape the value);
- messages and tools as records that take attribute assignment, for a template that sets
  attributes on them (`{% set message.content = ... %}`: MiroThinker), each render on
  copies of its own;
- the conversation in the shape the template accepts, found once per template by rendering
  a probe conversation (`template_traits`): tool-call arguments as an object or as JSON
  text, tools wrapped (`{"type": "function", "function": ...}`) or flat, tool-call ids of
  nine letters and digits (Mistral), the system message folded into the first user turn
  where the template refuses a system role, an empty description for a parameter that has
  none where the template writes every parameter's description (gpt-oss as first
  published, Command R+).

A template that still cannot render raises `TemplateRenderError`, naming the template's
line and what it says there.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import itertools
import json
import re
import string
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.prompt.template_values import assigns_attributes, plain, records, tojson

_SPECIAL_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")
# Names a message's thinking is passed under: Qwen3, GLM, MiniMax read `reasoning_content`,
# gpt-oss `thinking`.
_REASONING_FIELDS = ("reasoning_content", "thinking")
_ID_ALPHABET = string.ascii_letters + string.digits


class TemplateRenderError(ValueError):
    """A chat template failed on a conversation: `line` is the template's line (None when
    the failure is not inside the template), `message` what went wrong."""

    def __init__(self, message: str, line: int | None = None, source: str = "") -> None:
        self.message, self.line, self.source = message, line, source
        where = f"chat template line {line}" if line is not None else "chat template"
        shown = f" ({source.strip()[:120]})" if source.strip() else ""
        super().__init__(f"{where}{shown}: {message}")


@functools.lru_cache(maxsize=64)
def compile_template(template: str) -> Any:
    """`template` compiled in transformers' chat-template environment (cached by text),
    with Corral's `tojson` (see the module doc). Raises TemplateRenderError naming the
    line of a syntax error."""
    import jinja2
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        environment = _compile_jinja_template(template).environment
        # this template's own environment: Corral's tojson, and `safe` as plain text (with
        # autoescape off it only made `"text"|safe + value` HTML-escape the value:
        # Functionary v3.1's tools came out as `&#34;name&#34;`)
        environment.filters["tojson"] = tojson
        environment.filters["safe"] = str
        return environment.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        line = exc.lineno
        raise TemplateRenderError(exc.message or str(exc), line, _line(template, line)) from exc


def _line(template: str, lineno: int | None) -> str:
    lines = template.splitlines()
    return lines[lineno - 1] if lineno is not None and 0 < lineno <= len(lines) else ""


def _template_line(exc: BaseException) -> int | None:
    """The innermost line of the template's code in `exc`'s traceback (Jinja rewrites its
    frames to the template's own line numbers, under the file name `<template>`)."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == "<template>":
            found = frame.lineno
    return found


@functools.lru_cache(maxsize=64)
def template_variables(template: str) -> frozenset[str]:
    """The names `template` reads that it does not set itself (empty if it does not parse)."""
    import jinja2
    import jinja2.meta

    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    text = template.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    try:
        return frozenset(jinja2.meta.find_undeclared_variables(env.parse(text)))
    except jinja2.TemplateError:
        return frozenset()


@dataclass(frozen=True)
class TemplateTraits:
    """The conversation shape a template accepts (see the module doc)."""

    arguments_as_text: bool = False
    flat_tools: bool = False
    short_call_ids: bool = False
    fold_system: bool = False
    renders_tools: bool = False  # the tools' names appear in its rendering
    # it writes every parameter's description, and fails on a parameter without one
    described_parameters: bool = False


_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_lookup",
        "description": "Look a word up.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word."}},
            "required": ["word"],
        },
    },
}
_PROBE_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Look up corral."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_probe_1",
                "type": "function",
                "function": {"name": "probe_lookup", "arguments": {"word": "corral"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_probe_1", "name": "probe_lookup", "content": "a pen"},
    {"role": "assistant", "content": "A pen for animals."},
    {"role": "user", "content": "Thanks."},
]


_PROBE_ARGUMENT = "corral_probe_word"


def _probe_conversations() -> list[list[dict[str, Any]]]:
    """The probe conversation, the same with the call turn's text null (DeepSeek R1's
    llama.cpp template renders a call only then), and without the tool turns."""
    with_calls = json.loads(json.dumps(_PROBE_MESSAGES))
    with_calls[2]["tool_calls"][0]["function"]["arguments"] = {"word": _PROBE_ARGUMENT}
    null_text = json.loads(json.dumps(with_calls))
    null_text[2]["content"] = None
    plain = [m for m in _PROBE_MESSAGES if m["role"] != "tool" and not m.get("tool_calls")]
    return [with_calls, null_text, plain]


@functools.lru_cache(maxsize=64)
def template_traits(template: str) -> TemplateTraits:
    """How `template` wants a conversation with tools shaped: the fewest adaptations with
    which the probe conversation renders, preferring one that shows the tools and the
    call (a template without tool support may refuse tool turns: then the plain
    conversation decides, and the tools layer writes calls and results as text)."""
    compiled = compile_template(template)
    best: tuple[int, TemplateTraits, list[dict[str, Any]]] | None = None
    for probe in _probe_conversations():
        for flags in sorted(itertools.product((False, True), repeat=4), key=sum):
            traits = TemplateTraits(*flags)
            tools = shape_tools([_PROBE_TOOL], traits)
            try:
                text = compiled.render(
                    messages=_shaped_for(template, probe, traits),
                    tools=_shaped_tools_for(template, tools),
                    add_generation_prompt=True,
                    **_fixed_variables(template, {}, tools),
                )
            except Exception:  # this shape is refused; try the next
                continue
            score = ("probe_lookup" in text) + 2 * (_PROBE_ARGUMENT in text)
            if best is None or score > best[0]:
                best = (score, traits, probe)
            if score == 3:
                break
        if best is not None and best[0] == 3:
            break
    if best is None:
        return TemplateTraits()
    score, traits, probe = best
    if not score % 2:  # the tools are not shown
        return traits
    return dataclasses.replace(
        traits,
        renders_tools=True,
        described_parameters=_needs_parameter_descriptions(compiled, template, probe, traits),
    )


def _needs_parameter_descriptions(
    compiled: Any, template: str, probe: list[dict[str, Any]], traits: TemplateTraits
) -> bool:
    """Whether the probe stops rendering when its parameter has no description."""
    bare = json.loads(json.dumps(_PROBE_TOOL))
    del bare["function"]["parameters"]["properties"]["word"]["description"]
    tools = shape_tools([bare], traits)
    try:
        compiled.render(
            messages=_shaped_for(template, probe, traits),
            tools=_shaped_tools_for(template, tools),
            add_generation_prompt=True,
            **_fixed_variables(template, {}, tools),
        )
    except Exception:
        return True
    return False


def _short_id(call_id: str) -> str:
    """`call_id` as nine letters and digits (kept if it already is), the same every time."""
    if len(call_id) == 9 and call_id.isalnum():
        return call_id
    digest = hashlib.sha256(call_id.encode()).digest()
    return "".join(_ID_ALPHABET[b % len(_ID_ALPHABET)] for b in digest[:9])


def shape_tools(tools: Sequence[Mapping[str, Any]] | None, traits: TemplateTraits) -> Any:
    """`tools` (OpenAI's wrapped form) as the template reads them."""
    if tools is None:
        return tools
    if traits.described_parameters:
        tools = [_with_parameter_descriptions(t) for t in tools]
    if not traits.flat_tools:
        return tools
    return [dict(t.get("function", t)) if isinstance(t, Mapping) else t for t in tools]


def _with_parameter_descriptions(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """`tool` with an empty description on each parameter that has none."""
    function = tool.get("function")
    if not isinstance(function, Mapping):
        return tool
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return tool
    described = {
        k: {"description": "", **v} if isinstance(v, Mapping) else v for k, v in properties.items()
    }
    assert isinstance(parameters, Mapping)
    return {**tool, "function": {**function, "parameters": {**parameters, "properties": described}}}


def _shaped_for(
    template: str, messages: Sequence[Mapping[str, Any]], traits: TemplateTraits
) -> Any:
    """`messages` shaped for `template`: records where it assigns their attributes."""
    shaped = shape_messages(messages, traits)
    return records(shaped) if assigns_attributes(template) else shaped


def _shaped_tools_for(template: str, tools: Any) -> Any:
    return records(tools) if assigns_attributes(template) else tools


def shape_messages(
    messages: Sequence[Mapping[str, Any]], traits: TemplateTraits
) -> list[dict[str, Any]]:
    """Copies of `messages` in the shape `traits` describes."""
    out: list[dict[str, Any]] = []
    for message in messages:
        # absent rather than None (templates test `is defined`), but for a content the
        # call format left None on purpose (DeepSeek R1's templates test `is none`)
        item = {k: v for k, v in message.items() if v is not None or k == "content"}
        reasoning = next((item[k] for k in _REASONING_FIELDS if item.get(k)), None)
        if reasoning is not None:  # templates read it under one name or another
            item.update(dict.fromkeys(_REASONING_FIELDS, reasoning))
        if traits.short_call_ids and item.get("tool_call_id"):
            item["tool_call_id"] = _short_id(str(item["tool_call_id"]))
        calls = item.get("tool_calls")
        if isinstance(calls, list) and calls:
            item["tool_calls"] = [_shape_call(c, traits) for c in calls]
        out.append(item)
    if traits.fold_system and out and out[0].get("role") == "system":
        text, out = str(out[0].get("content") or ""), out[1:]
        first = out[0] if out else {}
        if first.get("role") == "user" and isinstance(first.get("content"), str):
            joined = f"{text}\n\n{first['content']}" if text else first["content"]
            out[0] = {**first, "content": joined}
        elif text:
            out.insert(0, {"role": "user", "content": text})
    return out


def _shape_call(call: Any, traits: TemplateTraits) -> Any:
    if not isinstance(call, Mapping):
        return call
    call = dict(call)
    if traits.short_call_ids and call.get("id"):
        call["id"] = _short_id(str(call["id"]))
    function = call.get("function")
    if isinstance(function, Mapping):
        function = dict(function)
        arguments = function.get("arguments")
        if traits.arguments_as_text and not isinstance(arguments, str):
            function["arguments"] = json.dumps(arguments, ensure_ascii=False)
        elif not traits.arguments_as_text and isinstance(arguments, str):
            try:
                function["arguments"] = json.loads(arguments)
            except json.JSONDecodeError:
                pass  # not JSON: the template gets the text it was given
        call["function"] = function
    return call


def _fixed_variables(
    template: str, special_tokens: Mapping[str, Any], tools: Any
) -> dict[str, Any]:
    """Variables every rendering gets: special tokens, today's date, aliases it reads."""
    found: dict[str, Any] = {name: special_tokens.get(name) or "" for name in _SPECIAL_TOKENS}
    today = datetime.date.today()
    found["date_string"] = today.strftime("%d %b %Y")
    read = template_variables(template)
    if "functions" in read and _joins_as_text(template, "functions"):
        # FireFunction: the tools as JSON text, as llama.cpp gives them (even none)
        found["functions"] = json.dumps(plain(tools), indent=2) if tools else ""
    elif tools is not None and "functions" in read:
        found["functions"] = tools
    if "datetime" in read:  # the day, not the second: the prompt stays the same all day
        found["datetime"] = today.strftime("%b %d %Y")
    return found


def _joins_as_text(template: str, name: str) -> bool:
    """Whether `template` joins the variable `name` to text (`+ name`, `name +`, `~`)."""
    return re.search(rf"[+~]\s*{name}\b|\b{name}\s*[+~]", template) is not None


def special_tokens_of(hf_tokenizer: Any) -> dict[str, str]:
    """The special tokens' texts a template may read (`bos_token`, ...)."""
    out: dict[str, str] = {}
    for name in _SPECIAL_TOKENS:
        value = getattr(hf_tokenizer, name, None)
        if isinstance(value, str):
            out[name] = value
        elif value is not None and isinstance(getattr(value, "content", None), str):
            out[name] = value.content
    return out


def render_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    special_tokens: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    **variables: Any,
) -> str:
    """`messages` rendered by `template` (see the module doc for what it is given).

    `tools` are OpenAI tool definitions; `variables` go to the template as they are (they
    override the fixed ones: `date_string`, `documents`, `enable_thinking`, ...). Raises
    TemplateRenderError naming the template's line when it fails.
    """
    compiled = compile_template(template)
    traits = template_traits(template)
    shaped_tools = shape_tools(tools, traits)
    context = _fixed_variables(template, special_tokens or {}, shaped_tools)
    context.update({k: v for k, v in variables.items() if v is not None})
    try:
        if shaped_tools is not None:  # else undefined: templates test `tools is defined`
            context["tools"] = shaped_tools
        if assigns_attributes(template) and "tools" in context:
            context["tools"] = records(context["tools"])
        text: str = compiled.render(
            messages=_shaped_for(template, messages, traits),
            add_generation_prompt=add_generation_prompt,
            **context,
        )
    except Exception as exc:  # jinja errors, raise_exception(), Python errors in the template
        line = _template_line(exc)
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        raise TemplateRenderError(str(message), line, _line(template, line)) from exc
    return text
