"""Tool-call formats: how a model writes calls, chosen from its chat template and tokenizer.

Each format is one small class: how to detect it, the Lark for a reply (calls required or
optional, one or several; built around a `fn` rule that grammar.py defines: one call object
with the name fixed and the arguments constrained), how to parse calls back out of the text,
and how to adapt messages for the template. Adding a format = one class + one entry in
`FORMATS`.

Markers such as `<tool_call>` or `[TOOL_CALLS]` are often added tokens, which llguidance
treats as special: they never come out of ordinary text bytes. The grammar then accepts the
marker as that single token or spelled out as text, and free text never contains it.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

from engine.prompt.tokenizer import ModelTokenizer

RawCall = tuple[str, dict[str, Any]]  # (name, arguments)

# Any text, newlines included.
_TEXT = r"/(.|\n)*/"


@dataclass(frozen=True)
class Marker:
    """A fixed piece of call syntax, and its token id when it is an added token."""

    text: str
    token_id: int | None = None

    def lark(self) -> str:
        """The marker as the single token or as text."""
        if self.token_id is None:
            return json.dumps(self.text)
        return f"(<[{self.token_id}]> | {json.dumps(self.text)})"

    def no_text_containing(self) -> str:
        """A terminal for free text that does not contain the marker's text."""
        return f"{_TEXT} & ~/(?s:.*){re.escape(self.text)}(?s:.*)/"


def _lit(text: str) -> str:
    return json.dumps(text)


def _decode_objects(text: str, pos: int, separator: str) -> tuple[list[Any], int]:
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


def _as_call(value: Any, args_keys: tuple[str, ...]) -> RawCall | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    for key in args_keys:
        if key in value:
            arguments = value[key]
            if isinstance(arguments, str):  # some models write arguments as a JSON string
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    return None
            return (value["name"], arguments) if isinstance(arguments, dict) else None
    return (value["name"], {})


