"""Splitting a streaming reply into content and tool-call pieces gives what the final parse
gives, however the text is cut into pieces."""

from __future__ import annotations

import json
import random

import pytest

from engine.tools.formats import (
    FORMATS,
    HermesFormat,
    Llama3JsonFormat,
    MistralFormat,
    ToolFormat,
)
from engine.tools.parse import parse_tool_calls
from engine.tools.stream import ToolCallStream
from engine.types import TextDelta, ToolCallDelta

CALLS = [
    ("get_weather", {"city": "Paris", "note": 'a "quoted" {brace} ]', "days": [1, 2]}),
    ("add", {"a": 1, "b": {"c": []}}),
]


def _replies(fmt: ToolFormat) -> list[str]:
    one, two = fmt.calls_as_text(CALLS[:1]), fmt.calls_as_text(CALLS)
    replies = [one, two, "Just text, no calls. <tool and [TOOL and {braces}"]
    if not getattr(fmt, "leading_only", fmt.name == "llama3_json"):  # calls: the whole reply
        replies += [f"Let me check.\n{two}", f"  Sure: {one}\n"]
    return replies


def _split(text: str, rng: random.Random) -> list[str]:
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(1, 7)
        pieces.append(text[i : i + n])
        i += n
    return pieces


@pytest.mark.parametrize(
    "fmt",
    [
        HermesFormat(None, native=False),
        MistralFormat(None, native=True),
        Llama3JsonFormat(None, True),
        # every other syntax: calls that are not JSON objects stream whole
        *(cls(None, True) for cls in FORMATS if cls not in (MistralFormat, Llama3JsonFormat)),
    ],
    ids=lambda f: f.name,
)
def test_streamed_split_matches_the_final_parse(fmt: ToolFormat) -> None:
    rng = random.Random(7)
    for reply in _replies(fmt):
        for _ in range(20):
            stream = ToolCallStream(fmt)
            events = [e for piece in _split(reply, rng) for e in stream.feed(piece)]
            events += stream.finish()
            content = "".join(e.text for e in events if isinstance(e, TextDelta))
            calls: dict[int, dict[str, str]] = {}
            for e in events:
                if isinstance(e, ToolCallDelta):
                    call = calls.setdefault(e.index, {"id": "", "name": "", "arguments": ""})
                    if e.id:
                        assert not call["id"], "id and name come once, first"
                        call["id"], call["name"] = e.id, e.name
                    call["arguments"] += e.arguments
            want_text, want_calls = parse_tool_calls(fmt, reply)
            assert content == want_text
            assert [c["name"] for c in calls.values()] == [c.name for c in want_calls]
            assert [json.loads(c["arguments"]) for c in calls.values()] == [
                c.arguments for c in want_calls
            ]
            named = stream.with_ids(want_calls)
            assert [c.id for c in named] == [c["id"] for c in calls.values()]
