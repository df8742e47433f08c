"""Request bodies of Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`).

As in the OpenAI bodies, top-level fields are closed (an unknown one is a 400 naming it)
and types are strict. Content blocks and tools accept extra keys (`cache_control`,
`citations`, ...), which clients attach freely and which change nothing here. Fields the
API defines that change nothing here, or that a local server cannot honour
(`container`, `mcp_servers`), are handled first by the table in engine/server/compat.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, strict=True)


class TextBlock(_Open):
    type: Literal["text"]
    text: str


class MediaBlock(_Open):
    """An image or a document: refused (with its place named) while the model reads text."""

    type: Literal["image", "document", "search_result"]


class ToolUseBlock(_Open):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(_Open):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[Annotated[TextBlock | MediaBlock, Field(discriminator="type")]] = ""
    is_error: bool | None = None


class ThinkingBlock(_Open):
    """An earlier reply's thinking, sent back by clients: left out of the prompt."""

    type: Literal["thinking", "redacted_thinking"]


Block = Annotated[
    TextBlock | MediaBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock,
    Field(discriminator="type"),
]


class Message(_Open):
    """A turn; `system` ones (Claude Code sends them mid-conversation) are placed by the
    chat template: kept in place, or joined to the system prompt where it refuses them."""

    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class Tool(_Open):
    """A client tool. Anthropic's server tools (`web_search_...`, `bash_...`) have a
    `type` of their own and are refused."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None


class ToolChoice(_Closed):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class JSONOutputFormat(_Closed):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Closed):
    format: JSONOutputFormat | None = None
    # The thinking budget of a model that thinks (EFFORT_BUDGETS); ignored by others.
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None


class Thinking(_Open):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None


class _Conversation(_Closed):
    """What both endpoints read: the conversation, its tools and its output format."""

    model: str
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    output_config: OutputConfig | None = None
    # Whether a model that thinks does, and its budget (ignored by other models).
    thinking: Thinking | None = None


class MessagesBody(_Conversation):
    """POST /v1/messages."""

    max_tokens: int = Field(ge=1)
    stream: bool = False
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    # Corral's extension: replies with the same seed and settings sample the same tokens.
    seed: int | None = Field(default=None, ge=0, lt=2**64)


class CountTokensBody(_Conversation):
    """POST /v1/messages/count_tokens: the prompt a Messages request would read."""
