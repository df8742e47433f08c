"""Replies decoded side by side: each row gives exactly what it gives alone, under its own
constraint and settings; a cancelled row leaves the others untouched; every row's tokens
end up in the prompt cache; the bounds on rows and queued requests hold."""

from __future__ import annotations

import json
import re
import threading

import jsonschema
import pytest

from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.errors import EngineBusyError
from engine.types import (
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    Finished,
    SamplingSettings,
    StopReason,
    TextDelta,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
    },
    "required": ["name", "age", "color"],
    "additionalProperties": False,
}
PATTERN = r"[a-z]{2,8}@(mail|post)\.(com|org)"


def _request(text: str, max_tokens: int = 24, constraint=None, **sampling) -> ChatRequest:
    sampling.setdefault("temperature", 0.0)
    return ChatRequest(
        [{"role": "user", "content": text}],
        SamplingSettings(max_tokens=max_tokens, **sampling),
        constraint=constraint,
    )


def _mixed_requests(max_tokens: int) -> list[ChatRequest]:
    """Rows of different prompt lengths (one over a prefill chunk), a JSON-schema row, a
    regex row and free rows."""
    long_text = " ".join(f"word{i}" for i in range(160))  # ~400 tokens: two prefill chunks
    return [
        _request("Hi", max_tokens),
        _request(f"Summarise: {long_text}", max_tokens),
        _request("A person as JSON.", max_tokens, json_schema_constraint(SCHEMA, "person")),
        _request("An email address.", max_tokens, ConstraintSpec("regex", PATTERN)),
        _request("Tell me about the sea and the storms over it.", max_tokens),
    ]


def _same(batched: ChatResult, alone: ChatResult) -> None:
    assert batched.error is None and alone.error is None, (batched.error, alone.error)
    assert batched.text == alone.text
    assert batched.stop_reason == alone.stop_reason
    assert batched.stats.generated_tokens == alone.stats.generated_tokens


def _alone(engine: Engine, requests: list[ChatRequest]) -> list[ChatResult]:
    return [engine.chat(r) for r in requests]


def _together(engine: Engine, requests: list[ChatRequest], late: ChatRequest | None = None):
    """Submit `requests` at once, and `late` when the first reply has streamed 3 deltas."""
    handles = engine.submit_many(requests)
    late_handle: list = []
    if late is not None:
        seen = 0
        for event in handles[0].events(timeout=120):
            seen += isinstance(event, TextDelta)
            if seen == 3:
                late_handle.append(engine.submit(late))
                break
    results = [h.result(timeout=300) for h in handles]
    return results, [h.result(timeout=300) for h in late_handle]


def test_greedy_rows_give_what_they_give_alone(tiny_model_dir) -> None:
    engine = Engine(reuse_prefixes=False)  # every run computes its prompt afresh
    try:
        engine.load_model(str(tiny_model_dir)).result()
        requests = _mixed_requests(24)
        late = _request("Another question, joining late.", 24)
        alone = _alone(engine, [*requests, late])
        together, (late_result,) = _together(engine, requests, late)
        for batched, single in zip([*together, late_result], alone, strict=True):
            _same(batched, single)
        person, email = together[2], together[3]
        if person.stop_reason == StopReason.EOS:
            jsonschema.validate(json.loads(person.text), SCHEMA)
        if email.stop_reason == StopReason.EOS:
            assert re.fullmatch(PATTERN, email.text), email.text
        assert person.stats.constrained and person.stats.forced_tokens > 0
    finally:
        engine.close()


def test_rows_keep_their_own_sampling_seed_and_limits(tiny_engine: Engine) -> None:
    requests = [
        _request("Hello there", 16, temperature=1.2, seed=3),
        _request("Hello there", 9, temperature=0.9, top_k=20, seed=5, stop=["e"]),
        _request("Hello there", 12, temperature=1.0, top_p=0.8, repetition_penalty=1.3, seed=8),
        _request("Hello there", 5),
    ]
    alone = _alone(tiny_engine, requests)
    together, _ = _together(tiny_engine, requests)
    for batched, single in zip(together, alone, strict=True):
        assert batched.text == single.text and batched.stop_reason == single.stop_reason
    assert together[3].stats.generated_tokens == 5


