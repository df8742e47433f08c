"""Helpers for the chat-template tests: the dataset's real templates (read in place) and
tokenizers that carry one of them with its special markers as added tokens."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.shared_datasets import dataset

# Marker shapes real templates write: <|im_start|>, <|turn>, <turn|>, <｜User｜>, [INST],
# Gemma's <start_of_turn>, MiniMax's ]~b] and [e~[.
_MARKER = re.compile(
    r"<\|[A-Za-z0-9_.:/-]+\|?>|<[A-Za-z0-9_]+\|>|<｜[^｜]{1,30}｜>|\[/?[A-Z][A-Z_]{2,}\]"
    r"|<(?:start|end)_of_[a-z_]+>|\]~!?b\]|\[e~\["
)

# The tool conversation every template must carry: a call, its result and a reply.
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TOOL_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0001",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0001", "content": "Sunny, 21 degrees"},
    {"role": "assistant", "content": "It is sunny."},
    {"role": "user", "content": "And tomorrow?"},
]


def template_paths() -> list[Path]:
    """The dataset's templates (skips, or fails under CORRAL_REQUIRE_DATASETS=1, without it)."""
    return sorted(dataset("chat-templates").glob("*.jinja"))


def template_names() -> list[str]:
    """The templates' file names for parametrizing (empty when the dataset is absent: the
    test that lists them then skips through `template_paths`)."""
    from tests.shared_datasets import DATASETS

    folder = DATASETS / "chat-templates"
    return sorted(p.name for p in folder.glob("*.jinja")) if folder.is_dir() else []


def template_text(name: str) -> str:
    return (dataset("chat-templates") / name).read_text(encoding="utf-8")


def markers_of(template: str) -> list[str]:
    """The special markers `template` writes (by their shape), longest first."""
    found = {m for m in _MARKER.findall(template) if len(m) <= 40}
    return sorted(found, key=lambda m: (-len(m), m))


def template_tokenizer(
    default_model_dir: Path, template: str, out: Path, extra: list[str] | tuple[str, ...] = ()
) -> Path:
    """A tokenizer folder at `out`: the default model's vocabulary with `template`'s markers
    (and `extra`) as added special tokens and `template` as its chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_dir))
    markers = [m for m in dict.fromkeys([*extra, *markers_of(template)]) if m]
    tok.add_special_tokens({"additional_special_tokens": markers})
    tok.chat_template = template
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(out))
    return out
