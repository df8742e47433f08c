"""What a front end asks of the engine: a conversation, its tools and its constraint.

The one request type every front end (the app, the CLI, the server) builds is ChatRequest;
the rest are its parts in the OpenAI format, and the constraint it may carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, Required, TypedDict

from engine.types.images import ImageInput
from engine.types.sampling import SamplingSettings

ConstraintKind = Literal["json_schema", "lark", "regex", "gbnf", "any_json"]

# How messages name each kind of constraint.
KIND_NAMES: dict[str, str] = {
    "json_schema": "JSON schema",
    "lark": "Lark grammar",
    "gbnf": "GBNF grammar",
    "regex": "regex",
    "any_json": "any JSON",
}

# What became of a request's own constraint when it also offered tools: it applied alone
# (tool_choice "none"), joined the tool grammar (the reply follows it or is tool calls), or
# was paused (only calls were allowed, or its text could be mistaken for a call).
ConstraintUse = Literal["alone", "with_tools", "paused"]


class CompiledConstraint(Protocol):
    """A constraint's grammar as validation compiled it, seen from the request: what
    `engine.constraints.compiled.CompiledGrammar` offers every reader of a spec. The class
    itself lives with llguidance, which this package never imports."""

    grammar: str  # llguidance's TopLevelGrammar, as JSON text
    notes: tuple[str, ...]  # what the tight defaults did to a JSON schema
    warnings: tuple[str, ...]  # what llguidance relaxed


@dataclass(frozen=True)
class SchemaOptions:
    """How a JSON schema (a response format or a tool's parameters) becomes a grammar.

    `tight`: generate the tightest valid output (declared keys only where a schema leaves
    `additionalProperties` unspecified, numbers within the interoperable range, free-form
    values of bounded depth); every output still validates against the schema as written.
    `lenient`: keywords and formats llguidance cannot enforce are ignored with a warning
    instead of refusing the schema.
    """

    tight: bool = True
    lenient: bool = True


@dataclass(frozen=True)
class ConstraintSpec:
    """A user's constraint: its kind, its source text and a display name.

    `compiled` is set by the engine's validation (`engine.constraints.validate`): the
    grammar converted and checked once, reused by every request that carries this spec.
    It takes no part in equality and is never stored. `options` apply to JSON schemas.
    """

    kind: ConstraintKind
    source: str = ""
    name: str = ""
    compiled: CompiledConstraint | None = field(default=None, compare=False, repr=False)
    options: SchemaOptions = field(default_factory=SchemaOptions)


# Parsed JSON: a tool's parameter schema or a call's arguments (any JSON object).
JSONObject = dict[str, Any]


class FunctionCall(TypedDict):
    """The function of a tool call: its name and arguments (an object, or OpenAI's JSON
    text of one)."""

    name: str
    arguments: JSONObject | str


class ToolCallMessage(TypedDict):
    """One entry of an assistant message's `tool_calls`, in the OpenAI format."""

    id: str
    type: Literal["function"]
    function: FunctionCall


ChatRole = Literal["system", "user", "assistant", "tool"]


class ChatMessage(TypedDict, total=False):
    """One message of a conversation, in the OpenAI format: `role` and `content`, plus
    `tool_calls` on assistant messages and `tool_call_id`/`name` on tool results, and
    `images` (read before the text) for models that read images."""

    role: Required[ChatRole]
    content: str | None
    images: list[ImageInput]
    tool_calls: list[ToolCallMessage]
    tool_call_id: str
    name: str
    # an earlier reply's thinking, for templates that keep it in history (Qwen3, GLM, gpt-oss)
    reasoning_content: str


class FunctionDefinition(TypedDict, total=False):
    """What a tool does and takes: its name, a description and a JSON schema."""

    name: Required[str]
    description: str
    parameters: JSONObject


class ToolDefinition(TypedDict):
    """A tool a request offers, in the OpenAI format."""

    type: Literal["function"]
    function: FunctionDefinition


class FunctionChoice(TypedDict):
    name: str


class NamedToolChoice(TypedDict):
    """`tool_choice` naming the one function a reply must call."""

    type: Literal["function"]
    function: FunctionChoice


# "auto", "required", "none", a function's name, or {"type": "function", ...}.
ToolChoiceOption = str | NamedToolChoice


@dataclass
class ChatRequest:
    """One reply to generate for a conversation: the one request type every front end
    (the app, the CLI, a server) builds and the engine serves.

    Front ends that take untyped input (JSON from a file or a client) pass it through as
    is; the engine checks messages and tools and refuses bad ones with a clear error.
    """

    messages: list[ChatMessage]
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    constraint: ConstraintSpec | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoiceOption = "auto"
    parallel_tool_calls: bool = True
    # How JSON schemas in `tools` become grammars (the constraint carries its own).
    schema_options: SchemaOptions = field(default_factory=SchemaOptions)
    # Under a constraint: end the reply validly when max_tokens runs short (the closing
    # policy), and also when it repeats itself inside one value.
    close_to_fit: bool = True
    close_loops: bool = True
    # The last message is an assistant reply cut short: write on from its end (the reply
    # text streamed and returned is only the new part). Not with tools or a constraint.
    continue_final_message: bool = False
    # Text continued as written, without the chat template (`messages` is then ignored):
    # the server's /v1/completions. Special-token text in it counts as those tokens.
    raw_prompt: str | None = None
    # Record every reply token's log-probabilities (the token inspector, OpenAI's
    # `logprobs`): None is off; N keeps the N most likely alternatives (0 to
    # MAX_TOP_LOGPROBS) of each token, before the constraint's mask.
    logprobs: int | None = None
    # Which model answers (a model pool's id, alias, folder or repo id; None: the default
    # one). An engine serving one model answers with it whatever this says.
    model: str | None = None
    # What else the chat template is told (`enable_thinking`, a template's own switches):
    # a model's settings in a pool fill it; the engine's thinking switch, set from
    # `sampling.think`, wins over the same key here.
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    def alternatives(self, n: int) -> list[ChatRequest]:
        """`n` requests for different replies to this one (OpenAI's `n`, Regenerate ×N):
        with a seed, reply i samples with seed + i, so the set repeats as a whole."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        seed = self.sampling.seed
        return [
            replace(
                self,
                sampling=replace(self.sampling, seed=None if seed is None else seed + i),
            )
            for i in range(n)
        ]
