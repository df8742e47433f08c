"""Split a reply into content and tool calls while it streams.

The final `ToolPlan.parse` is authoritative; this gives front ends the same split early:
text outside the call markup as TextDeltas, and each call as a ToolCallDelta with its id
and name, then fragments of its arguments' JSON text. It runs only under a tool grammar,
so every call object has the layout the grammar forces: `{"name": "...", "arguments": ...}`.

A format says where calls live through three class attributes: `stream_openers` (markup
that opens a call region anywhere), `stream_leading_openers` (markup that opens one only
at the start of the reply) and `stream_closer` (the markup ending a region, or None when
the region runs to the end). Inside a region everything but the call objects is markup.

Formats whose calls are not JSON objects (XML parameters, pythonic, Harmony, …) stream
each call whole once it parses: the text so far is parsed again as it grows (replies are
short), content is what the parse leaves outside the calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from engine.tools.formats import Schemas, ToolFormat
from engine.types import TextDelta, ToolCall, ToolCallDelta

StreamEvent = TextDelta | ToolCallDelta

# The head of a call object after its "{": the name, then the arguments key.
_HEAD = re.compile(r'\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*')


class ToolCallStream:
    """Feed reply text as it decodes; get content and tool-call pieces back."""

    def __new__(cls, fmt: ToolFormat, schemas: Schemas | None = None) -> ToolCallStream:
        if cls is ToolCallStream and not fmt.json_objects:
            return super().__new__(WholeCallStream)
        return super().__new__(cls)

    def __init__(self, fmt: ToolFormat, schemas: Schemas | None = None) -> None:
        self._fmt = fmt
        self._schemas = schemas
        self._buf = ""  # text received and not decided yet
        self._mode = "start"  # start | text | region | head | args | tail
        self._content_started = False
        self._held_space = ""
        self._depth = 0
        self._in_string = False
        self._escape = False
        self.calls: list[tuple[str, str]] = []  # (id, name) of each call begun

    def feed(self, text: str) -> list[StreamEvent]:
        """Events for `text`, the next piece of the reply."""
        self._buf += text
        out: list[StreamEvent] = []
        self._run(out, final=False)
        return out

    def finish(self) -> list[StreamEvent]:
        """Events for whatever is still held back, at the end of the reply."""
        out: list[StreamEvent] = []
        self._run(out, final=True)
        if self._mode in ("start", "text") and self._buf:
            self._content(self._buf, out)
        self._buf = ""
        return out

    def with_ids(self, calls: list[ToolCall]) -> list[ToolCall]:
        """The parsed `calls` carrying the ids already streamed for them."""
        out = []
        for i, call in enumerate(calls):
            if i < len(self.calls) and self.calls[i][1] == call.name:
                call = replace(call, id=self.calls[i][0])
            out.append(call)
        return out

    # ---- the state machine ----

    def _run(self, out: list[StreamEvent], final: bool) -> None:
        while self._buf:
            step = getattr(self, f"_step_{self._mode}")
            if not step(out, final):
                return

    def _step_start(self, out: list[StreamEvent], final: bool) -> bool:
        self._buf = self._buf.lstrip()
        if not self._buf:
            return False
        for opener, consumed in self._fmt.stream_leading_openers:
            if self._buf.startswith(opener):
                self._buf = self._buf[len(opener) :] if consumed else self._buf
                self._mode = "region"
                return True
            if opener.startswith(self._buf) and not final:
                return False  # could still become the opener
        self._mode = "text"
        return True

    def _step_text(self, out: list[StreamEvent], final: bool) -> bool:
        found = [
            (i, opener, consumed)
            for opener, consumed in self._fmt.stream_openers
            if (i := self._buf.find(opener)) >= 0
        ]
        if found:
            i, opener, consumed = min(found)
            self._content(self._buf[:i], out)
            self._buf = self._buf[i + len(opener) if consumed else i :]
            self._mode = "region"
            return True
        keep = 0 if final else self._opener_prefix_length()
        self._content(self._buf[: len(self._buf) - keep], out)
        self._buf = self._buf[len(self._buf) - keep :]
        return False

    def _step_region(self, out: list[StreamEvent], final: bool) -> bool:
        closer = self._fmt.stream_closer
        for i, char in enumerate(self._buf):
            rest = self._buf[i:]
            if closer and rest.startswith(closer):
                self._buf = rest[len(closer) :]
                self._mode = "text"
                return True
            if closer and closer.startswith(rest) and not final:
                self._buf = rest
                return False
            if char == "{":
                self._buf = rest[1:]
                self._mode = "head"
                return True
        self._buf = ""  # markup between calls
        return False

    def _step_head(self, out: list[StreamEvent], final: bool) -> bool:
        found = _HEAD.match(self._buf)
        if found is None:
            return False  # wait for the rest of the head
        call_id = self._fmt.new_call_id()
        name = json.loads(found.group(1))
        self.calls.append((call_id, name))
        out.append(ToolCallDelta(len(self.calls) - 1, call_id, name, ""))
        self._buf = self._buf[found.end() :]
        self._mode = "args"
        self._depth, self._in_string, self._escape = 0, False, False
        return True

    def _step_args(self, out: list[StreamEvent], final: bool) -> bool:
        if self._depth == 0:  # blanks before the arguments are not part of them
            self._buf = self._buf.lstrip()
        end = None
        for i, char in enumerate(self._buf):
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 0:
                    end = i + 1
                    break
        piece = self._buf if end is None else self._buf[:end]
        if piece.strip() or (piece and self._depth):
            out.append(ToolCallDelta(len(self.calls) - 1, arguments=piece))
        if end is None:
            self._buf = ""
            return False
        self._buf = self._buf[end:]
        self._mode = "tail"
        return True

    def _step_tail(self, out: list[StreamEvent], final: bool) -> bool:
        i = self._buf.find("}")  # the call object's own closing brace
        if i < 0:
            self._buf = ""
            return False
        self._buf = self._buf[i + 1 :]
        self._mode = "region"
        return True

    # ---- content ----

    def _opener_prefix_length(self) -> int:
        """Length of the longest tail of the buffer that begins some opener."""
        longest = max((len(o) for o, _ in self._fmt.stream_openers), default=0)
        for n in range(min(longest - 1, len(self._buf)), 0, -1):
            tail = self._buf[-n:]
            if any(o.startswith(tail) for o, _ in self._fmt.stream_openers):
                return n
        return 0

    def _content(self, text: str, out: list[StreamEvent]) -> None:
        """Emit content as the final parse will give it: no leading or trailing blanks."""
        if not self._content_started:
            text = text.lstrip()
        body = text.rstrip()
        if not body:
            self._held_space += text
            return
        out.append(TextDelta(self._held_space + body))
        self._content_started = True
        self._held_space = text[len(body) :]


class WholeCallStream(ToolCallStream):
    """The split for formats whose calls are not JSON objects: each call is sent whole
    (its arguments as one JSON piece) as soon as the text so far parses into it."""

    def __init__(self, fmt: ToolFormat, schemas: Schemas | None = None) -> None:
        super().__init__(fmt, schemas)
        self._text = ""
        self._sent = ""  # content already sent, as the parse gives it
        # an opener was seen: content waits for the final parse
        self._region = fmt.stream_content_waits

    def feed(self, text: str) -> list[StreamEvent]:
        self._text += text
        return self._step(final=False)

    def finish(self) -> list[StreamEvent]:
        return self._step(final=True)

    def _step(self, final: bool) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        content, calls = self._fmt.parse(self._text, self._schemas)
        if not final and not self._region:
            openers = [o for o, _ in self._fmt.stream_openers + self._fmt.stream_leading_openers]
            self._region = bool(calls) or any(o and o in self._text for o in openers)
            if not self._region:  # trailing blanks wait: the final parse may strip them
                content = content[: len(content) - self._held(content)].rstrip()
        if (final or not self._region) and content.startswith(self._sent):
            piece = content[len(self._sent) :]
            if piece:
                out.append(TextDelta(piece))
                self._sent = content
        written = self._fmt.call_ids(self._text)
        for name, arguments in calls[len(self.calls) :]:
            index = len(self.calls)
            complete = len(written) == len(calls)
            call_id = written[index] if complete else self._fmt.new_call_id()
            self.calls.append((call_id, name))
            out.append(ToolCallDelta(len(self.calls) - 1, call_id, name, ""))
            out.append(ToolCallDelta(len(self.calls) - 1, arguments=json.dumps(arguments)))
        return out

    def _held(self, content: str) -> int:
        """How much of the content's tail could still become an opener (or a call)."""
        openers = [o for o, _ in self._fmt.stream_openers + self._fmt.stream_leading_openers]
        if any(o and content.lstrip() and o.startswith(content.lstrip()) for o in openers):
            return len(content)
        for n in range(min(max((len(o) for o in openers), default=1) - 1, len(content)), 0, -1):
            if any(o.startswith(content[-n:]) for o in openers):
                return n
        return 0
