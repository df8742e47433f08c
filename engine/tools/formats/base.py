"""What every call format is: the base class, markers, and the pieces formats share.

A format says how a model writes calls: how to detect it from the chat template, the Lark
for a reply (calls required or optional, one or several) built around one rule per tool
(`call_rules`: the name fixed, the arguments constrained by the tool's schema in the
format's own syntax), how to parse calls back, and how to adapt messages and tools for the
template.

Markers such as `<tool_call>` or `[TOOL_CALLS]` are often added tokens. Where a marker is
one token, the grammar writes exactly that token (llguidance's `<[id]>`), never its
characters spelled through byte-level pieces: the model writes the token it was trained on,
and the template, which tokenizes its own markup, renders the call back token for token.
`lark_text` writes any piece of call syntax that way, and free text never contains an
opener (`text_then`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from engine.prompt.tokenizer import ModelTokenizer

RawCall = tuple[str, dict[str, Any]]  # (name, arguments)
# Where a numbered format's call rule holds the call's index (never valid Lark: the grammar
# replaces it with each position's number), and how many numbered calls one reply may hold.
CALL_INDEX = "%CALL_INDEX%"
MAX_NUMBERED_CALLS = 16
Schemas = dict[str, dict[str, Any]]  # tool name -> its parameters schema

_READS_DESCRIPTION = re.compile(r"\.description\b|\[.description.\]")

# Any text, newlines included.
TEXT = r"/(.|\n)*/"


@dataclass(frozen=True)
class Marker:
    """A fixed piece of call syntax, and its token id when it is an added token."""

    text: str
    token_id: int | None = None

    def lark(self) -> str:
        """The marker as its single token (as text where it is not one)."""
        if self.token_id is None:
            return json.dumps(self.text)
        return f"<[{self.token_id}]>"

    def no_text_containing(self) -> str:
        """A terminal for free text that does not contain the marker's text."""
        return f"{TEXT} & {without(self.text)}"


def without(text: str) -> str:
    """A Lark regex for any text that does not contain `text`."""
    return f"~/(?s:.*){regex_text(text)}(?s:.*)/"


def regex_text(text: str) -> str:
    """`text` as a Lark regex that matches exactly it (newlines and slashes escaped)."""
    return re.escape(text).replace("\\\n", "\\n").replace("/", "\\/")


def lit(text: str) -> str:
    return json.dumps(text)


def text_then(opener: Marker) -> tuple[str, list[str]]:
    """Lark for free text that ends with `opener` (the expression), and the rules it needs
    (`TAIL`: text never containing the opener, `TEXT`). A token opener follows the text as
    that token; a text opener ends the text at its first occurrence (a lazy match)."""
    rules = [f"TAIL: {opener.no_text_containing()}", f"TEXT: {TEXT}"]
    if opener.token_id is not None:
        return f"TAIL <[{opener.token_id}]>", rules
    return "head", [*rules, f"head[lazy]: TEXT {json.dumps(opener.text)}"]


def decode_objects(text: str, pos: int, separator: str) -> tuple[list[Any], int]:
    """Decode JSON values separated by `separator` (whitespace around it allowed) from
    `pos`; return them and where decoding stopped."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return values, pos
        values.append(value)
        pos = end
        rest = text[pos:].lstrip()
        if separator and rest.startswith(separator):
            pos = len(text) - len(rest) + len(separator)
        else:
            return values, pos


def json_arguments(arguments: Any) -> dict[str, Any] | None:
    """Arguments as an object (some models write them as a JSON string), or None."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None
    return arguments if isinstance(arguments, dict) else None


def as_call(value: Any, args_keys: tuple[str, ...], name_key: str = "name") -> RawCall | None:
    """A call object `{name_key: ..., <one of args_keys>: {...}}` as (name, arguments)."""
    if not isinstance(value, dict) or not isinstance(value.get(name_key), str):
        return None
    for key in args_keys:
        if key in value:
            arguments = json_arguments(value[key])
            return None if arguments is None else (value[name_key], arguments)
    return (value[name_key], {})


def history_calls(message: dict[str, Any]) -> list[RawCall]:
    """The (name, arguments) of an assistant message's normalised tool calls."""
    return [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]


