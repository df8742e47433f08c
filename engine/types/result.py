"""What the engine hands back for a reply: its text, why it stopped, its figures and the
log-probabilities of its tokens when asked.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

from engine.types.request import ConstraintUse

# Whose fault a failed request was (ChatResult.error_kind).
ErrorKind = Literal["input", "unavailable", "internal"]


class StopReason(StrEnum):
    """Why the decode loop stopped a reply (the mechanism; `Ending` says what it means)."""

    EOS = "eos"
    LENGTH = "length"
    STOP_STRING = "stop"
    CANCELLED = "cancelled"
    ERROR = "error"


class Ending(StrEnum):
    """How a reply ended, in the one word every surface maps to its own: `finished` (the
    model ended it: an end token or a stop string, its grammar complete), `filled`
    (Corral's closing policy ended it validly to fit, on the token budget or because it
    repeated itself: `ChatResult.filled_paths` names the values Corral wrote), `cut`
    (stopped by the token budget or the context with no valid close, or ended before its
    grammar was complete), `cancelled`, `failed` (no reply: `ChatResult.error` says why)."""

    FINISHED = "finished"
    FILLED = "filled"
    CUT = "cut"
    CANCELLED = "cancelled"
    FAILED = "failed"


def decide_ending(stop_reason: StopReason, *, closed_to_fit: bool, incomplete: bool) -> Ending:
    """The one place a reply's Ending is decided, from the decode loop's stop reason and
    what the closing policy did (`closed_to_fit`) or left undone (`incomplete`: a
    constrained reply whose grammar was not complete when it stopped)."""
    if stop_reason == StopReason.ERROR:
        return Ending.FAILED
    if stop_reason == StopReason.CANCELLED:
        return Ending.CANCELLED
    if closed_to_fit:
        return Ending.FILLED
    if stop_reason == StopReason.LENGTH or incomplete:
        return Ending.CUT
    return Ending.FINISHED


# The exit status of `python -m engine chat` for each ending (2 is a bad command line).
EXIT_STATUS = {
    Ending.FINISHED: 0,
    Ending.FAILED: 1,
    Ending.FILLED: 3,
    Ending.CUT: 3,
    Ending.CANCELLED: 130,
}


def ending_note(
    ending: str, *, close_reason: str = "", budget: int = 0, filled: list[str] | None = None
) -> str:
    """How a reply ended, in words for a reader (the app's reply tag, the CLI): what
    Corral did to a `filled` reply and which values it wrote, why a `cut` one is not
    complete; "" for the others (`finished` needs no note; cancelled and failed replies
    have their own)."""
    limit = f"at {budget:,} tokens" if budget else "at its token limit"
    if ending == Ending.FILLED:
        if close_reason == "repetition":
            note = "Corral finished this reply: the model was repeating itself"
        else:
            note = f"Corral finished this reply to fit: the model was cut off {limit}"
        names = [f"`{n}`" for n in filled_names(list(filled or []))]
        if names:
            listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            note += f"; {listed} {'was' if len(names) == 1 else 'were'} filled in"
        return note
    if ending == Ending.CUT:
        return f"The reply was cut off {limit} before it was complete"
    return ""


def filled_names(paths: list[str]) -> list[str]:
    """The filled values' JSON pointers as a reader names them: `/date` → `date`,
    `/items/0/amount` → `items[0].amount`, a tool call's `/tool_calls/1/arguments/city`
    → `city` (calls are named apart), the whole reply (`""`) → `the whole reply`."""
    names = []
    for path in paths:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        if len(parts) >= 3 and parts[0] == "tool_calls" and parts[2] == "arguments":
            parts = parts[3:]
            if not parts:
                names.append("the call's arguments")
                continue
        elif len(parts) == 2 and parts[0] == "tool_calls":
            names.append("a whole tool call")
            continue
        if not parts:
            names.append("the whole reply")
            continue
        name = parts[0]
        for part in parts[1:]:
            name += f"[{part}]" if part.isdigit() else f".{part}"
        names.append(name)
    return list(dict.fromkeys(names))


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
    # Corral's closing policy wrote this token, not the model (an ending to fit)
    closing: bool = False

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
            **({"closing": True} if self.closing else {}),
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
            bool(data.get("closing", False)),
        )


def logprobs_summary(tokens: list[TokenLogprob]) -> str:
    """One line about a recorded reply: where the constraint overrode the model, how many
    tokens it forced, and how many Corral wrote to close the reply."""
    overridden = sum(t.overridden for t in tokens)
    forced = sum(t.forced and not t.closing for t in tokens)
    closing = sum(t.closing for t in tokens)
    return (
        f"the constraint overrode the model at {overridden} of {len(tokens)} tokens; "
        f"{forced} forced" + (f"; {closing} written by Corral to close it" if closing else "")
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
    # the reply's token budget: max_tokens, or what the context left when less
    budget_tokens: int = 0
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
    # steering toward the end (engine.constraints.finishing): tokens the model picked
    # under a mask narrowed to wrap up or move on, and loops inside a value moved out of
    steered_tokens: int = 0
    loops_moved_on: int = 0
    # speculative decoding (engine.runtime.speculative): whether the reply drafted, draft tokens
    # fed to the model, how many it kept, and the share kept
    speculative: bool = False
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_rate: float = 0.0
    # thinking (models that reason first): tokens of the thinking block (tags included),
    # of the answer after it, whether the budget forced its end, and how long it took
    thinking_tokens: int = 0
    answer_tokens: int = 0
    thinking_forced_end: bool = False
    thinking_s: float = 0.0

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
    # Why no reply was produced: the message alone, and the exception's class name where
    # an exception said it ("ConstraintError"); `error_line` joins them for a log or a CLI.
    error: str | None = None
    error_type: str | None = None
    # "input" when the request was at fault (settings, grammar, a conversation the template
    # cannot render), "unavailable" when no model is loaded, "internal" for anything else.
    error_kind: ErrorKind | None = None
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
    # measuring cache reuse on the tokens actually sent; not part of the JSON form. The
    # first stats.prompt_tokens of them are the prompt.
    token_ids: list[int] = field(default_factory=list, repr=False)
    # Every token of the reply as it was written (sampled or forced, thinking included, the
    # end token not), fed or not: what a client's next turn renders back (the families
    # bench and tests compare the two); not part of the JSON form.
    reply_token_ids: list[int] = field(default_factory=list, repr=False)
    # each reply token's log-probabilities, when the request asked (ChatRequest.logprobs)
    logprobs: list[TokenLogprob] | None = None
    # the reply checked against the schema (or tools' schemas) as the user wrote them, when
    # it had one (engine.constraints.as_written); None for free text, grammars and regexes
    as_written: AsWrittenCheck | None = None
    # what the model thought before it answered (its reasoning block, tags removed); None
    # when it did not think. Never part of `text`, never fed back into later prompts.
    reasoning: str | None = None
    # JSON pointers of the values Corral's closing policy wrote rather than the model (a
    # value the model began and Corral finished counts), into the reply's JSON or into a
    # tool call's arguments (`/tool_calls/0/arguments/city`); empty unless `filled`
    filled_paths: list[str] = field(default_factory=list)
    # for a prompt refused as too long (error_code "context_length_exceeded"): the most
    # prompt tokens that would leave the reply room
    max_prompt_tokens: int | None = None

    @property
    def ending(self) -> Ending:
        """How the reply ended (see Ending): what every surface reports."""
        return decide_ending(
            self.stop_reason, closed_to_fit=self.stats.closed_to_fit, incomplete=self.incomplete
        )

    @property
    def valid_as_written(self) -> bool | None:
        """True or False when the reply was checked against the user's schema, else None."""
        return None if self.as_written is None else self.as_written.valid

    @classmethod
    def failed(
        cls,
        message: str,
        *,
        kind: ErrorKind,
        error_type: str | None = None,
        code: str | None = None,
        started: float | None = None,
    ) -> ChatResult:
        """The result of a request that produced no reply: `message` says why, `kind` whose
        fault it was, `code` a reason a front end can act on; `started` (a perf_counter
        reading) when the request began, for its total time."""
        stats = GenerationStats(stop_reason=StopReason.ERROR.value)
        if started is not None:
            stats.total_s = time.perf_counter() - started
        return cls(
            "",
            StopReason.ERROR,
            stats,
            error=message,
            error_type=error_type,
            error_kind=kind,
            error_code=code,
        )

    @property
    def error_line(self) -> str | None:
        """The error as one line, its type first where known ("ValueError: ..."), for the
        CLI, logs and the stored message; None when the reply did not fail."""
        if self.error is None or self.error_type is None or self.error == self.error_type:
            return self.error
        return f"{self.error_type}: {self.error}"

    @property
    def closed_to_fit(self) -> bool:
        """The reply was ended early, validly, by the closing policy."""
        return self.stats.closed_to_fit

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            **({"reasoning": self.reasoning} if self.reasoning is not None else {}),
            "ending": self.ending.value,
            "filled_paths": list(self.filled_paths),
            "stop_reason": self.stop_reason.value,
            "incomplete": self.incomplete,
            "closed_to_fit": self.closed_to_fit,
            "tight": list(self.tight),
            "error": self.error_line,
            "error_type": self.error_type,
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