def test_cancelling_one_row_leaves_the_others_unchanged(tiny_engine: Engine) -> None:
    requests = [_request(f"Question {i}: what is the weather like?", 20) for i in range(3)]
    alone = _alone(tiny_engine, requests)
    victim = _request("Talk for a long time about anything.", 400)
    box: list = []
    seen = 0

    def on_event(index: int, event) -> None:  # engine thread
        nonlocal seen
        if index == 1 and isinstance(event, TextDelta):
            seen += 1
            if seen == 4:
                box[0][1].cancel()

    handles = tiny_engine.submit_many([requests[0], victim, *requests[1:]], on_event)
    box.append(handles)
    results = [h.result(timeout=300) for h in handles]
    assert results[1].stop_reason == StopReason.CANCELLED
    assert 4 <= results[1].stats.generated_tokens < 400
    for batched, single in zip([results[0], *results[2:]], alone, strict=True):
        assert batched.text == single.text and batched.stop_reason == single.stop_reason


def test_every_row_is_cached_after_a_batch(tiny_engine: Engine) -> None:
    questions = [f"Cache me, question number {i}, please." for i in range(4)]
    firsts = [
        h.result(timeout=300) for h in tiny_engine.submit_many([_request(q, 8) for q in questions])
    ]
    for question, first in zip(questions, firsts, strict=True):
        follow = ChatRequest(
            [
                {"role": "user", "content": question},
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": "And then?"},
            ],
            SamplingSettings(temperature=0.0, max_tokens=2),
        )
        second = tiny_engine.chat(follow)
        # everything up to the first reply was kept (the template may re-tokenize the
        # reply's last characters)
        assert second.stats.cached_tokens >= first.stats.prompt_tokens - 1


def test_alternatives_share_their_prompt_and_differ(tiny_engine: Engine) -> None:
    request = _request("Give me three different answers, one each time.", 10, temperature=1.5)
    request.sampling.seed = 11
    results = [h.result(timeout=300) for h in tiny_engine.submit_many(request.alternatives(3))]
    assert len({r.text for r in results}) > 1
    prompt = results[0].stats.prompt_tokens
    # the first computes the prompt; the others start from its state
    assert [r.stats.cached_tokens >= prompt - 1 for r in results[1:]] == [True, True]
    again = [h.result(timeout=300) for h in tiny_engine.submit_many(request.alternatives(3))]
    assert [r.text for r in again] == [r.text for r in results]  # seed + i per reply


def test_max_rows_bounds_the_replies_decoding_together(tiny_model_dir) -> None:
    engine = Engine(max_rows=2)
    try:
        engine.load_model(str(tiny_model_dir)).result()
        order: list[tuple[int, str]] = []

        def on_event(index: int, event) -> None:
            if isinstance(event, TextDelta) and (index, "text") not in order:
                order.append((index, "text"))
            if isinstance(event, Finished):
                order.append((index, "done"))

        handles = engine.submit_many([_request(f"Row {i}", 6) for i in range(3)], on_event)
        for h in handles:
            h.result(timeout=120)
        # the third reply starts only after one of the first two has finished
        first_done = min(order.index((0, "done")), order.index((1, "done")))
        assert order.index((2, "text")) > first_done
    finally:
        engine.close()


def test_a_request_cancelled_while_waiting_for_a_row_ends_at_once(tiny_model_dir) -> None:
    engine = Engine(max_rows=1)
    try:
        engine.load_model(str(tiny_model_dir)).result()
        started = threading.Event()
        busy = engine.submit(_request("Talk on and on.", 4000), lambda e: started.set())
        assert started.wait(60)
        waiting = engine.submit(_request("Me next", 4))
        waiting.cancel()
        assert waiting.result(timeout=30).stop_reason == StopReason.CANCELLED
        assert not busy.done()  # it did not have to wait for the running reply
        busy.cancel()
        assert busy.result(timeout=60).stop_reason == StopReason.CANCELLED
    finally:
        engine.close()


def test_a_full_queue_refuses_more_requests(tiny_model_dir) -> None:
    engine = Engine(max_queued=2)
    try:
        engine.load_model(str(tiny_model_dir)).result()
        gate = threading.Event()
        engine.run(lambda lm: gate.wait(30))  # the engine thread is busy
        queued = engine.submit_many([_request("a", 2), _request("b", 2)])
        with pytest.raises(EngineBusyError, match="2 requests are already waiting"):
            engine.submit(_request("c", 2))
        gate.set()
        assert all(h.result(timeout=60).error is None for h in queued)
        assert engine.chat(_request("d", 2)).error is None  # room again
    finally:
        engine.close()