class ToolFormat:
    """Base class. `native` is True when the chat template renders tools itself."""

    name: ClassVar[str] = ""
    call_start: ClassVar[str] = ""  # how the text of a reply's calls begins
    marker_text: ClassVar[str] = ""  # what a reply's calls always contain (tests, bench)
    args_key: ClassVar[str] = "arguments"
    # Whether the family's models may write several calls in one reply.
    parallel: ClassVar[bool] = True
    # Whether calls are `{"name": ..., "arguments": ...}` objects (the streaming splitter
    # then sends arguments as they are written); other formats stream each call whole.
    json_objects: ClassVar[bool] = True
    # How the template wants a history call's arguments: "dict" or "string" (JSON text).
    history_arguments: ClassVar[str] = "dict"
    # Where calls live, for splitting a reply while it streams (engine/tools/stream.py):
    # (markup, whether it is consumed) opening a call region anywhere or only at the start
    # of the reply, and the markup closing a region (None: it runs to the end).
    stream_openers: ClassVar[tuple[tuple[str, bool], ...]] = ()
    stream_leading_openers: ClassVar[tuple[tuple[str, bool], ...]] = ()
    stream_closer: ClassVar[str | None] = None
    # Content can only be told from calls at the end (Functionary: a reply is calls unless
    # it starts `all`): the streaming split sends it then.
    stream_content_waits: ClassVar[bool] = False
    # The markup the prompt wraps tool results in (Hermes: <tool_response>): a model that
    # repeats a result copies it; the reply's text leaves it out (ToolPlan.hidden).
    result_markers: ClassVar[tuple[str, ...]] = ()
    # Calls carry an index the template numbers itself (Command R7B's `tool_call_id`, Kimi's
    # `functions.NAME:N`): call_rules write CALL_INDEX where it goes, and the grammar forces
    # each call's number (`first_call_index` onwards), so the history renders it back alike.
    numbered: ClassVar[bool] = False
    # The public chat templates this syntax is checked against (tests: each is served it).
    checked_against: ClassVar[tuple[str, ...]] = ()
    # Markup that ends a reply of calls as its end token (gpt-oss's `<|call|>`): not one of
    # the reply's tokens, so the history may write another there.
    reply_end: ClassVar[str] = ""
    # What joins a turn's text and its calls where calls are written into the text.
    text_before_calls: ClassVar[str] = " "

    # How the history is given to the template, settled once per template by rendering a
    # probe call (engine.tools.formats.fitting: `fit_template`): the call's arguments as the
    # template writes them back must be the ones the model wrote, token for token.
    history_as_text = False  # calls written into the turn's text (as the model wrote them)
    history_ids = True  # the calls' ids are given (False: the template writes none back)
    call_content_none = False  # a call turn's empty text is given as None (DeepSeek R1)

    def __init__(self, tokenizer: ModelTokenizer, native: bool) -> None:
        self.native = native
        self.tokenizer = tokenizer
        self._template = ""
        self.fitted = ""  # how the history was fitted to the template, in words
        if tokenizer is not None:
            self._template = ModelTokenizer.of(tokenizer).chat_template or ""

    def layouts(self) -> list[dict[str, Any]]:
        """The layouts (attribute values) this family's templates write calls in, most
        common first; fitting keeps the first one its template renders back (a `_describe`
        key says it in words, for `engine info`)."""
        return [{}]

    @classmethod
    def detect(cls, template: str) -> bool:
        """Whether a chat template uses this format."""
        raise NotImplementedError

    def describe(self) -> str:
        """The call syntax in words, for `info` and the model library."""
        if not self.native:
            return "Hermes JSON calls described in the system prompt"
        first = (self.__class__.__doc__ or self.name).strip().split("\n\n")[0]
        return " ".join(first.split())  # its first paragraph, on one line

    # ---- markers ----

    def marker(self, text: str) -> Marker:
        tok = self.tokenizer
        return Marker(text, tok.added_token_id(text) if tok is not None else None)

    def added_tokens(self) -> list[str]:
        """The texts of the tokenizer's added tokens, longest first."""
        if self.tokenizer is None:
            return []
        cached: list[str] | None = getattr(self, "_added", None)
        if cached is None:
            hf = ModelTokenizer.of(self.tokenizer).hf
            decoder = getattr(hf, "added_tokens_decoder", None) or {}
            texts = {getattr(t, "content", "") for t in decoder.values()}
            cached = sorted((t for t in texts if t), key=len, reverse=True)
            self._added = cached
        return cached

    def pieces(self, text: str) -> list[Marker]:
        """`text` split into its added tokens and the plain text between them."""
        out: list[Marker] = []
        pos = 0
        tokens = [t for t in self.added_tokens() if t in text]
        while pos < len(text):
            found = min(
                ((i, -len(t), t) for t in tokens if (i := text.find(t, pos)) >= 0),
                default=None,
            )
            if found is None:
                out.append(Marker(text[pos:]))
                break
            i, _, token = found
            if i > pos:
                out.append(Marker(text[pos:i]))
            out.append(self.marker(token))
            pos = i + len(token)
        return out

    def lark_text(self, text: str) -> str:
        """Lark for `text`: its added tokens as those tokens (or text), the rest as text."""
        return " ".join(p.lark() for p in self.pieces(text)) if text else '""'

    # ---- the grammar ----

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        """Lark for one call object, `{"name": "<tool_name>", "<args_key>": <args>}`."""
        head = '{"name": ' + json.dumps(tool_name) + ", " + json.dumps(self.args_key) + ": "
        return f"{lit(head)} {args_rule} {lit('}')}"

    def call_rules(self, rule: str, tool_name: str, schema: dict[str, Any]) -> list[str]:
        """Lark rules defining `rule`: one call of `tool_name` whose arguments follow
        `schema` (the grammar schema of its parameters)."""
        args = f"{rule}_args"
        return [f"{rule}: {self.call_lark(tool_name, args)}", f"{args}: %json {json.dumps(schema)}"]

    def call_json(self, name: str, arguments: dict[str, Any]) -> str:
        return json.dumps({"name": name, self.args_key: arguments}, ensure_ascii=False)

    def calls_lark(self, sep: str, parallel: bool) -> str:
        """Lark for the calls of one reply, `sep` (Lark, maybe empty) between two: `fn`, and
        more where parallel; a numbered format's calls each at their position (`fn_atK`)."""
        between = f"{sep} " if sep else ""
        if not self.numbered:
            return f"fn ({between}fn)*" if parallel else "fn"
        n = MAX_NUMBERED_CALLS if parallel else 1
        out = f"fn_at{n - 1}"
        for k in range(n - 2, -1, -1):
            out = f"fn_at{k} ({between}{out})?"
        return out

    def first_call_index(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The index of a reply's first call after `messages` (numbered formats): by default
        the number of calls the conversation made so far, as templates count them."""
        return sum(
            len(m.get("tool_calls") or [])
            for m in messages
            if isinstance(m, Mapping) and m.get("role") == "assistant"
        )

    def reply_lark(self, required: bool, parallel: bool) -> str:
        """Lark rules, `start` included, for a whole reply; one call is the rule `fn`.

        `required`: the reply is calls only (no free text); else free text with optional
        calls. `parallel`: one or more calls; else at most one.
        """
        raise NotImplementedError

    # ---- parsing ----

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        """Split a reply into its text (call markup removed) and its calls; `schemas` (the
        tools' parameters) tell formats whose values are not JSON how to read them."""
        raise NotImplementedError

    def calls_as_text(self, calls: list[RawCall]) -> str:
        """How an assistant turn's calls are written, for rendering history as text (a
        numbered format's from the number a reply's first call takes)."""
        if self.numbered:
            return self.numbered_calls_text(calls, self.first_call_index([]))
        raise NotImplementedError

    def numbered_calls_text(self, calls: list[RawCall], first: int) -> str:
        """A numbered format's calls as written, numbered from `first`."""
        raise NotImplementedError

    def new_call_id(self) -> str:
        return "call_" + uuid.uuid4().hex[:24]

    def call_ids(self, text: str) -> list[str]:
        """The ids a reply's calls carry in their syntax (Mistral, Kimi K2), in order; empty
        where the syntax has none (the calls then get fresh ids)."""
        return []

    def text_reply(self, text: str) -> str:
        """How a reply that is only `text` is written (Harmony and Functionary mark it)."""
        return text

    # ---- history ----

    def adapt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Normalised messages as the native template takes them, so that it renders each
        past call as the model wrote it: written into the turn's text where the template
        does not (`history_as_text`), else the family's own adaptation (`adapt_history`),
        arguments as a dict or JSON text (`history_arguments`), ids left out where the
        template writes none back, an empty text as None where the template wants it."""
        if self.history_as_text:
            return calls_into_text(self, messages)
        out = []
        for message in self.adapt_history(messages):
            if message.get("tool_calls"):
                message = dict(message)
                calls = [self._history_call(c) for c in message["tool_calls"]]
                message["tool_calls"] = calls
                if self.call_content_none and not message.get("content"):
                    message["content"] = None
            out.append(message)
        return out

    def _history_call(self, call: dict[str, Any]) -> dict[str, Any]:
        call = dict(call)
        if not self.history_ids:
            call.pop("id", None)
        if self.history_arguments == "string":
            function = call["function"]
            arguments = function["arguments"]
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            call["function"] = {**function, "arguments": arguments}
        return call

    def adapt_history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The family's own adjustments to a history (ids in its shape, ...)."""
        return messages

    def adapt_tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The OpenAI tool list as the template reads it: templates that read a tool's
        `description` without a default get an empty one where the tool has none."""
        if not _READS_DESCRIPTION.search(self._template):
            return tools
        return [
            {**t, "function": {"description": "", **t["function"]}} if "function" in t else t
            for t in tools
        ]


def calls_into_text(fmt: ToolFormat, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant turns with calls written into their text, as the model wrote them, for
    templates that do not render `tool_calls` back so (the model still reads what it
    called). A numbered format's calls carry the numbers its grammar gave them."""
    out = []
    for i, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = history_calls(message)
            if fmt.numbered:
                written = fmt.numbered_calls_text(calls, fmt.first_call_index(messages[:i]))
            else:
                written = fmt.calls_as_text(calls)
            text = fmt.text_before_calls.join(filter(None, [message.get("content"), written]))
            message = {"role": "assistant", "content": text}
        out.append(message)
    return out
