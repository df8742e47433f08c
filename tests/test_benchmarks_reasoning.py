"""The reasoning bench section on the tiny thinking fixture: every figure it promises,
each recomputed here from the replies themselves."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest
from bench_keys import STABLE_KEYS

from benchmarks import rounds
from benchmarks.reasoning import (
    BUDGETS,
    SCHEMAS,
    VALID_MAX_TOKENS,
    ValidityRun,
    answer_tps,
    reasoning_figures,
    request_for,
    speed_rounds,
    validity_runs,
)
from engine.types import ReasoningDelta, TextDelta


def _validates(text: str, schema: dict) -> bool:
    try:
        jsonschema.Draft202012Validator(schema).validate(json.loads(text))
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False
    return True


@pytest.fixture(scope="module")
def sweep(thinking_engine) -> list[ValidityRun]:
    """The validity sweep's 24 replies, made once for the module's tests."""
    return validity_runs(thinking_engine)


def test_reasoning_section_reports_every_figure(thinking_engine, sweep):
    figures = reasoning_figures(thinking_engine, tokens=24, rounds=1, runs=sweep)
    assert STABLE_KEYS["reasoning"] <= set(figures), sorted(STABLE_KEYS["reasoning"] - set(figures))
    assert figures["reasoning_constrained_runs"] == len(SCHEMAS) * len(BUDGETS) == 24
    assert figures["reasoning_tps_rounds"] == 1
    # the engine holds budgets exactly and answers validly after thinking
    assert figures["reasoning_constrained_valid_rate"] == 1.0
    assert figures["thinking_budget_overrun_tokens"] == 0
    # one round: the ratio is exactly the two answer speeds' quotient (its size depends on
    # the machine and its load: no band), with nothing to spread over
    ratio = figures["reasoning_constrained_tps_ratio"]
    quotient = figures["reasoning_constrained_answer_tps"] / figures["reasoning_free_answer_tps"]
    assert abs(ratio - quotient) < 0.01 * quotient + 0.002
    assert figures["reasoning_constrained_tps_ratio_spread"] == 0
    # which cannot tell anything, and the figures say so
    assert figures["reasoning_constrained_tps_ratio_can_tell"] is False
    assert "one of its rounds only" in figures["reasoning_constrained_tps_ratio_cannot_tell"]
    assert figures["reasoning_answer_tokens"] == 24 and figures["reasoning_side_s"] > 0


def test_both_speed_sides_answer_at_full_length_and_repeat_to_their_time(
    thinking_engine, monkeypatch
):
    """The constrained answer cannot close before the free one ends (its string is longer
    than the answer's tokens allow), so both sides time answers of one length; a side
    shorter than its least time is asked again, and counted as all its runs together."""
    speed = speed_rounds(thinking_engine, 12, rounds=2, min_s=0.0)
    assert len(speed.a) == len(speed.b) == 2
    for constrained, free in zip(speed.a, speed.b, strict=True):
        assert constrained.runs == free.runs == 1
        assert constrained.work == free.work == 12, (constrained, free)
    # a least time no side reaches: each runs as often as a side may (3 here)
    monkeypatch.setattr(rounds, "MAX_RUNS_PER_SIDE", 3)
    again = speed_rounds(thinking_engine, 12, rounds=1, min_s=1e9)
    for side in (*again.a, *again.b):
        assert side.runs == 3 and side.work == 3 * 12, side


def test_the_validity_sweep_recomputed_from_its_replies(thinking_engine, sweep):
    runs = sweep
    assert [(r.schema, r.budget) for r in runs] == [(s, b) for s in SCHEMAS for b in BUDGETS]
    for run in runs:
        assert run.error is None and run.thought, run
        assert _validates(run.text, SCHEMAS[run.schema]), run
        if run.budget is not None:
            # a budget below what max_tokens leaves is spent exactly (forced end)
            assert run.thinking_tokens == run.budget, run
        else:
            assert run.thinking_tokens < VALID_MAX_TOKENS, run
    # the same seeded request gives the same reply: the figures are reproducible
    first = runs[1]
    again = thinking_engine.chat(
        request_for(SCHEMAS[first.schema], first.budget, VALID_MAX_TOKENS, first.seed)
    )
    assert again.text == first.text and again.stats.thinking_tokens == first.thinking_tokens


def test_answer_speed_leaves_the_thinking_out(thinking_engine):
    stamps: list[tuple[type, float]] = []
    handle = thinking_engine.submit(
        request_for(None, 16, 16 + 2 + 24, 5),
        lambda event: stamps.append((type(event), time.perf_counter())),
    )
    result = handle.result()
    stats = result.stats
    assert stats.thinking_tokens == 16 and stats.answer_tokens >= 8
    # the thinking streamed first, then the answer (an order, not a speed)
    thought_end = max(t for kind, t in stamps if kind is ReasoningDelta)
    first_answer = min(t for kind, t in stamps if kind is TextDelta)
    assert thought_end <= first_answer
    tps = answer_tps(result)
    # the answer's span is the decode span less the thinking, which took some of it: its
    # rate is the answer's tokens over that, above what the whole span would say (how
    # large either is depends on the machine and its load, so no band)
    whole_s = (stats.generated_tokens - 1) / stats.decode_tps
    assert 0 < stats.thinking_s < whole_s, (stats.thinking_s, whole_s)
    assert tps == stats.answer_tokens / (whole_s - stats.thinking_s)
    assert stats.answer_tokens / whole_s < tps
