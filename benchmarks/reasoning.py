"""Figures for models that think first (the `reasoning` bench section), on the tiny
Qwen3-like fixture (benchmarks/tiny_thinking_model.py), measured in one run:

- `reasoning_constrained_valid_rate`: the share of constrained replies, over a fixed set of
  SCHEMAS × BUDGETS, that thought (opened a thinking block) and then answered with JSON
  that validates against the schema (checked with `jsonschema`); goal 1.0;
- `thinking_budget_overrun_tokens`: the most thinking tokens any of those replies spent
  beyond its budget (replies without a budget left out); goal 0;
- `reasoning_constrained_tps_ratio`: decode tokens/s of the answer after thinking under a
  JSON schema over the same without one, same prompt, budget and length, rounds
  alternating which goes first; the median of each round's ratio; goal >= 0.95. An
  answer's tokens/s is its tokens over the time from the end of thinking to the last
  token: (generated - 1) / decode_tps (the whole decode span) less thinking_s. The tiny
  model answers a few hundred tokens a second, so a side of a round is the same request
  repeated until its answers took `--min-side-s` (`benchmarks/rounds.py`), and the
  schema's one string has a minimum length the answer cannot reach: the constrained
  answer runs as long as the free one (a reply that closed early would time a few tokens,
  half of them forced). `_can_tell` / `_cannot_tell` say whether the spread can tell.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
from dataclasses import dataclass
from typing import Any

from benchmarks.rounds import (
    PairedRounds,
    Timed,
    alternate,
    is_quick,
    min_side_s,
    rounds_for,
    run_for,
)
from engine.engine import Engine
from engine.types import ChatRequest, ChatResult, ConstraintSpec, SamplingSettings

PROMPT = "Think it over, then answer in JSON."
# Thinking budgets each schema is run with (None: no budget of its own; the engine ends
# thinking where the answer still fits max_tokens).
BUDGETS: tuple[int | None, ...] = (0, 8, 32, None)
VALID_MAX_TOKENS = 96
SCHEMAS: dict[str, dict[str, Any]] = {
    "pair": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 12}},
        "required": ["a", "b"],
    },
    "colour": {"type": "string", "enum": ["red", "green", "blue"]},
    "numbers": {"type": "array", "items": {"type": "integer"}, "maxItems": 5},
    "verdict": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "ok": {"type": "boolean"},
            "score": {"type": "number"},
        },
        "required": ["name", "ok", "score"],
    },
    "maybe": {
        "type": "object",
        "properties": {"value": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        "required": ["value"],
    },
    "items": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "tag": {"enum": ["x", "y"]}},
                    "required": ["id", "tag"],
                },
                "maxItems": 3,
            }
        },
        "required": ["items"],
    },
}
# the answer of the speed comparison: one string too long to end within the answer's
# tokens, so the constrained answer runs as long as a free answer
SPEED_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 4000}},
    "required": ["answer"],
}
SPEED_BUDGET = 16
# answer tokens of a speed run in a full bench run (a longer answer times the loop, not
# its start); `--quick` and the tests take what they are given
SPEED_TOKENS = 192


@dataclass(frozen=True)
class ValidityRun:
    """One constrained reply of the validity sweep."""

    schema: str
    budget: int | None
    seed: int
    text: str
    thought: bool  # the reply opened a thinking block
    thinking_tokens: int
    error: str | None


def request_for(
    schema: dict[str, Any] | None,
    budget: int | None,
    max_tokens: int,
    seed: int,
    *,
    close_loops: bool = True,
) -> ChatRequest:
    """The bench's request: thinking on, `budget` thinking tokens, `schema` (or free)."""
    settings = SamplingSettings(
        temperature=0.8, seed=seed, max_tokens=max_tokens, think=True, max_thinking_tokens=budget
    )
    spec = None if schema is None else ConstraintSpec("json_schema", json.dumps(schema))
    return ChatRequest(
        [{"role": "user", "content": PROMPT}], settings, constraint=spec, close_loops=close_loops
    )


def is_valid(text: str, schema: dict[str, Any]) -> bool:
    """Whether `text` is JSON that validates against `schema`."""
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def validity_runs(engine: Engine) -> list[ValidityRun]:
    """Every schema under every budget, one seeded reply each."""
    runs = []
    for index, (name, schema) in enumerate(SCHEMAS.items()):
        for budget in BUDGETS:
            seed = 100 + index
            result = engine.chat(request_for(schema, budget, VALID_MAX_TOKENS, seed))
            runs.append(
                ValidityRun(
                    name,
                    budget,
                    seed,
                    result.text,
                    result.reasoning is not None,
                    result.stats.thinking_tokens,
                    result.error,
                )
            )
    return runs


