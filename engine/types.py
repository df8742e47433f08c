"""Plain data passed between the engine and its callers: requests, settings, events, results.

Nothing here touches MLX, so the GUI can import it freely.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict

if TYPE_CHECKING:
    from engine.constraints.compiled import CompiledGrammar


# Replies the engine decodes side by side at most, unless told otherwise (the app's
# Preferences, `serve --max-rows`).
DEFAULT_MAX_ROWS = 8


class StopReason(StrEnum):
    """Why a reply ended."""

    EOS = "eos"
    LENGTH = "length"
    STOP_STRING = "stop"
    CANCELLED = "cancelled"
    ERROR = "error"


@dataclass
class SamplingSettings:
    """How the next token is picked. `temperature == 0` means greedy."""

    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    repetition_context: int = 64
    seed: int | None = None
    max_tokens: int = 512
    stop: list[str] = field(default_factory=list)

    def validate(self) -> None:
        """Raise ValueError naming the first setting that is out of range (and the range)."""
        from engine.sampling_checks import check_sampling

        check_sampling(self)


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
    compiled: CompiledGrammar | None = field(default=None, compare=False, repr=False)
    options: SchemaOptions = field(default_factory=SchemaOptions)


@dataclass(frozen=True)
class Diagnostic:
    """One problem with a constraint: what, and where (the file, 1-based line and column)
    if known. `str()` gives the position and message; whoever shows it names the file."""

    message: str
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning"] = "error"
    detail: str = ""  # the offending lines with a caret, as llguidance prints them
    file: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else ""
        if where and self.column is not None:
            where += f", column {self.column}"
        return f"{where}: {self.message}" if where else self.message


@dataclass
class ValidationReport:
    """The outcome of checking a constraint: its compiled grammar, errors and warnings.

    When there are no errors, `spec` carries its CompiledGrammar: use it for requests."""

    spec: ConstraintSpec
    grammar: str | None = None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    check_ms: float = 0.0
    # what the tight defaults did to a JSON schema, in words ("declared keys only", ...)
    tight: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        """One line per problem, prefixed with the constraint's name."""
        label = self.spec.name or KIND_NAMES.get(self.spec.kind, self.spec.kind)
        lines = [f"{label}: {d}" for d in self.errors]
        lines += [f"{label}: warning: {d}" for d in self.warnings]
        return "\n".join(lines)


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
    `tool_calls` on assistant messages and `tool_call_id`/`name` on tool results."""

    role: Required[ChatRole]
    content: str | None
    tool_calls: list[ToolCallMessage]
    tool_call_id: str
    name: str


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


# Alternatives a recorded token keeps at most (OpenAI's `top_logprobs` limit).
MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class TokenAlternative:
    """A token the model could have written instead: its log-probability before the
    constraint's mask and whether the mask allowed it."""

    token: int
    text: str
    logprob: float
    allowed: bool = True
    bytes: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "text": self.text,
            "logprob": self.logprob,
            "allowed": self.allowed,
            "bytes": list(self.bytes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenAlternative:
        return cls(
            int(data["token"]),
            str(data["text"]),
            float(data["logprob"]),
            bool(data.get("allowed", True)),
            tuple(int(b) for b in data.get("bytes", ())),
        )


@dataclass(frozen=True)
class TokenLogprob:
    """What was known about one reply token when it was written.

    `logprob` is its log-probability after the constraint's mask and the penalties (the
    distribution it was sampled from, before temperature; 0.0 for a forced token), and
    `model_logprob` before the mask (what the model wanted; None where no forward pass
    predicted it, as for the closing policy's tokens). `top` are the most likely tokens
    before the mask, best first, each with whether the mask allowed it. `allowed` counts
    the tokens the grammar allowed (None: no constraint). `forced`: the grammar (or the
    closing policy) left this one token, fed without sampling. `overridden`: the model's
    own first choice was not allowed.
    """

    token: int
    text: str
    logprob: float
    model_logprob: float | None
    top: tuple[TokenAlternative, ...] = ()
    allowed: int | None = None
    forced: bool = False
    overridden: bool = False
    bytes: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "text": self.text,
            "logprob": self.logprob,
            "model_logprob": self.model_logprob,
            "top": [a.to_dict() for a in self.top],
            "allowed": self.allowed,
            "forced": self.forced,
            "overridden": self.overridden,
            "bytes": list(self.bytes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenLogprob:
        model = data.get("model_logprob")
        allowed = data.get("allowed")
        return cls(
            int(data["token"]),
            str(data["text"]),
            float(data["logprob"]),
            None if model is None else float(model),
            tuple(TokenAlternative.from_dict(a) for a in data.get("top", ())),
            None if allowed is None else int(allowed),
            bool(data.get("forced", False)),
            bool(data.get("overridden", False)),
            tuple(int(b) for b in data.get("bytes", ())),
        )


def inspection_summary(tokens: list[TokenLogprob]) -> str:
    """One line about a recorded reply: where the constraint overrode the model, and how
    many tokens it forced."""
    overridden = sum(t.overridden for t in tokens)
    forced = sum(t.forced for t in tokens)
    return (
        f"the constraint overrode the model at {overridden} of {len(tokens)} tokens; "
        f"{forced} forced"
    )


@dataclass
class GenerationStats:
    """Figures for one reply. Later features add fields; keep defaults so old records load."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    ttft_s: float = 0.0
    prefill_tps: float = 0.0
    decode_tps: float = 0.0
    total_s: float = 0.0
    stop_reason: str = StopReason.EOS.value
    # constrained decoding
    constrained: bool = False
    grammar_compile_ms: float = 0.0
    mask_mean_ms: float = 0.0
    mask_p99_ms: float = 0.0
    mask_overhead_ms: float = 0.0
    forced_tokens: int = 0
    forward_passes: int = 0
    # closing within the budget (engine.constraints.closing): whether the reply ended on
    # the closing policy's tokens, why ("budget" or "repetition"), how many it added, how
    # often the ending was computed, and whether loops inside a value were closed
    closed_to_fit: bool = False
    close_reason: str = ""
    closing_tokens: int = 0
    closing_checks: int = 0
    # the time spent checking the finished reply against the user's schema as written
    as_written_ms: float = 0.0
    close_loops: bool = False
    # speculative decoding (engine.speculative): whether the reply drafted, draft tokens
    # fed to the model, how many it kept, and the share kept
    speculative: bool = False
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_rate: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationStats:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class ToolCall:
    """A parsed tool call from a reply; `arguments` is already-parsed JSON."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class AsWrittenCheck:
    """Whether a finished reply validates against the schema the user wrote (formats
    checked), and if not, the first failing keyword, the JSON pointer inside the reply
    where it failed, and the validator's message."""

    valid: bool
    keyword: str = ""
    path: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.valid:
            return {"valid": True}
        return {"valid": False, "keyword": self.keyword, "path": self.path, "message": self.message}


@dataclass
class ChatResult:
    """The finished reply: its text, why it stopped, and its figures."""

    text: str
    stop_reason: StopReason
    stats: GenerationStats
    incomplete: bool = False
    error: str | None = None
    # "input" when the request was at fault (settings, grammar, a conversation the template
    # cannot render), "unavailable" when no model is loaded, "internal" for anything else.
    error_kind: str | None = None
    # A machine-readable reason where a front end can offer a way out, e.g.
    # "context_length_exceeded" (stats.prompt_tokens then holds the prompt's length).
    error_code: str | None = None
    constraint_name: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    # with tools: what became of the request's own constraint, and what the tools' checks
    # found (tool schemas llguidance cannot fully enforce, a paused grammar)
    constraint_use: ConstraintUse | None = None
    warnings: list[str] = field(default_factory=list)
    # what the tight defaults did to the reply's JSON schema ("declared keys only", ...)
    tight: list[str] = field(default_factory=list)
    # The exact token ids sent and fed (prompt + every token given to the model), for
    # measuring cache reuse on the tokens actually sent; not part of the JSON form.
    token_ids: list[int] = field(default_factory=list, repr=False)
    prompt_length: int = 0
    # each reply token's log-probabilities, when the request asked (ChatRequest.logprobs)
    logprobs: list[TokenLogprob] | None = None
    # the reply checked against the schema (or tools' schemas) as the user wrote them, when
    # it had one (engine.constraints.as_written); None for free text, grammars and regexes
    as_written: AsWrittenCheck | None = None

    @property
    def valid_as_written(self) -> bool | None:
        """True or False when the reply was checked against the user's schema, else None."""
        return None if self.as_written is None else self.as_written.valid

    @property
    def closed_to_fit(self) -> bool:
        """The reply was ended early, validly, by the closing policy."""
        return self.stats.closed_to_fit

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "stop_reason": self.stop_reason.value,
            "incomplete": self.incomplete,
            "closed_to_fit": self.closed_to_fit,
            "tight": list(self.tight),
            "error": self.error,
            "error_code": self.error_code,
            "constraint": self.constraint_name,
            "constraint_use": self.constraint_use,
            "warnings": list(self.warnings),
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "valid_as_written": self.valid_as_written,
            **(
                {"invalid_as_written": self.as_written.to_dict()}
                if self.as_written is not None and not self.as_written.valid
                else {}
            ),
            "stats": self.stats.to_dict(),
            **(
                {"logprobs": [t.to_dict() for t in self.logprobs]}
                if self.logprobs is not None
                else {}
            ),
        }


@dataclass(frozen=True)
class TextDelta:
    """A piece of reply text, streamed as soon as it decodes to whole characters."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call as it streams. The first piece of call `index` carries its id
    and name; later ones carry fragments of its arguments, whose concatenation is the
    arguments' JSON text. Under tools, TextDelta carries only the text outside the calls."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class TokenLogprobs:
    """Recorded tokens of the reply, in order, as soon as their figures are read back
    (only for requests that ask: ChatRequest.logprobs)."""

    tokens: tuple[TokenLogprob, ...]


@dataclass(frozen=True)
class PrefillProgress:
    """Prompt processing progress, so a UI can show it during long prompts."""

    done: int
    total: int


@dataclass(frozen=True)
class Finished:
    """The last event of every request, cancelled and failed ones included."""

    result: ChatResult


ChatEvent = TextDelta | ToolCallDelta | TokenLogprobs | PrefillProgress | Finished


@dataclass(frozen=True)
class LoadProgress:
    """Model loading or import progress: a stage name and a fraction in [0, 1]."""

    stage: str
    fraction: float


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is, for display."""

    name: str
    path: str
    weights_bytes: int
    context_length: int | None
    has_chat_template: bool


@dataclass(frozen=True)
class MemoryPlan:
    """Where a loaded model's memory goes. `warning` is a sentence the GUI can show as is."""

    metal: bool
    device_budget_bytes: int  # what the device may use: Metal working set, or machine memory
    model_bytes: int
    kv_budget_bytes: int  # for the prompt-cache trie
    wired_limit_bytes: int | None  # None off Metal: nothing to wire
    fits: bool
    warning: str | None = None


@dataclass(frozen=True)
class CacheStats:
    """The prompt cache's figures: what it holds, and counters since it was last cleared."""

    entries: int = 0
    bytes: int = 0
    budget_bytes: int = 0
    stored_tokens: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    shrinks: int = 0
    rejected: int = 0
    reused_in_place: int = 0
    copies: int = 0
    cached_tokens_total: int = 0
    prompt_tokens_total: int = 0
    hit_rate: float = 0.0  # cached prompt tokens over all prompt tokens
    reserved_bytes: int = 0  # KV state of the replies decoding, counted against the budget

    def to_dict(self) -> dict[str, int | float]:
        return asdict(self)


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine's state as its thread last published it, for any thread to read.

    The engine thread replaces the snapshot (never changes it) after each load, unload,
    budget change and request, so a reader never sees a structure being mutated.
    """

    model: ModelInfo | None = None
    memory: MemoryPlan | None = None
    cache: CacheStats = field(default_factory=CacheStats)
    requests_done: int = 0
