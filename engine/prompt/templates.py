"""The one place a chat template is rendered: the variables real templates read, the Jinja
behaviour they rely on, and errors that name the template's own line.

The Jinja environment is transformers' (`apply_chat_template`'s): a sandbox with loop
controls (`{% break %}`, `{% continue %}`), namespaces that take attribute assignment,
`raise_exception`, `strftime_now` and a `tojson` with `ensure_ascii`, `indent`,
`separators` and `sort_keys`. Around it this module adds what templates of 2025-26 expect
and `apply_chat_template` does not give them:

- the tokenizer's special tokens (`bos_token`, `eos_token`, ...) and today's
  `date_string`, always; `functions` as the tools for a template that reads that name;
- the conversation in the shape the template accepts, found once per template by rendering
  a probe conversation (`template_traits`): tool-call arguments as an object or as JSON
  text, tools wrapped (`{"type": "function", "function": ...}`) or flat, tool-call ids of
  nine letters and digits (Mistral), the system message folded into the first user turn
  where the template refuses a system role.

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
import string
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def compile_template(template: str) -> Any:
    """`template` compiled in transformers' chat-template environment (cached by text).
    Raises TemplateRenderError naming the line of a syntax error."""
    import jinja2
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        return _compile_jinja_template(template)
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


@functools.lru_cache(maxsize=64)
def template_traits(template: str) -> TemplateTraits:
    """How `template` wants a conversation with tools shaped: the fewest adaptations with
    which the probe conversation renders, preferring one that shows the tools."""
    compiled = compile_template(template)
    plain = [m for m in _PROBE_MESSAGES if m["role"] != "tool" and not m.get("tool_calls")]
    rendered_any: TemplateTraits | None = None
    # A template without tool support may refuse tool turns: then the plain conversation
    # decides (the tools layer writes calls and results as text for it).
    for probe in (_PROBE_MESSAGES, plain):
        for flags in sorted(itertools.product((False, True), repeat=4), key=sum):
            traits = TemplateTraits(*flags)
            tools = shape_tools([_PROBE_TOOL], traits)
            try:
                text = compiled.render(
                    messages=shape_messages(probe, traits),
                    tools=tools,
                    add_generation_prompt=True,
                    **_fixed_variables(template, {}, tools),
                )
            except Exception:  # this shape is refused; try the next
                continue
            if "probe_lookup" in text:
                return dataclasses.replace(traits, renders_tools=True)
            rendered_any = rendered_any or traits
        if rendered_any is not None:
            return rendered_any
    return TemplateTraits()


def _short_id(call_id: str) -> str:
    """`call_id` as nine letters and digits (kept if it already is), the same every time."""
    if len(call_id) == 9 and call_id.isalnum():
        return call_id
    digest = hashlib.sha256(call_id.encode()).digest()
    return "".join(_ID_ALPHABET[b % len(_ID_ALPHABET)] for b in digest[:9])


def shape_tools(tools: Sequence[Mapping[str, Any]] | None, traits: TemplateTraits) -> Any:
    """`tools` (OpenAI's wrapped form) as the template reads them."""
    if tools is None or not traits.flat_tools:
        return tools
    return [dict(t.get("function", t)) if isinstance(t, Mapping) else t for t in tools]


def shape_messages(
    messages: Sequence[Mapping[str, Any]], traits: TemplateTraits
) -> list[dict[str, Any]]:
    """Copies of `messages` in the shape `traits` describes."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item = {k: v for k, v in message.items() if v is not None}
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
    found["date_string"] = datetime.date.today().strftime("%d %b %Y")
    if tools is not None and "functions" in template_variables(template):
        found["functions"] = tools
    return found


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
        text: str = compiled.render(
            messages=shape_messages(messages, traits),
            add_generation_prompt=add_generation_prompt,
            **context,
        )
    except Exception as exc:  # jinja errors, raise_exception(), Python errors in the template
        line = _template_line(exc)
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        raise TemplateRenderError(str(message), line, _line(template, line)) from exc
    return text
