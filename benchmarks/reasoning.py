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
  token: (generated - 1) / decode_tps (the whole decode span) less thinking_s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import dataclass
from typing import Any

from benchmarks.rounds import paired_figures
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
# the answer of the speed comparison: a long string, so it runs as long as a free answer
SPEED_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
SPEED_BUDGET = 16


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


def answer_tps(result: ChatResult) -> float:
    """Decode tokens/s of the answer after the thinking block (see the module's note)."""
    stats = result.stats
    if result.error:
        raise RuntimeError(result.error)
    if stats.decode_tps <= 0 or stats.answer_tokens < 2:
        raise RuntimeError("the answer is too short to time")
    answer_s = (stats.generated_tokens - 1) / stats.decode_tps - stats.thinking_s
    if answer_s <= 0:
        raise RuntimeError("the answer took no time after thinking")
    return stats.answer_tokens / answer_s


def speed_rounds(engine: Engine, tokens: int, rounds: int) -> tuple[list[float], list[float]]:
    """(constrained, free) answer tokens/s of `rounds` alternating rounds."""
    max_tokens = SPEED_BUDGET + 2 + tokens  # the thinking block, then `tokens` of answer
    for schema in (SPEED_SCHEMA, None):  # warm-up: kernels, the grammar
        engine.chat(request_for(schema, SPEED_BUDGET, SPEED_BUDGET + 8, 0))
    constrained: list[float] = []
    free: list[float] = []
    for i in range(rounds):
        order = (SPEED_SCHEMA, None) if i % 2 == 0 else (None, SPEED_SCHEMA)
        for schema in order:
            # loops left open: the random model's answer string runs as long as a free one
            request = request_for(schema, SPEED_BUDGET, max_tokens, i, close_loops=False)
            tps = answer_tps(engine.chat(request))
            (free if schema is None else constrained).append(tps)
    return constrained, free


def reasoning_figures(
    engine: Engine, tokens: int, rounds: int, runs: list[ValidityRun] | None = None
) -> dict[str, Any]:
    """The section's figures on `engine` (loaded with a model that thinks); `runs`: the
    validity sweep's replies if already made on it (else made now)."""
    runs = validity_runs(engine) if runs is None else runs
    valid = [
        r for r in runs if r.error is None and r.thought and is_valid(r.text, SCHEMAS[r.schema])
    ]
    overruns = [r.thinking_tokens - r.budget for r in runs if r.budget is not None]
    constrained, free = speed_rounds(engine, tokens, rounds)
    ratio = paired_figures("reasoning_constrained_tps_ratio", zip(constrained, free, strict=True))
    return {
        "reasoning_constrained_valid_rate": round(len(valid) / len(runs), 3),
        "reasoning_constrained_runs": len(runs),
        "thinking_budget_overrun_tokens": max(overruns),
        **ratio,
        "reasoning_constrained_answer_tps": round(statistics.median(constrained), 2),
        "reasoning_free_answer_tps": round(statistics.median(free), 2),
        "reasoning_tps_rounds": rounds,
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
            # at least 5 rounds: one slow step on a busy machine moves a median of 3
            return reasoning_figures(eng, args.tokens, max(args.repeats, 5))
        finally:
            eng.close()
