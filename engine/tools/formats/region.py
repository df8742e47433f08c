"""Formats whose calls sit in one region of the reply, opened by fixed markup.

Most families write free text (or nothing), then an opener (`<|tool_call|>`,
`<minimax:tool_call>`, `[TOOL_CALLS]`, …), then their calls, and the reply ends. A
`RegionFormat` says what the opener is and how the calls after it are written
(`region_lark`, `parse_region`); the reply grammar, the parse and the streaming split are
shared. Under `auto`, text before the opener is free but never contains it, so a call can
never slip through as unconstrained text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from engine.tools.formats.base import (
    TEXT,
    RawCall,
    Schemas,
    ToolFormat,
    regex_text,
    text_then,
)


class RegionFormat(ToolFormat):
    """A format whose calls follow `opener` to the end of the reply."""

    opener: ClassVar[str] = ""
    # The opener may only start the reply (bare JSON, pythonic lists): text never begins
    # with it, and text elsewhere may contain it.
    leading_only: ClassVar[bool] = False
    json_objects = False

    def __init__(self, tokenizer: Any, native: bool) -> None:
        super().__init__(tokenizer, native)
        opener = self.opener_text()
        if self.leading_only:
            self.stream_leading_openers = ((opener, True),)  # type: ignore[misc]
        else:
            self.stream_openers = ((opener, True),)  # type: ignore[misc]

    def opener_text(self) -> str:
        """The opener for this template (some families differ by template)."""
        return self.opener

    def written_opener(self) -> str:
        """The opener as the grammar writes it (the opener, or more: a newline before)."""
        return self.opener_text()

    @property
    def call_start(self) -> str:  # type: ignore[override]
        return self.written_opener()

    @property
    def marker_text(self) -> str:  # type: ignore[override]
        return self.opener_text()

    def region_lark(self, parallel: bool) -> str:
        """Lark for the calls after the opener (`fn` is one call)."""
        raise NotImplementedError

    def parse_region(self, region: str, schemas: Schemas | None) -> list[RawCall] | None:
        """The calls in the text after the opener, or None when it is not well formed."""
        raise NotImplementedError

    def reply_lark(self, required: bool, parallel: bool) -> str:
        opener = self.written_opener()
        region = self.region_lark(parallel)
        pieces = self.pieces(opener)
        whole = " ".join(p.lark() for p in pieces)
        if required:
            return f"start: {whole} {region}\n"
        if self.leading_only:
            # A text reply may not start with the opener (blanks before it included).
            text = f"{TEXT} & ~/\\s*{regex_text(opener)}(?s:.*)/"
            return f"start: TEXT | {whole} {region}\nTEXT: {text}\n"
        rest = " ".join(p.lark() for p in pieces[1:])
        head, rules = text_then(pieces[0])
        return "\n".join([f"start: TAIL | {head} {rest} {region}", *rules]) + "\n"

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        opener = self.opener_text()
        if self.leading_only:
            body = text.lstrip()
            if not body.startswith(opener):
                return text.strip(), []
            before, region = "", body[len(opener) :]
        else:
            index = text.find(opener)
            if index < 0:
                return text.strip(), []
            before, region = text[:index], text[index + len(opener) :]
        calls = self.parse_region(region, schemas)
        if not calls:
            return text.strip(), []
        return before.strip(), calls


def json_region_calls(
    region: str,
    start: str,
    end: str,
    name_key: str = "name",
    args_keys: tuple[str, ...] = ("arguments", "parameters"),
) -> list[RawCall] | None:
    """Calls from a JSON list or object after the markup `start` (blanks allowed), which
    `end` follows (when given)."""
    from engine.tools.formats.base import as_call, decode_objects

    body = region.lstrip()
    if start and not body.startswith(start):
        return None
    values, stop = decode_objects(body, len(start), "")
    if not values:
        return None
    if end and not body[stop:].lstrip().startswith(end):
        return None
    items = values[0] if isinstance(values[0], list) else [values[0]]
    calls = [as_call(v, args_keys, name_key) for v in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]
