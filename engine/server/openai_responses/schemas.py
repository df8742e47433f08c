"""Request bodies of OpenAI's Responses API (`POST /v1/responses`).

Top-level fields are closed and types strict, as in the other dialects. Input items are
checked one by one in translate.py (a message item may leave out its `type`), so each
error names the item it is in. Fields the API defines that a local text model cannot
honour (`background`, `conversation`, `prompt`, `top_logprobs`), or that change nothing
here, are handled first by the table in engine/server/compat.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, strict=True)


class TextPart(_Open):
    type: Literal["input_text", "output_text", "text"]
    text: str


class MediaPart(_Open):
    """An image, file or audio part: refused while the model reads text."""

    type: Literal["input_image", "input_file", "input_audio", "refusal"]


Part = Annotated[TextPart | MediaPart, Field(discriminator="type")]


class MessageItem(_Open):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[Part]


class FunctionCallItem(_Open):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(_Open):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[Part]


class ReasoningItem(_Open):
    """An earlier reply's reasoning, sent back by clients: left out of the prompt."""

    type: Literal["reasoning"]


class FunctionTool(_Closed):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None  # Corral's calls always fit their parameters


class TextFormat(_Closed):
    type: Literal["text", "json_object", "json_schema"]
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(_Closed):
    format: TextFormat | None = None


class ResponsesBody(_Closed):
    """POST /v1/responses."""

    model: str | None = None
    input: str | list[dict[str, Any]] = Field(default="")
    instructions: str | None = None
    previous_response_id: str | None = None
    store: bool = True
    stream: bool = False
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    # `effort` sets a thinking model's budget; `metadata` is echoed in the response.
    reasoning: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    # Corral's extensions, as in chat completions.
    seed: int | None = Field(default=None, ge=0, lt=2**64)
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0, lt=1)
    repetition_penalty: float | None = Field(default=None, gt=0, le=10)


class InputTokensBody(ResponsesBody):
    """POST /v1/responses/input_tokens: the prompt a Responses request would read."""