def answer_timed(result: ChatResult) -> Timed:
    """The answer's tokens over the time from the end of thinking to the last token."""
    stats = result.stats
    if result.error:
        raise RuntimeError(result.error)
    if stats.decode_tps <= 0 or stats.answer_tokens < 2:
        raise RuntimeError("the answer is too short to time")
    answer_s = (stats.generated_tokens - 1) / stats.decode_tps - stats.thinking_s
    if answer_s <= 0:
        raise RuntimeError("the answer took no time after thinking")
    return Timed(stats.answer_tokens, answer_s)


def answer_tps(result: ChatResult) -> float:
    """Decode tokens/s of the answer after the thinking block (see the module's note)."""
    return answer_timed(result).rate


def speed_rounds(engine: Engine, tokens: int, rounds: int, min_s: float = 0.0) -> PairedRounds:
    """Constrained (A) and free (B) answers of `rounds` alternating rounds, each side's
    request repeated until its answers took `min_s` seconds."""
    max_tokens = SPEED_BUDGET + 2 + tokens  # the thinking block, then `tokens` of answer
    for schema in (SPEED_SCHEMA, None):  # warm-up: kernels, the grammar
        engine.chat(request_for(schema, SPEED_BUDGET, SPEED_BUDGET + 8, 0))

    def side(schema: dict[str, Any] | None, seed: int) -> Timed:
        # loops left open: the random model's answer string runs as long as a free one
        request = request_for(schema, SPEED_BUDGET, max_tokens, seed, close_loops=False)
        return answer_timed(engine.chat(request))

    out = PairedRounds()
    for r in range(rounds):  # round r's seed for both its sides
        for constrained in alternate(r):
            schema = SPEED_SCHEMA if constrained else None
            timed = run_for(functools.partial(side, schema, r), min_s)
            (out.a if constrained else out.b).append(timed)
    return out


def reasoning_figures(
    engine: Engine,
    tokens: int,
    rounds: int,
    runs: list[ValidityRun] | None = None,
    min_s: float = 0.0,
) -> dict[str, Any]:
    """The section's figures on `engine` (loaded with a model that thinks); `runs`: the
    validity sweep's replies if already made on it (else made now); `min_s`: each speed
    side's least time a round."""
    runs = validity_runs(engine) if runs is None else runs
    valid = [
        r for r in runs if r.error is None and r.thought and is_valid(r.text, SCHEMAS[r.schema])
    ]
    overruns = [r.thinking_tokens - r.budget for r in runs if r.budget is not None]
    speed = speed_rounds(engine, tokens, rounds, min_s)
    side_s = speed.side_s
    return {
        "reasoning_constrained_valid_rate": round(len(valid) / len(runs), 3),
        "reasoning_constrained_runs": len(runs),
        "thinking_budget_overrun_tokens": max(overruns),
        **speed.figures("reasoning_constrained_tps_ratio"),
        "reasoning_constrained_answer_tps": round(statistics.median(speed.rates("a")), 2),
        "reasoning_free_answer_tps": round(statistics.median(speed.rates("b")), 2),
        "reasoning_tps_rounds": rounds,
        "reasoning_answer_tokens": tokens,
        "reasoning_side_s": round(side_s, 2) if side_s is not None else None,
    }


def run_reasoning_bench(engine: Engine | None, args: argparse.Namespace) -> dict[str, Any]:
    """Build the tiny thinking fixture and measure on an engine of its own (the run's
    engine holds `--model`, which need not think)."""
    from benchmarks.tiny_thinking_model import build_tiny_thinking_model
    from engine.library.load import ensure_default_model

    with tempfile.TemporaryDirectory() as folder:
        build_tiny_thinking_model(folder, ensure_default_model())
        eng = Engine(speculative=False)
        try:
            eng.load_model(folder).result()
            # 7 rounds of sides run at least --min-side-s: the tiny model's answers take
            # a fraction of a second, cheap to repeat
            tokens = args.tokens if is_quick(args) else max(args.tokens, SPEED_TOKENS)
            return reasoning_figures(eng, tokens, rounds_for(args, 7), min_s=min_side_s(args))
        finally:
            eng.close()
