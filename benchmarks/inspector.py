"""The cost of the token inspector (the `inspector` bench section), measured in one run.

Decode tokens/s of the same greedy reply with each token's log-probabilities recorded
(top-20 alternatives, `ChatRequest.logprobs = 20`) and without, runs alternating; ratios
are medians of each round's ratio (recorded over plain), with their spread (`_spread`):

- `inspector_tps_ratio`: a free reply (the `decode` section's story prompt);
- `inspector_constrained_tps_ratio`: a reply under the `constraints` section's record
  schema, where recording also feeds forced tokens' positions through the top-k.

Each side of a round runs at least `--min-side-s` (a reply of the default model takes
seconds: one run) and each ratio says whether its spread can tell (`_can_tell`, else
`_cannot_tell` with why; `benchmarks/rounds.py`).
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.bench import BENCH_PROMPT
from benchmarks.constraints import RECORD_PROMPT, RECORD_SCHEMA
from benchmarks.rounds import Timed, min_side_s, paired_rounds, rounds_for
from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings

TOP = 20


def _decode(
    engine: Engine, prompt: str, tokens: int, record: bool, spec: ConstraintSpec | None
) -> Timed:
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
    stats = result.stats
    return Timed.from_rate(max(0, stats.generated_tokens - 1), stats.decode_tps)


def run_inspector_bench(engine: Engine, args: Any) -> dict[str, Any]:
    """Recorded over plain decode tokens/s, free and constrained, `args.repeats` rounds."""
    spec = json_schema_constraint(RECORD_SCHEMA, "record")
    cases = {"": (BENCH_PROMPT, None), "constrained_": (RECORD_PROMPT, spec)}
    rounds = rounds_for(args, 3)  # replies of seconds on a real model: 3 rounds tell
    figures: dict[str, Any] = {}
    for name, (prompt, constraint) in cases.items():
        _decode(engine, prompt, 8, True, constraint)  # warm-up: kernels, the grammar

        def side(record: bool, p: str = prompt, c: ConstraintSpec | None = constraint) -> Timed:
            return _decode(engine, p, args.tokens, record, c)

        # recorded (A) over plain (B); plain first in even rounds, as before
        pairs = paired_rounds(
            lambda: side(True), lambda: side(False), rounds, min_side_s(args), a_first=False
        )
        figures.update(pairs.figures(f"inspector_{name}tps_ratio"))
        figures[f"inspector_{name}plain_tps"] = round(statistics.median(pairs.rates("b")), 2)
        figures[f"inspector_{name}recorded_tps"] = round(statistics.median(pairs.rates("a")), 2)
    figures["inspector_top_logprobs"] = TOP
    figures["inspector_runs"] = rounds
    return figures