class ToolFormat:
    """Base class. `native` is True when the chat template renders tools itself."""

    name: ClassVar[str] = ""
    call_start: ClassVar[str] = ""  # how the text of a reply's calls begins
    args_key: ClassVar[str] = "arguments"
    # Where calls live, for splitting a reply while it streams (engine/tools/stream.py):
    # (markup, whether it is consumed) opening a call region anywhere or only at the start
    # of the reply, and the markup closing a region (None: it runs to the end).
    stream_openers: ClassVar[tuple[tuple[str, bool], ...]] = ()
    stream_leading_openers: ClassVar[tuple[tuple[str, bool], ...]] = ()
    stream_closer: ClassVar[str | None] = None

    def __init__(self, tokenizer: ModelTokenizer, native: bool) -> None:
        self.native = native
        self.tokenizer = tokenizer

    @classmethod
    def detect(cls, template: str) -> bool:
        """Whether a chat template uses this format."""
        raise NotImplementedError

    def marker(self, text: str) -> Marker:
        return Marker(text, self.tokenizer.added_token_id(text))

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        """Lark for one call object, `{"name": "<tool_name>", "<args_key>": <args>}`."""
        head = '{"name": ' + json.dumps(tool_name) + ", " + json.dumps(self.args_key) + ": "
        return f"{_lit(head)} {args_rule} {_lit('}')}"

    def call_json(self, name: str, arguments: dict[str, Any]) -> str:
        return json.dumps({"name": name, self.args_key: arguments}, ensure_ascii=False)

    def reply_lark(self, required: bool, parallel: bool) -> str:
        """Lark rules, `start` included, for a whole reply; one call is the rule `fn`.

        `required`: the reply is calls only (no free text); else free text with optional
        calls. `parallel`: one or more calls; else at most one.
        """
        raise NotImplementedError

    def parse(self, text: str) -> tuple[str, list[RawCall]]:
        """Split a reply into its text (call markup removed) and its calls."""
        raise NotImplementedError

    def calls_as_text(self, calls: list[RawCall]) -> str:
        """How an assistant turn's calls are written, for rendering history as text."""
        raise NotImplementedError

    def new_call_id(self) -> str:
        return "call_" + uuid.uuid4().hex[:24]

    def adapt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Adjust normalised messages to what the native template accepts."""
        return messages


class HermesFormat(ToolFormat):
    """Hermes / Qwen: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`.

    Also the fallback for templates without tool support (tools go in the system prompt).
    """

    name = "hermes"
    call_start = "<tool_call>"
    stream_openers = (("<tool_call>", True),)
    stream_closer = "</tool_call>"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<tool_call>" in template

    def reply_lark(self, required: bool, parallel: bool) -> str:
        opener = self.marker("<tool_call>")
        close = self.marker("</tool_call>")
        if required:
            # Calls only; one trailing newline may precede the end of the reply.
            more = ' ("\\n" call)*' if parallel else ""
            return (
                f'start: call{more} "\\n"?\ncall: {opener.lark()} "\\n" fn "\\n" {close.lark()}\n'
            )
        # Free text runs until the opener (lazily, as text; or the opener's own token), then
        # the call is constrained. The final text may not contain the opener, so a call can
        # never slip through as unconstrained text.
        body = f'"\\n" fn "\\n" {close.lark()}'
        call = f"head {body}"
        if opener.token_id is not None:
            call += f" | TAIL <[{opener.token_id}]> {body}"
        return (
            "\n".join(
                [
                    f"start: call{'*' if parallel else '?'} tail",
                    "tail: TAIL",
                    f"TAIL: {opener.no_text_containing()}",
                    f"head[lazy]: TEXT {json.dumps(opener.text)}",
                    f"call: {call}",
                    f"TEXT: {_TEXT}",
                ]
            )
            + "\n"
        )

    def parse(self, text: str) -> tuple[str, list[RawCall]]:
        calls: list[RawCall] = []
        kept: list[str] = []
        pos = 0
        for match in re.finditer(r"<tool_call>\s*(.*?)\s*</tool_call>", text, re.DOTALL):
            values, end = _decode_objects(match.group(1), 0, "")
            call = _as_call(values[0], ("arguments", "parameters")) if values else None
            if call is None or match.group(1)[end:].strip():
                continue  # not a call: leave the markup in the text
            calls.append(call)
            kept.append(text[pos : match.start()])
            pos = match.end()
        kept.append(text[pos:])
        return "".join(kept).strip(), calls

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "\n".join(
            f"<tool_call>\n{self.call_json(name, args)}\n</tool_call>" for name, args in calls
        )


class Llama3JsonFormat(ToolFormat):
    """Llama 3.1/3.2 JSON calls: the whole reply is `{"name": ..., "parameters": {...}}`
    (several joined by "; "), optionally after `<|python_tag|>`; ends with `<|eot_id|>`
    or `<|eom_id|>`."""

    name = "llama3_json"
    call_start = '{"name": '
    args_key = "parameters"
    stream_leading_openers = (("<|python_tag|>", True), ("{", False))

    @classmethod
    def detect(cls, template: str) -> bool:
        return (
            "<|start_header_id|>" in template
            and "tools" in template
            and ('"parameters": ' in template or "ipython" in template)
        )

    def reply_lark(self, required: bool, parallel: bool) -> str:
        tag = self.tokenizer.added_token_id("<|python_tag|>")
        prefix = f"<[{tag}]>? " if tag is not None else ""
        more = ' ("; " fn)*' if parallel else ""
        calls = f"calls: {prefix}fn{more}\n"
        if required:
            return f"start: calls\n{calls}"
        # A text reply may not start with "{" (or blanks before one): that is a call.
        return f"start: TEXT | calls\nTEXT: /([^{{\\s](.|\\n)*)?/\n{calls}"

    def parse(self, text: str) -> tuple[str, list[RawCall]]:
        body = text.strip()
        if body.startswith("<|python_tag|>"):
            body = body[len("<|python_tag|>") :].lstrip()
        if not body.startswith("{"):
            return text.strip(), []
        values, end = _decode_objects(body, 0, ";")
        calls = [_as_call(v, ("parameters", "arguments")) for v in values]
        if not calls or any(c is None for c in calls):
            return text.strip(), []
        return body[end:].strip(), [c for c in calls if c is not None]

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "; ".join(self.call_json(name, args) for name, args in calls)

    def adapt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Llama templates raise on more than one call per turn; write those as text.
        out = []
        for message in messages:
            calls = message.get("tool_calls") or []
            if message.get("role") == "assistant" and len(calls) > 1:
                raw = [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
                text = " ".join(filter(None, [message.get("content"), self.calls_as_text(raw)]))
                message = {"role": "assistant", "content": text}
            out.append(message)
        return out


class MistralFormat(ToolFormat):
    """Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`, call ids of nine
    letters and digits."""

    name = "mistral"
    call_start = "[TOOL_CALLS]"
    stream_openers = (("[TOOL_CALLS]", True),)
    stream_leading_openers = (("[{", False),)
    stream_closer = "]"

    @classmethod
    def detect(cls, template: str) -> bool:
        return "[TOOL_CALLS]" in template

    def reply_lark(self, required: bool, parallel: bool) -> str:
        opener = self.marker("[TOOL_CALLS]")
        more = ' (", " fn)*' if parallel else ""
        block = f'" [" fn{more} "]"'
        if required:
            return f"start: {opener.lark()} {block}\n"
        start = "TAIL | head block"
        if opener.token_id is not None:
            start += f" | TAIL <[{opener.token_id}]> block"
        return (
            "\n".join(
                [
                    f"start: {start}",
                    f"block: {block}",
                    # Text may not look like a call list either: parse() accepts one without the
                    # marker, for detokenizers that drop special tokens.
                    f"TAIL: {opener.no_text_containing()} & ~/\\s*\\[\\{{(?s:.*)/",
                    f"head[lazy]: TEXT {json.dumps(opener.text)}",
                    f"TEXT: {_TEXT}",
                ]
            )
            + "\n"
        )

    def parse(self, text: str) -> tuple[str, list[RawCall]]:
        index = text.find("[TOOL_CALLS]")
        if index >= 0:
            before, rest = text[:index], text[index + len("[TOOL_CALLS]") :]
        elif text.lstrip().startswith('[{"name"'):
            before, rest = "", text  # the marker was dropped as a special token
        else:
            return text.strip(), []
        values, end = _decode_objects(rest, 0, "")
        if not values or not isinstance(values[0], list):
            return text.strip(), []
        calls = [_as_call(v, ("arguments", "parameters")) for v in values[0]]
        if not calls or any(c is None for c in calls):
            return text.strip(), []
        return (before + rest[end:]).strip(), [c for c in calls if c is not None]

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "[TOOL_CALLS] [" + ", ".join(self.call_json(n, a) for n, a in calls) + "]"

    def new_call_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        return "".join(secrets.choice(alphabet) for _ in range(9))

    def adapt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Mistral templates insist on 9-character alphanumeric ids: map others stably.
        def short(call_id: Any) -> str:
            text = str(call_id or "")
            if len(text) == 9 and text.isalnum():
                return text
            return uuid.uuid5(uuid.NAMESPACE_OID, text).hex[:9]

        out = []
        for message in messages:
            message = dict(message)
            if message.get("tool_calls"):
                message["tool_calls"] = [
                    dict(c, id=short(c.get("id"))) for c in message["tool_calls"]
                ]
            if message.get("role") == "tool":
                message["tool_call_id"] = short(message.get("tool_call_id"))
            out.append(message)
        return out


# Checked in order; the first match wins (the Llama check is the loosest, so it is last).
FORMATS: list[type[ToolFormat]] = [MistralFormat, HermesFormat, Llama3JsonFormat]


def choose_format(tokenizer: Any) -> ToolFormat:
    """The call format for a tokenizer (an mlx-lm TokenizerWrapper or an HF tokenizer).

    A template that renders one of the known formats is used natively; anything else
    (ChatML without tools, no template) gets the Hermes format with the tools described
    in the system prompt.
    """
    tok = ModelTokenizer.of(tokenizer)
    template = tok.chat_template or ""
    for cls in FORMATS:
        if cls.detect(template):
            return cls(tok, native=True)
    return HermesFormat(tok, native=False)