def test_rows_decoding_count_against_the_kv_budget(tiny_engine: Engine) -> None:
    seen: list = []

    def on_event(index: int, event) -> None:
        if index == 0 and isinstance(event, Finished):
            seen.append(tiny_engine.snapshot.cache)  # published just before Finished

    handles = tiny_engine.submit_many([_request("Short", 2), _request("Long one", 40)], on_event)
    for h in handles:
        h.result(timeout=120)
    (cache,) = seen
    assert cache.reserved_bytes > 0  # the long reply was still decoding
    assert cache.bytes + cache.reserved_bytes <= cache.budget_bytes
    assert tiny_engine.snapshot.cache.reserved_bytes == 0


def test_default_model_rows_give_what_they_give_alone(default_engine: Engine) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 16}},
        "required": ["city"],
        "additionalProperties": False,
    }
    requests = [
        _request(
            "What is the capital of France? Answer in JSON.", 24, json_schema_constraint(schema)
        ),
        _request(
            "Is Paris in France? Answer yes or no.",
            8,
            ConstraintSpec("regex", "(Yes|No), [a-z ]{1,20}\\."),
        ),
        _request("Write a short poem about the sea.", 12),
    ]
    alone = _alone(default_engine, requests)
    late = _request("Name a colour.", 6)
    late_alone = default_engine.chat(late)
    together, (late_result,) = _together(default_engine, requests, late)
    for batched, single in zip([*together, late_result], [*alone, late_alone], strict=True):
        _same(batched, single)
    assert "Paris" in together[0].text


def _decode_rows(loaded, cost, tokens: int = 40):
    """Two rows decoded together by the loop itself, one under a key-heavy schema (its
    grammar forces runs of tokens), one free; each row's tokens and the (rows, width) of
    every step."""
    from mlx_lm.models.cache import make_prompt_cache

    from benchmarks.constraints import RECORD_PROMPT, RECORD_SCHEMA
    from engine.constraints.row import RowConstraint
    from engine.prompt.chat import encode_chat
    from engine.runtime.batch import DecodeBatch, DecodeRow
    from engine.runtime.prefill import prefill
    from engine.runtime.sampling import RowSampler, end_token_ids

    class Owner:
        cancelled = False

        def __init__(self) -> None:
            self.tokens: list[int] = []

        def take(self, token: int):
            self.tokens.append(token)
            return StopReason.LENGTH if len(self.tokens) >= tokens else None

        def forced_token(self):
            return None

    ends = end_token_ids(loaded.tokenizer)
    batch = DecodeBatch(loaded.model, cost=cost)
    owners = []
    for text, spec in ((RECORD_PROMPT, json_schema_constraint(RECORD_SCHEMA)), ("Hi", None)):
        prompt = encode_chat(loaded.tokenizer, [{"role": "user", "content": text}])
        cache, fed = make_prompt_cache(loaded.model), []
        prefill(loaded.model, cache, prompt[:-1], fed, cancel=threading.Event())
        constraint = None if spec is None else RowConstraint(loaded.tokenizer, spec, ends)
        if constraint is not None:
            constraint.collect()
        owners.append(Owner())
        row = DecodeRow(
            owners[-1],
            cache,
            fed,
            prompt[-1:],
            sampler=RowSampler(SamplingSettings(temperature=0.0)),
            constraint=constraint,
        )
        batch.join(row)
    shapes = []
    while batch.busy:
        batch.step()
        if batch._last_step is not None:
            shapes.append(batch._last_step[1])
    return [o.tokens for o in owners], shapes


def test_forced_tokens_are_fed_narrow_where_wide_passes_cost_their_width(tiny_engine) -> None:
    """Where a pass feeding w tokens a row costs w steps (a CPU, as the batch learns it), a
    row's forced tokens are fed one a step while the other row goes on, instead of every
    row's step widening for them; where wide passes are cheap, at once. Either way each
    row gets the same tokens."""
    from engine.runtime.speculative import PassCost

    class CostsTheirWidth(PassCost):
        """Costs as a CPU's step times teach them: a pass of width w takes w steps."""

        def relative(self, rows: int, width: int) -> float:
            return float(width)

    expensive = CostsTheirWidth()
    cheap = PassCost(learn=False)
    narrow_tokens, narrow = tiny_engine.run(lambda lm: _decode_rows(lm, expensive)).result()
    wide_tokens, wide = tiny_engine.run(lambda lm: _decode_rows(lm, cheap)).result()
    assert narrow_tokens == wide_tokens
    assert max(w for r, w in narrow if r == 2) == 1  # two rows: never a wide step
    assert max(w for r, w in wide if r == 2) > 1  # the forced keys, at once
    # positions computed (padding included): fewer when no row's step widens for another
    assert sum(r * w for r, w in narrow) < sum(r * w for r, w in wide)
