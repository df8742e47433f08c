"""Speculative decoding (the `speculative` bench section), side by side in one run.

Each task is decoded greedily with speculation and without it, once each a round, the
order alternating from task to task and from round to round (on-off, then off-on), on
the same engine with its prompt cache (the prompt is computed once, by whichever run
comes first; the figures are decode figures). Tokens per second are a task group's
generated tokens (after the first of each reply) over its decode time (from each reply's
first token to its last).

- `spec_grounded_speedup`: tokens/s with speculation over without, on input-grounded tasks:
  rewriting a JSON document with one change under its schema, extracting fields of a
  passage into a schema, repeating a code snippet with a rename.
- `spec_open_ratio`: the same on open-ended chat prompts (the adaptive off-switch keeps it
  near 1 where drafts do not pay).
- `spec_acceptance_rate_<task>`: draft tokens the model kept over those fed, per task
  (and `_grounded`, `_open` per group); `spec_drafted_<task>` how many were fed.
- `spec_identical`: every speculative reply equals its plain one (greedy identity).
- `spec_grounded_speedup_spread`, `spec_open_ratio_spread`: the spread of the rounds'
  ratios, a round's ratio being its whole group's tokens/s with speculation over without
  (every task once each way: the tasks' differences, real and large, are in every round
  alike, so the spread holds only what moved between rounds); `_can_tell` /
  `_cannot_tell` say whether it can tell. Two rounds by default (`--repeats`): a group's
  round is six replies of seconds each on the default model (a side of it three, over ten
  seconds), and two put every task first once each way.
- `spec_<group>_rounds`: the rounds run.
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks.rounds import Timed, alternate, round_ratios, rounds_for, spread, verdict
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


def _decode(result: ChatResult) -> Timed:
    """Tokens after the first over the seconds from the first token to the last."""
    stats = result.stats
    n = stats.generated_tokens - 1
    return Timed.from_rate(n, stats.decode_tps) if n > 0 else Timed(0, 0.0)


def run_speculative_bench(engine: Engine, args: Any) -> dict[str, Any]:
    """The section's figures (`args.tokens`: tokens per reply, at most 96; `args.repeats`:
    rounds, 2 when not given)."""
    tokens = min(int(args.tokens), 96)
    rounds = rounds_for(args, 2)
    figures: dict[str, Any] = {}
    identical = True
    started = time.perf_counter()
    _reply(engine, "Hi", None, 4, on=False)  # warm-up: kernels, allocator
    for group, tasks in (("grounded", GROUNDED), ("open", OPEN)):
        # each round's group totals, (tokens, seconds), with speculation (True) and without
        per_round: list[dict[bool, Timed]] = []
        first_reply: dict[tuple[str, bool], ChatResult] = {}
        last_spec: dict[str, ChatResult] = {}
        for r in range(rounds):
            totals = {True: Timed(0, 0.0, 0), False: Timed(0, 0.0, 0)}
            for i, (name, (text, constraint)) in enumerate(tasks.items()):
                for on in alternate(r + i):  # on first for even (round + task)
                    result = _reply(engine, text, constraint, tokens, on=on)
                    earlier = first_reply.setdefault((name, on), result)
                    identical = identical and result.text == earlier.text
                    totals[on] = totals[on] + _decode(result)
                    if on:
                        last_spec[name] = result
            per_round.append(totals)
        drafted = accepted = 0
        for name in tasks:
            spec, plain = last_spec[name], first_reply[(name, False)]
            identical = identical and spec.text == plain.text
            figures[f"spec_acceptance_rate_{name}"] = round(spec.stats.acceptance_rate, 3)
            figures[f"spec_drafted_{name}"] = spec.stats.drafted_tokens
            drafted += spec.stats.drafted_tokens
            accepted += spec.stats.accepted_tokens
        on_all = sum((t[True] for t in per_round), Timed(0, 0.0, 0))
        off_all = sum((t[False] for t in per_round), Timed(0, 0.0, 0))
        key = "spec_grounded_speedup" if group == "grounded" else "spec_open_ratio"
        figures[key] = round(on_all.rate / off_all.rate, 3) if off_all.rate else None
        ratios = round_ratios((t[True].rate, t[False].rate) for t in per_round)
        side_s = min(t[on].seconds for t in per_round for on in (True, False))
        figures[f"{key}_spread"] = spread(ratios)
        figures.update(verdict(key, figures[f"{key}_spread"], len(ratios), side_s=side_s))
        figures[f"spec_{group}_tps"] = round(on_all.rate, 2)
        figures[f"spec_{group}_plain_tps"] = round(off_all.rate, 2)
        figures[f"spec_acceptance_rate_{group}"] = round(accepted / drafted, 3) if drafted else 0.0
        figures[f"spec_{group}_rounds"] = rounds
    figures["spec_identical"] = identical
    figures["spec_tokens_per_reply"] = tokens
    figures["spec_section_s"] = round(time.perf_counter() - started, 1)
    return figures
