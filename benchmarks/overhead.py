"""What a decode step costs beyond its forward pass, Corral's loop beside mlx-lm's (the
`overhead` bench section).

In each round, on the loaded model and the same greedy settings: the barest loop's step
(the forward pass: build it, argmax, `mx.eval`, nothing else) for 1 and 4 rows, Corral's
step (`DecodeBatch.step` of real requests through the engine: scheduler, replies, events)
free and under a JSON schema, alone and at 4 rows, and mlx-lm's step (`generate_step`
alone, `BatchGenerator` at 4 rows). A loop's overhead in a round is its median step minus
that round's forward pass; figures are medians over the rounds, with their spread
(`_spread`: highest minus lowest round). Corral's steps count only while every row decodes;
speculation is off (as in every section but `speculative`). A negative overhead means the
loop hides work behind the forward pass (mlx-lm builds the next pass while one computes).
Each overhead says whether its spread can tell (`<key>_can_tell`, else `<key>_cannot_tell`
with why): a spread within 5% of that width's forward pass (an overhead read to within a
twentieth of a step); rounds are whole runs of `--tokens` (at most 48) steps, seconds on a
real model.
"""

from __future__ import annotations

import importlib
import statistics
import time
from typing import Any

from benchmarks.rounds import SPREAD_TOLERANCE, rounds_for, verdict
from benchmarks.step_profile import Profiler, bare_forward_ms
from engine.engine import Engine
from engine.prompt.chat import encode_chat
from engine.runtime.sampling import end_token_ids
from engine.types import ChatRequest


def _corral_step_ms(engine: Engine, requests: list[ChatRequest]) -> float:
    profiler = Profiler()
    with profiler.active():
        results = [h.result() for h in engine.submit_many(requests)]
    for result in results:
        if result.error:
            raise RuntimeError(result.error)
    full = [s.wall for s in profiler.steps if s.rows == len(requests)]
    # past the first steps (shapes settle); a short run (a closed reply) keeps them all
    steady = full[2:] if len(full) > 4 else full or [s.wall for s in profiler.steps]
    return statistics.median(steady) * 1e3


def _mlx_lm_step_ms(loaded: Any, requests: list[ChatRequest], tokens: int) -> float:
    """mlx-lm's median step (engine thread): between two tokens of `generate_step` alone,
    between two `next_generated` calls of `BatchGenerator` for several rows."""
    import mlx.core as mx

    generate = importlib.import_module("mlx_lm.generate")
    from mlx_lm.sample_utils import make_sampler

    prompts = [encode_chat(loaded.tokenizer, r.messages) for r in requests]
    stamps: list[float] = []
    if len(prompts) == 1:
        steps = generate.generate_step(
            mx.array(prompts[0]), loaded.model, max_tokens=tokens, sampler=make_sampler(temp=0.0)
        )
        for _ in steps:
            stamps.append(time.perf_counter())
    else:
        ends = sorted(end_token_ids(loaded.tokenizer))
        gen = generate.BatchGenerator(
            loaded.model, max_tokens=tokens, stop_tokens=[[t] for t in ends]
        )
        try:
            gen.insert(prompts, max_tokens=[tokens] * len(prompts))
            while responses := gen.next_generated():
                if len(responses) == len(prompts) and all(
                    r.finish_reason is None for r in responses
                ):
                    stamps.append(time.perf_counter())
        finally:
            gen.close()
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    if not gaps:
        raise RuntimeError("mlx-lm produced fewer than two steps")
    return statistics.median(gaps[2:] if len(gaps) > 4 else gaps) * 1e3


def _forward_ms(engine: Engine, rows: int, steps: int) -> float:
    def run(loaded: Any) -> float:
        return bare_forward_ms(loaded, rows, steps)

    return float(engine.run(run).result())


def _mlx_lm_in_engine(engine: Engine, requests: list[ChatRequest], tokens: int) -> float:
    def run(loaded: Any) -> float:
        return _mlx_lm_step_ms(loaded, requests, tokens)

    return float(engine.run(run).result())


def run_overhead_bench(engine: Engine, args: Any) -> dict[str, Any]:
    """The overhead figures for the model loaded in `engine`."""
    from benchmarks.batch import STORY, STORY_JSON, STORY_SCHEMA, TOPICS, _request
    from engine.constraints.sources import json_schema_constraint

    tokens = min(getattr(args, "tokens", 64), 48)
    repeats = rounds_for(args, 3)
    schema = json_schema_constraint(STORY_SCHEMA, "story")
    free = [_request(STORY.format(t), tokens) for t in TOPICS]
    constrained = [_request(STORY_JSON.format(t), tokens, schema) for t in TOPICS]
    cases = {
        "": free[:1],
        "_4": free,
        "_constrained": constrained[:1],
        "_4_constrained": constrained,
    }
    engine.chat(_request("Warm up.", 4))
    _corral_step_ms(engine, constrained[:2])  # kernels, the grammar, the batch shapes
    per_round: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        per_round.setdefault(key, []).append(value)

    for r in range(repeats):
        forward = {n: _forward_ms(engine, n, tokens) for n in (1, 4)}
        note("forward_ms", forward[1])
        note("forward_4_ms", forward[4])
        for suffix, requests in cases.items():
            width = len(requests)
            runs = ["step_overhead"]
            if "constrained" not in suffix:  # mlx-lm's loop beside it, the order alternating
                runs = ["step_overhead", "mlx_lm_step_overhead"][:: -1 if r % 2 else 1]
            for name in runs:
                if name == "step_overhead":
                    step = _corral_step_ms(engine, requests)
                else:
                    step = _mlx_lm_in_engine(engine, requests, tokens)
                note(f"{name}{suffix}_ms", step - forward[width])
    figures: dict[str, Any] = {}
    widths = {1: "forward_ms", 4: "forward_4_ms"}
    forward_ms = {width: statistics.median(per_round[key]) for width, key in widths.items()}
    for key, values in per_round.items():
        figures[key] = round(statistics.median(values), 3)
        if key.startswith(("step_overhead", "mlx_lm_step_overhead")):
            spread_ms = round(max(values) - min(values), 3)
            figures[key.removesuffix("_ms") + "_spread_ms"] = spread_ms
            step_ms = forward_ms[4 if "_4" in key else 1]
            tolerance = round(SPREAD_TOLERANCE * step_ms, 3)
            figures.update(verdict(key, spread_ms, len(values), tolerance=tolerance, unit="ms"))
    figures["overhead_runs"] = repeats
    figures["overhead_tokens"] = tokens
    return figures
