"""The records the store hands out: conversations, messages and per-conversation settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, cast

from engine.types import ChatMessage, ChatRole, SamplingSettings, ToolDefinition

TOOL_CHOICES = ("auto", "required", "none")


@dataclass
class ChatSettings:
    """A conversation's system prompt and sampling settings."""

    system_prompt: str = ""
    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    max_tokens: int = 512
    seed: int | None = None

    def to_sampling(self) -> SamplingSettings:
        return SamplingSettings(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )

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


@dataclass
class Message:
    """One node of a conversation's message tree.

    `meta` holds what the engine reported: stats, constraint name, tool calls, tool call
    id, stop reason, incomplete/error flags.
    """

    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    meta: dict[str, Any]
    created_at: float

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
