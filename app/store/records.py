"""The records the store hands out: conversations, messages and per-conversation settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, cast

from engine.types import ChatMessage, ChatRole, SamplingSettings, ToolDefinition

TOOL_CHOICES = ("auto", "required", "none")


SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
DEFAULT_MAX_TOKENS = 1024


@dataclass
class ChatSettings:
    """A conversation's system prompt and sampling settings. A sampling value left at None
    follows the loaded model's recommendation (engine.library.defaults), else the engine's
    default."""

    system_prompt: str = ""
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    seed: int | None = None
    # models that think first (ModelInfo.reasoning): think before answering, and at most
    # this many thinking tokens (0: no budget of the chat's own). Other models ignore both.
    think: bool = True
    max_thinking_tokens: int = 0

    def effective(self, model_defaults: Mapping[str, float] | None = None) -> dict[str, Any]:
        """Each sampling value as it will be used: the conversation's own, else the model's,
        else the engine's default."""
        engine_defaults = SamplingSettings()
        out: dict[str, Any] = {}
        for name in SAMPLING_FIELDS:
            value = getattr(self, name)
            if value is None and model_defaults and name in model_defaults:
                value = model_defaults[name]
            if value is None:
                value = getattr(engine_defaults, name)
            out[name] = int(value) if name == "top_k" else float(value)
        return out

    def custom_fields(self) -> list[str]:
        """The sampling values this conversation sets itself (not following the model)."""
        return [name for name in SAMPLING_FIELDS if getattr(self, name) is not None]

    def to_sampling(
        self, model_defaults: Mapping[str, float] | None = None, *, reasoning: bool = False
    ) -> SamplingSettings:
        """The engine's settings; with `reasoning` (the model thinks first) the chat's
        thinking switch and budget too, else the engine's (the model's own) default."""
        sampling = SamplingSettings(
            **self.effective(model_defaults), max_tokens=self.max_tokens, seed=self.seed
        )
        if reasoning:
            sampling.think = self.think
            sampling.max_thinking_tokens = self.max_thinking_tokens or None
        return sampling

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ChatSettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass
class ToolsConfig:
    """A conversation's tools: user definitions (OpenAI format), enabled built-ins, choice."""

    definitions: list[ToolDefinition] = field(default_factory=list)
    builtins: list[str] = field(default_factory=list)
    tool_choice: str = "auto"
    source_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ToolsConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    active_leaf_id: int | None
    settings: ChatSettings
    constraint: dict[str, Any] | None
    tools: ToolsConfig


@dataclass(frozen=True)
class MessageImage:
    """An image sent with a message: its stored file (`<data>/images/<sha256>.<ext>`, see
    app.store.images) and the name the user attached it under."""

    file: str
    name: str
    path: Path


@dataclass(frozen=True)
class NewImage:
    """An image to store with a new message: its bytes (checked already), the name it was
    attached under, and its format's suffix (png, jpg, webp or gif)."""

    data: bytes = field(repr=False)
    name: str
    suffix: str


@dataclass
class Message:
    """One node of a conversation's message tree.

    `meta` holds what the engine reported: stats, constraint name, tool calls, tool call
    id, stop reason, incomplete/error flags. `images` are the pictures sent with it.
    """

    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    meta: dict[str, Any]
    created_at: float
    images: list[MessageImage] = field(default_factory=list)

    def to_chat_message(self) -> ChatMessage:
        """The OpenAI-style message the engine takes."""
        out: ChatMessage = {"role": cast(ChatRole, self.role), "content": self.content}
        if self.role == "assistant" and self.meta.get("tool_calls"):
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in self.meta["tool_calls"]
            ]
        if self.role == "tool":
            out["tool_call_id"] = self.meta.get("tool_call_id", "")
            out["name"] = self.meta.get("name", "")
        return out
