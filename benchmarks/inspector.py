"""The cost of the token inspector (the `inspector` bench section), measured in one run.

Decode tokens/s of the same greedy reply with each token's log-probabilities recorded
(top-20 alternatives, `ChatRequest.logprobs = 20`) and without, runs alternating; ratios
are medians of each round's ratio (recorded over plain), with their spread (`_spread`):

- `inspector_tps_ratio`: a free reply (the `decode` section's story prompt);
- `inspector_constrained_tps_ratio`: a reply under the `constraints` section's record
  schema, where recording also feeds forced tokens' positions through the top-k.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.bench import BENCH_PROMPT
from benchmarks.constraints import RECORD_PROMPT, RECORD_SCHEMA
from benchmarks.rounds import paired_figures
from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings

TOP = 20


def _tps(
    engine: Engine, prompt: str, tokens: int, record: bool, spec: ConstraintSpec | None
) -> float:
    request = ChatRequest(
        [{"role": "user", "content": prompt}],
        SamplingSettings(temperature=0.0, max_tokens=tokens),
        constraint=spec,
        logprobs=TOP if record else None,
    )
    result = engine.chat(request)
    if result.error:
        raise RuntimeError(result.error)
    if record and (
        result.logprobs is None or len(result.logprobs) != result.stats.generated_tokens
    ):
        raise RuntimeError("the recorded reply lacks some tokens' figures")
    return result.stats.decode_tps


def run_inspector_bench(engine: Engine, args: Any) -> dict[str, Any]:
    """Recorded over plain decode tokens/s, free and constrained, `args.repeats` rounds."""
    spec = json_schema_constraint(RECORD_SCHEMA, "record")
    cases = {"": (BENCH_PROMPT, None), "constrained_": (RECORD_PROMPT, spec)}
    figures: dict[str, Any] = {}
    for name, (prompt, constraint) in cases.items():
        _tps(engine, prompt, 8, True, constraint)  # warm-up: kernels, the grammar
        plain: list[float] = []
        recorded: list[float] = []
        for i in range(args.repeats):
            order = (False, True) if i % 2 == 0 else (True, False)
            for record in order:
                tps = _tps(engine, prompt, args.tokens, record, constraint)
                (recorded if record else plain).append(tps)
        figures.update(
            paired_figures(f"inspector_{name}tps_ratio", zip(recorded, plain, strict=True))
        )
        figures[f"inspector_{name}plain_tps"] = round(statistics.median(plain), 2)
        figures[f"inspector_{name}recorded_tps"] = round(statistics.median(recorded), 2)
    figures["inspector_top_logprobs"] = TOP
    figures["inspector_runs"] = args.repeats
    return figures
