"""Speculative decoding (the `speculative` bench section), side by side in one run.

Each task is decoded greedily with speculation and without it, twice each in the order
on-off-off-on (off-on-on-off for every other task, so drift on a busy machine cancels
out), on the same engine with its prompt cache (the
prompt is computed once, by whichever run comes first; the figures are decode figures).
Tokens per second are a task group's generated tokens (after the first of each reply) over
its decode time (from each reply's first token to its last).

- `spec_grounded_speedup`: tokens/s with speculation over without, on input-grounded tasks:
  rewriting a JSON document with one change under its schema, extracting fields of a
  passage into a schema, repeating a code snippet with a rename.
- `spec_open_ratio`: the same on open-ended chat prompts (the adaptive off-switch keeps it
  near 1 where drafts do not pay).
- `spec_acceptance_rate_<task>`: draft tokens the model kept over those fed, per task
  (and `_grounded`, `_open` per group); `spec_drafted_<task>` how many were fed.
- `spec_identical`: every speculative reply equals its plain one (greedy identity).
- `spec_grounded_speedup_spread`, `spec_open_ratio_spread`: the spread of the rounds' ratios
  (each task's on-off and off-on pairs), which also holds the tasks' differences.
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks.rounds import spread
from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.types import ChatRequest, ChatResult, ConstraintSpec, SamplingSettings

ORDER = {"id": 4711, "customer": "Maria Lopez", "city": "Valencia", "items": 3, "paid": True}
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "city": {"type": "string"},
        "items": {"type": "integer"},
        "paid": {"type": "boolean"},
    },
    "required": ["id", "customer", "city", "items", "paid"],
    "additionalProperties": False,
}
PASSAGE = (
    "On 12 March 2021 the engineer Tomas Berg flew from Oslo to Lisbon to inspect the new "
    "harbour crane built by Nordlift."
)
EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "person": {"type": "string"},
        "date": {"type": "string"},
        "from": {"type": "string"},
        "to": {"type": "string"},
        "company": {"type": "string"},
    },
    "required": ["person", "date", "from", "to", "company"],
    "additionalProperties": False,
}
CODE = """def total_price(items):
    total = 0
    for item in items:
        total += item.price * item.count
    return total
"""

GROUNDED: dict[str, tuple[str, ConstraintSpec | None]] = {
    "json_rewrite": (
        f"Rewrite this JSON with the city changed to Madrid:\n{json.dumps(ORDER)}",
        json_schema_constraint(ORDER_SCHEMA, "order"),
    ),
    "extract": (
        f"Extract the person, date, from, to and company as JSON:\n{PASSAGE}",
        json_schema_constraint(EVENT_SCHEMA, "event"),
    ),
    "code_rename": (
        f"Repeat this code with total_price renamed to order_total:\n{CODE}",
        None,
    ),
}
OPEN: dict[str, tuple[str, ConstraintSpec | None]] = {
    "chat_joke": ("Tell me a joke about cats.", None),
    "chat_cook": ("What could I cook tonight?", None),
    "chat_autumn": ("Describe autumn in a few sentences.", None),
}


def _reply(
    engine: Engine, text: str, constraint: ConstraintSpec | None, tokens: int, *, on: bool
) -> ChatResult:
    was = engine.speculative
    engine.set_speculative(on)
    try:
        request = ChatRequest(
            [{"role": "user", "content": text}],
            SamplingSettings(temperature=0.0, max_tokens=tokens),
            constraint=constraint,
        )
        result = engine.chat(request)
    finally:
        engine.set_speculative(was)
    if result.error:
        raise RuntimeError(result.error)
    return result


def _decode(result: ChatResult) -> tuple[int, float]:
    """(tokens after the first, seconds from the first token to the last)."""
    stats = result.stats
    n = stats.generated_tokens - 1
    return (n, n / stats.decode_tps) if n > 0 and stats.decode_tps > 0 else (0, 0.0)


def run_speculative_bench(engine: Engine, args: Any) -> dict[str, Any]:
    """The section's figures (`args.tokens`: tokens per reply, at most 96)."""
    tokens = min(int(args.tokens), 96)
    figures: dict[str, Any] = {}
    identical = True
    started = time.perf_counter()
    _reply(engine, "Hi", None, 4, on=False)  # warm-up: kernels, allocator
    for group, tasks in (("grounded", GROUNDED), ("open", OPEN)):
        totals = {True: [0, 0.0], False: [0, 0.0]}
        drafted = accepted = 0
        round_ratios: list[float] = []  # each round's (a task's on-off or off-on pair) ratio
        for i, (name, (text, constraint)) in enumerate(tasks.items()):
            results: dict[bool, ChatResult] = {}
            first = i % 2 == 0
            pair: dict[bool, float] = {}
            for on in (first, not first, not first, first):
                result = _reply(engine, text, constraint, tokens, on=on)
                identical = identical and result.text == results.get(on, result).text
                results[on] = result
                n, seconds = _decode(result)
                totals[on][0] += n
                totals[on][1] += seconds
                pair[on] = n / seconds if seconds else 0.0
                if len(pair) == 2:
                    if pair[False]:
                        round_ratios.append(pair[True] / pair[False])
                    pair = {}
            spec, plain = results[True], results[False]
            identical = identical and spec.text == plain.text
            figures[f"spec_acceptance_rate_{name}"] = round(spec.stats.acceptance_rate, 3)
            figures[f"spec_drafted_{name}"] = spec.stats.drafted_tokens
            drafted += spec.stats.drafted_tokens
            accepted += spec.stats.accepted_tokens
        tps = {on: n / s if s else 0.0 for on, (n, s) in totals.items()}
        key = "spec_grounded_speedup" if group == "grounded" else "spec_open_ratio"
        figures[key] = round(tps[True] / tps[False], 3) if tps[False] else None
        figures[f"{key}_spread"] = spread(round_ratios)
        figures[f"spec_{group}_tps"] = round(tps[True], 2)
        figures[f"spec_{group}_plain_tps"] = round(tps[False], 2)
        figures[f"spec_acceptance_rate_{group}"] = round(accepted / drafted, 3) if drafted else 0.0
    figures["spec_identical"] = identical
    figures["spec_tokens_per_reply"] = tokens
    figures["spec_section_s"] = round(time.perf_counter() - started, 1)
    return figures
