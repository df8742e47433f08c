"""What a request streams while it runs, and what loading a model reports, in order."""

from __future__ import annotations

from dataclasses import dataclass

from engine.types.result import ChatResult, TokenLogprob


@dataclass(frozen=True)
class TextDelta:
    """A piece of reply text, streamed as soon as it decodes to whole characters."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's thinking (its reasoning block), streamed apart from the
    reply's text, which TextDelta carries."""

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


ChatEvent = TextDelta | ReasoningDelta | ToolCallDelta | TokenLogprobs | PrefillProgress | Finished


@dataclass(frozen=True)
class LoadProgress:
    """Model loading or import progress: a stage name and a fraction in [0, 1]."""

    stage: str
    fraction: float
