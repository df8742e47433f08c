"""Request bodies of the OpenAI-compatible endpoints, as typed pydantic models.

Top-level fields are closed (an unknown argument is a 400 naming it), so a client never
believes a setting took effect when it did not. Fields the API defines that change nothing
here, or that Corral cannot honour (`logit_bias`, ...), are handled before these models
read a body, by the table in engine/server/compat.py. `logprobs` is a boolean in chat
completions and a count in text completions (checked in translate.py). `n` choices decode
side by side. Message objects accept extra keys: clients echo back whole
assistant messages (`refusal`, `annotations`, `audio`: null). Types are strict, as OpenAI's
are: `"0.5"` is not a temperature, `true` is not a token count, `"true"` does not stream.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STOP_STRINGS = 16


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, strict=True)


class ContentPart(_Open):
    """One part of a message's content: `{"type": "text", "text": ...}`, or an image
    (`{"type": "image_url", "image_url": {"url": ...}}`) for models that read images."""

    type: str
    text: str | None = None
    image_url: dict[str, Any] | None = None


class FunctionCallBody(_Open):
    name: str
    arguments: str | dict[str, Any] = "{}"


class MessageToolCall(_Open):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallBody


class MessageBody(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None  # an earlier reply's thinking (as returned)


class JSONSchemaFormat(_Closed):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | bool = Field(default=True, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Closed):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


class Grammar(_Closed):
    """Corral's extension: a grammar given as text (the server never reads paths)."""

    type: Literal["lark", "gbnf", "regex"]
    value: str


class StreamOptions(_Open):
    include_usage: bool = False


class _Generation(_Closed):
    """Fields shared by chat and text completions."""

    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop: str | list[str] | None = Field(default=None)
    seed: int | None = Field(default=None, ge=0, lt=2**64)
    n: int | None = Field(default=None, ge=1)
    logprobs: Any = None
    response_format: ResponseFormat | None = None
    # Corral's extensions
    grammar: Grammar | None = None
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0, lt=1)
    repetition_penalty: float | None = Field(default=None, gt=0, le=10)


class ChatCompletionBody(_Generation):
    """POST /v1/chat/completions."""

    messages: list[MessageBody] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    # models that think first: an effort word ("none" turns thinking off) or a budget
    reasoning_effort: str | None = None
    max_thinking_tokens: int | None = Field(default=None, ge=0)


class CompletionBody(_Generation):
    """POST /v1/completions: a raw prompt continued without the chat template."""

    prompt: str | list[str] | list[int] | list[list[int]]
