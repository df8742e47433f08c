"""How the next token is picked (SamplingSettings), and the allowed range of every setting,
checked where a request enters the engine.

Settings come from the app, the command line, the server and saved conversations; NaN,
negative values, `seed: -1` or a string where a number belongs would otherwise reach the
sampler (or fail inside MLX with a bare TypeError). `check_sampling` names the field, the
range it allows, and the value it got.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_TEMPERATURE = 100.0
MAX_REPETITION_PENALTY = 100.0
MAX_REPETITION_CONTEXT = 1 << 20
MAX_TOP_K = 1 << 31
MAX_SEED = 2**64 - 1
MAX_MAX_TOKENS = 1 << 24
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 1000


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (
            value < high if high_open else value <= high
        )
    if not ok:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(
            f"{name} must be a number in {left}{low:g}, {high:g}{right}, got {_shown(value)}"
        )


def _whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(
            f"{name} must be a whole number from {low:,} to {high:,}, got {_shown(value)}"
        )


def check_sampling(settings: SamplingSettings) -> None:
    """Raise ValueError naming the first setting that is out of its range."""
    _number("temperature", settings.temperature, 0.0, MAX_TEMPERATURE)
    _number("top_p", settings.top_p, 0.0, 1.0, low_open=True)
    _whole("top_k", settings.top_k, 0, MAX_TOP_K)
    _number("min_p", settings.min_p, 0.0, 1.0, high_open=True)
    _number(
        "repetition_penalty",
        settings.repetition_penalty,
        0.0,
        MAX_REPETITION_PENALTY,
        low_open=True,
    )
    _whole("repetition_context", settings.repetition_context, 1, MAX_REPETITION_CONTEXT)
    if settings.seed is not None:
        _whole("seed", settings.seed, 0, MAX_SEED)
    _whole("max_tokens", settings.max_tokens, 1, MAX_MAX_TOKENS)
    if settings.think is not None and not isinstance(settings.think, bool):
        raise ValueError(f"think must be true, false or null, got {_shown(settings.think)}")
    if settings.max_thinking_tokens is not None:
        _whole("max_thinking_tokens", settings.max_thinking_tokens, 0, MAX_MAX_TOKENS)
    stop = settings.stop
    if not isinstance(stop, list) or len(stop) > MAX_STOP_STRINGS:
        raise ValueError(f"stop must be a list of at most {MAX_STOP_STRINGS} strings")
    for index, text in enumerate(stop):
        if not isinstance(text, str) or not 1 <= len(text) <= MAX_STOP_CHARS:
            raise ValueError(
                f"stop[{index}] must be a string of 1 to {MAX_STOP_CHARS:,} characters, "
                f"got {_shown(text)}"
            )


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
    # Models that think first (ModelInfo.reasoning): think or not (None: the model's own
    # default), and at most this many thinking tokens before the answer is forced to begin.
    think: bool | None = None
    max_thinking_tokens: int | None = None

    def validate(self) -> None:
        """Raise ValueError naming the first setting that is out of range (and the range)."""
        check_sampling(self)
