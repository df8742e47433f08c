"""Fitting a call format to its template: how past calls are given so that the template
writes each one back exactly as the model wrote it.

A reply's calls become history on the next turn: the client sends them back as structured
`tool_calls`, the template renders them, and the prompt cache reuses the reply only if the
rendering is the model's own text, token for token. Templates of one family differ in the
small things (GLM-4.5's llama.cpp template drops the newlines GLM-4.6's writes, OLMo writes
strings in single quotes, Gemma 4 sorts the arguments, some write a call's id back and
some only when given one, DeepSeek R1's llama.cpp template renders calls only for a turn
whose text is null), so each format offers the layouts its family writes (`layouts`) and
`fit_template` renders a probe call (and two, for parallel families) through the template
with each, keeping the first it writes back unchanged. Where none does (vLLM's Gemma 3
template loses the commas between arguments), the calls are written into the turn's text
as the model wrote them (`history_as_text`), if the template carries that back instead.
"""

from __future__ import annotations

from itertools import product
from typing import Any

from engine.tools.formats.base import RawCall, ToolFormat

PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "alerts": {"type": "boolean"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Time in a zone",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string"}},
                "required": ["zone"],
            },
        },
    },
]
ONE: list[RawCall] = [("get_weather", {"city": "Paris", "days": 2, "alerts": True})]
TWO: list[RawCall] = [*ONE, ("get_time", {"zone": "CET"})]

# What fitting may change besides the family's own layouts, in the order tried.
_HISTORY_CHOICES = list(product((True, False), (False, True)))  # (history_ids, content None)


def probe_history(fmt: ToolFormat, calls: list[RawCall], written: str) -> list[dict[str, Any]]:
    """A normalised conversation in which the model wrote `written` (the `calls`): the
    question, the call turn (with the ids the syntax carries, or fresh ones), a result
    for each call, an answer and a new question."""
    ids = fmt.call_ids(written) or [f"call_probe_{i}" for i in range(len(calls))]
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": ids[i], "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(calls)
            ],
        },
        *(
            {"role": "tool", "tool_call_id": ids[i], "name": n, "content": "ok"}
            for i, (n, _) in enumerate(calls)
        ),
        # the conversation goes on: a way of giving calls the template refuses later
        # (vLLM's Gemma 3 checks that turns alternate) is no way
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "Thanks."},
    ]


def renders_back(fmt: ToolFormat, calls: list[RawCall]) -> bool:
    """Whether the template, given `calls` as history the way `fmt` is set to give them,
    writes them back as the model writes them."""
    from engine.prompt.chat import render_chat

    written = fmt.calls_as_text(calls)
    reply = written.removesuffix(fmt.reply_end) if fmt.reply_end else written
    try:
        rendered = render_chat(
            fmt.tokenizer,
            fmt.adapt_messages(probe_history(fmt, calls, written)),
            tools=fmt.adapt_tools([dict(t) for t in PROBE_TOOLS]),
            none_content_of_calls=fmt.call_content_none,
        )
    except Exception:  # this way of giving the history is refused
        return False
    return reply in rendered


def fit_template(fmt: ToolFormat) -> None:
    """Settle how `fmt` gives history to its template (see the module doc); `fmt.fitted`
    says what was found, in words."""
    if not fmt.native or fmt.tokenizer is None:
        return
    probes = [ONE, TWO] if fmt.parallel else [ONE]
    layouts = fmt.layouts()
    as_text = fmt.history_as_text  # a family whose templates never render calls starts so
    for layout, (ids, none) in product(layouts, _HISTORY_CHOICES):
        _apply(fmt, layout, ids, none, as_text)
        if all(renders_back(fmt, p) for p in probes):
            fmt.fitted = _words(fmt, layout)
            return
    _apply(fmt, layouts[0], True, False, not as_text)
    if all(renders_back(fmt, p) for p in probes):
        fmt.fitted = _words(fmt, layouts[0])
        return
    _apply(fmt, layouts[0], True, False, as_text)
    fmt.fitted = "its template does not render a past call as the model writes it"


def _apply(fmt: ToolFormat, layout: dict[str, Any], ids: bool, none: bool, text: bool) -> None:
    for key, value in layout.items():
        if not key.startswith("_"):
            setattr(fmt, key, value)
    fmt.history_ids, fmt.call_content_none, fmt.history_as_text = ids, none, text


def _words(fmt: ToolFormat, layout: dict[str, Any]) -> str:
    notes = [str(layout["_describe"])] if "_describe" in layout else []
    if fmt.history_as_text:
        notes.append("past calls written into the turn's text (the template writes them otherwise)")
    if not fmt.history_ids:
        notes.append("past calls without ids (the template writes none back)")
    if fmt.call_content_none:
        notes.append("a call turn's empty text given as null")
    return "; ".join(notes)
