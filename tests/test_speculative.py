"""Speculative decoding gives the reply decoding without it: greedy replies identical (free,
JSON schema, Lark, tools; alone and side by side), seeded sampled replies identical and
their tokens distributed as the model says; rejected drafts leave nothing behind in the KV
cache, `fed` or the prompt cache."""

from __future__ import annotations

import math
from dataclasses import replace

import mlx.core as mx
import numpy as np
import pytest

from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.prompt.chat import encode_chat
from engine.runtime import speculative
from engine.runtime.batch import DecodeBatch, DecodeRow
from engine.runtime.sampling import RowSampler
from engine.runtime.speculative import PassCost, PromptLookup, Speculator
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings, StopReason

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "city": {"type": "string", "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "city", "age"],
    "additionalProperties": False,
}
LIST_LARK = """start: "[" item ("," item)~0..3 "]"
item: WORD | NUMBER
WORD: /[a-z]{1,8}/
NUMBER: /[0-9]{1,3}/
"""
LIGHT = {
    "type": "function",
    "function": {
        "name": "set_light",
        "parameters": {
            "type": "object",
            "properties": {
                "on": {"type": "boolean"},
                "room": {"type": "string", "enum": ["kitchen", "hall"]},
            },
            "required": ["on", "room"],
        },
    },
}
DOC = '{"name": "Ada", "city": "London", "age": 36}'
TOPICS = ["the sea", "a lighthouse", "bread", "rain", "an old map", "the moon", "a clock"]


def test_a_reply_that_records_its_tokens_does_not_guess(tiny_engine) -> None:
    """The token recorder reads one sampled token per step: a reply asking for logprobs
    decodes without drafts, beside rows that draft, and records every token it wrote."""

    cases = [r for k, r in _prompts() if k in ("free", "json")][:4]
    recording = [replace(cases[0], logprobs=5), replace(cases[-1], logprobs=5)]
    plain = _run(tiny_engine, recording, speculative=False, together=False)
    mixed = _run(tiny_engine, [*recording, *cases[1:3]], speculative=True, together=True)
    for p, m in zip(plain, mixed[:2], strict=True):
        _same(p, m)
        assert not m.stats.speculative and m.stats.drafted_tokens == 0
        assert m.logprobs is not None and len(m.logprobs) == len(p.logprobs or [])
        assert [t.token for t in m.logprobs] == [t.token for t in p.logprobs or []]
    assert any(r.stats.drafted_tokens for r in mixed[2:])  # the others did guess


def _prompts() -> list[tuple[str, ChatRequest]]:
    """32 requests: free text (some repeating their input), JSON schema, Lark and tools."""
    out: list[tuple[str, ChatRequest]] = []
    greedy = SamplingSettings(temperature=0.0, max_tokens=24)
    for i, topic in enumerate(TOPICS):
        out.append(("free", ChatRequest([{"role": "user", "content": f"Tell me about {topic}."}])))
        text = f"Repeat after me: {topic} and {TOPICS[i - 1]}, {topic} and {TOPICS[i - 2]}."
        out.append(("free", ChatRequest([{"role": "user", "content": text}])))
    schema = json_schema_constraint(PERSON, "person")
    for i in range(8):
        text = f"Rewrite with age {30 + i}: {DOC}"
        out.append(("json", ChatRequest([{"role": "user", "content": text}], constraint=schema)))
    for topic in TOPICS[:5]:
        text = f"List words about {topic}."
        out.append(("lark", ChatRequest([{"role": "user", "content": text}])))
        out[-1][1].constraint = ConstraintSpec("lark", LIST_LARK)
    for room in ("kitchen", "hall", "attic"):
        text = f"Turn on the {room} light."
        request = ChatRequest([{"role": "user", "content": text}], tools=[LIGHT])
        request.tool_choice = "required"
        out.append(("tools", request))
    for kind, request in out:
        # a JSON rewrite gets room to copy before the closing policy ends it to fit
        request.sampling = replace(greedy, max_tokens=64) if kind == "json" else greedy
    return out


def _run(engine: Engine, requests: list[ChatRequest], *, speculative: bool, together: bool):
    engine.set_speculative(speculative)
    try:
        if together:
            return [h.result() for h in engine.submit_many(requests)]
        return [engine.chat(r) for r in requests]
    finally:
        engine.set_speculative(True)


def _same(plain, spec) -> None:
    assert spec.error is None, spec.error
    assert (spec.text, spec.stop_reason) == (plain.text, plain.stop_reason)
    assert [c.to_dict() for c in spec.tool_calls] == [c.to_dict() for c in plain.tool_calls]


def test_greedy_replies_are_identical_with_speculation(tiny_engine, monkeypatch) -> None:
    """32 greedy replies on the tiny model, each alone and all side by side in batches of
    8, give exactly the text (and tool calls) they give without speculation; drafts were
    fed and some were kept."""
    # Draft wherever a match is found: whether drafting pays is timed on the machine, and a
    # busy machine (the whole suite) can pause it, which would leave nothing to compare.
    monkeypatch.setattr(speculative, "MIN_GAIN", 0.0)
    cases = _prompts()
    assert len(cases) >= 30
    requests = [r for _, r in cases]
    plain = _run(tiny_engine, requests, speculative=False, together=False)
    alone = _run(tiny_engine, requests, speculative=True, together=False)
    side = []
    for start in range(0, len(requests), 8):
        side += _run(tiny_engine, requests[start : start + 8], speculative=True, together=True)
    for (kind, _), p, a, s in zip(cases, plain, alone, side, strict=True):
        assert p.error is None, (kind, p.error)
        _same(p, a)
        _same(p, s)
        assert a.stats.speculative and not p.stats.speculative
    for kind in ("free", "json", "lark"):  # tool calls here are mostly forced tokens
        kinds = zip(cases, alone, strict=True)
        kept = sum(a.stats.accepted_tokens for (k, _), a in kinds if k == kind)
        assert kept > 0, f"no draft was kept in the {kind} replies"
    drafted = sum(a.stats.drafted_tokens for a in alone)
    accepted = sum(a.stats.accepted_tokens for a in alone)
    assert 0 < accepted < drafted  # some drafts were rejected (and rolled back) too


def test_greedy_replies_are_identical_on_the_default_model(default_engine) -> None:
    """The default model: free text, a JSON rewrite under its schema, Lark and a tool call
    give the same greedy replies with and without speculation."""
    cases = [
        ("free", ChatRequest([{"role": "user", "content": "What is the capital of France?"}])),
        ("free", ChatRequest([{"role": "user", "content": "Repeat: red green blue red green"}])),
        ("json", ChatRequest([{"role": "user", "content": f"Rewrite with age 40: {DOC}"}])),
        ("lark", ChatRequest([{"role": "user", "content": "List three fruits."}])),
        ("tools", ChatRequest([{"role": "user", "content": "Turn on the hall light."}])),
    ]
    cases[2][1].constraint = json_schema_constraint(PERSON, "person")
    cases[3][1].constraint = ConstraintSpec("lark", LIST_LARK)
    cases[4][1].tools, cases[4][1].tool_choice = [LIGHT], "required"
    for _, request in cases:
        request.sampling = SamplingSettings(temperature=0.0, max_tokens=20)
    requests = [r for _, r in cases]
    plain = _run(default_engine, requests, speculative=False, together=False)
    # drafting decided by acceptance alone: this machine's step times (and what earlier tests
    # taught the session's engine) would pause it on a CPU
    default_engine.set_pass_cost_learning(False)
    try:
        spec = _run(default_engine, requests, speculative=True, together=False)
    finally:
        default_engine.set_pass_cost_learning(True)
    for p, s in zip(plain, spec, strict=True):
        assert p.error is None, p.error
        _same(p, s)
    assert sum(s.stats.accepted_tokens for s in spec) > 0


def test_seeded_sampled_replies_are_identical_with_speculation(tiny_engine) -> None:
    """Every token is drawn with its position's key: a seeded sampled reply is the same
    with speculation, alone or side by side."""
    requests = [
        ChatRequest(
            [{"role": "user", "content": f"Repeat: {t} {t} {t}"}],
            SamplingSettings(temperature=1.0, top_k=8, seed=seed, max_tokens=16),
        )
        for seed, t in enumerate(TOPICS)
    ]
    plain = _run(tiny_engine, requests, speculative=False, together=False)
    spec = _run(tiny_engine, requests, speculative=True, together=True)
    for p, s in zip(plain, spec, strict=True):
        _same(p, s)
    assert sum(s.stats.drafted_tokens for s in spec) > sum(s.stats.accepted_tokens for s in spec)


# Upper 0.1% points of the chi-square distribution by degrees of freedom.
CHI2_999 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46, 7: 24.32, 8: 26.12,
            9: 27.88, 10: 29.59, 11: 31.26, 12: 32.91, 13: 34.53, 14: 36.12, 15: 37.70}  # fmt: skip


def test_sampled_tokens_follow_the_model_distribution(tiny_engine, monkeypatch) -> None:
    """Over 480 seeds, the first two tokens of sampled replies with speculation (the second
    one drafted by prompt lookup and verified) fit the model's own joint probabilities
    (chi-square, p > 0.001), with drafts both kept and rejected."""
    monkeypatch.setattr(speculative, "MIN_GAIN", 0.0)  # draft wherever a match is found
    messages = [{"role": "user", "content": "Say: one two, one three, two three."}]
    # the tiny model is nearly sure of its first tokens: a high temperature spreads them
    settings = SamplingSettings(temperature=8.0, top_k=3, max_tokens=3)

    def model_probs(loaded) -> dict[tuple[int, int], float]:
        prompt = encode_chat(loaded.tokenizer, messages)

        def top(tokens: list[int]) -> dict[int, float]:
            logits = loaded.model(mx.array(tokens)[None])[0, -1].astype(mx.float32)
            values = np.array(logits, dtype=np.float64)
            best = np.argsort(-values)[:3]
            p = np.exp((values[best] - values[best].max()) / settings.temperature)
            return dict(zip(best.tolist(), (p / p.sum()).tolist(), strict=True))

        joint = {}
        for t1, p1 in top(prompt).items():
            for t2, p2 in top(prompt + [t1]).items():
                joint[(t1, t2)] = p1 * p2
        return joint

    expected_p = tiny_engine.run(model_probs).result()
    n = 480
    requests = [
        ChatRequest(messages, SamplingSettings(**{**settings.__dict__, "seed": seed}))
        for seed in range(n)
    ]
    counts: dict[tuple[int, int], int] = {}
    drafted = accepted = 0
    for start in range(0, n, 8):
        for handle in tiny_engine.submit_many(requests[start : start + 8]):
            result = handle.result()
            assert result.error is None, result.error
            reply = result.token_ids[result.stats.prompt_tokens :]
            key = (reply[0], reply[1])
            counts[key] = counts.get(key, 0) + 1
            drafted += result.stats.drafted_tokens
            accepted += result.stats.accepted_tokens
    assert set(counts) <= set(expected_p)
    assert drafted >= n // 2 and 0 < accepted < drafted, (counts, expected_p)
    # cells expected fewer than 5 times are pooled
    big = [k for k, p in expected_p.items() if p * n >= 5]
    observed = [counts.get(k, 0) for k in big]
    expected = [expected_p[k] * n for k in big]
    rest = n - sum(observed)
    if rest or len(big) < len(expected_p):
        observed.append(rest)
        expected.append(n - sum(expected))
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True) if e > 0)
    df = len(observed) - 1
    assert chi2 < CHI2_999[df], (chi2, df, counts, expected_p)
    assert math.isfinite(chi2)


def _lone_and_batched_rows(loaded, prompts: list[str], settings: SamplingSettings):
    """Rows of the given prompts, prefilled, each with a prompt-lookup speculator."""
    from mlx_lm.models.cache import make_prompt_cache

    from engine.runtime.prefill import feed

    rows = []
    for text in prompts:
        tokens = encode_chat(loaded.tokenizer, [{"role": "user", "content": text}])
        cache = make_prompt_cache(loaded.model)
        fed: list[int] = []
        feed(loaded.model, cache, tokens[:-1], fed)

        class Owner:
            cancelled = False
            got: list[int] = []
            prompt_length = 0

            def take(self, token: int) -> StopReason | None:
                self.got.append(token)
                return StopReason.LENGTH if len(self.got) >= 40 else None

            def forced_token(self) -> int | None:
                return None

        owner = Owner()
        owner.got, owner.prompt_length = [], len(tokens)
        spec = Speculator(PromptLookup(), lambda o=owner: 40 - len(o.got))
        rows.append(
            DecodeRow(owner, cache, fed, tokens[-1:], sampler=RowSampler(settings), speculator=spec)
        )
    return rows


def test_rejected_drafts_leave_the_cache_holding_only_accepted_tokens(tiny_engine) -> None:
    """After every step, each row's KV cache holds exactly its `fed` tokens (its prompt and
    the reply's accepted tokens), alone and side by side, though drafts were rejected."""
    settings = SamplingSettings(temperature=8.0, top_k=4, seed=3)

    def run(loaded):
        checked = 0
        for prompts in (["Repeat: a b c a b c a b"], ["Repeat: x y x y", "Hi", "Say: 1 2 1 2"]):
            rows = _lone_and_batched_rows(loaded, prompts, settings)
            batch = DecodeBatch(loaded.model, cost=PassCost(learn=False))  # whatever the load
            for row in rows:
                batch.join(row)
            live = list(rows)
            while batch.busy:
                for row in batch.step():
                    live.remove(row)
                    assert row.cache is not None
                    assert row.cache[0].offset == len(row.fed)
                    # `fed` is the prompt and the reply's tokens (maybe the last one not fed)
                    reply = row.fed[row.owner.prompt_length :]
                    assert len(row.owner.got) - len(reply) in (0, 1)
                    assert reply == row.owner.got[: len(reply)]
                if batch.cache is None:
                    continue
                offsets = batch.cache[0].offset
                offsets = [offsets] if isinstance(offsets, int) else offsets.tolist()
                for row, offset in zip(batch.rows, offsets, strict=True):
                    assert offset == len(row.fed)
                    checked += 1
            assert all(r.speculator.stats.drafted > r.speculator.stats.accepted for r in rows)
        return checked

    assert tiny_engine.run(run).result() > 20


def test_follow_up_turn_gets_the_same_cached_prefix(tiny_model_dir) -> None:
    """A constrained sampled reply whose drafts were partly rejected stores only accepted
    tokens: a follow-up turn finds the same cached prefix as without speculation, and the
    reply (its matcher accepting at the end) is the same."""
    results = {}
    for on in (False, True):
        engine = Engine(speculative=on, learn_pass_cost=False)  # drafts whatever the load
        try:
            engine.load_model(str(tiny_model_dir)).result()
            first = ChatRequest(
                [{"role": "user", "content": f"Rewrite with age 41: {DOC}"}],
                SamplingSettings(temperature=1.0, top_k=4, seed=5, max_tokens=40),
                constraint=json_schema_constraint(PERSON, "person"),
            )
            reply = engine.chat(first)
            assert reply.error is None and not reply.incomplete, reply.error
            follow = ChatRequest(
                first.messages
                + [{"role": "assistant", "content": reply.text}, {"role": "user", "content": "Ok"}],
                SamplingSettings(temperature=0.0, max_tokens=4),
            )
            results[on] = (reply, engine.chat(follow))
        finally:
            engine.close()
    (plain, plain_next), (spec, spec_next) = results[False], results[True]
    assert spec.stats.drafted_tokens > spec.stats.accepted_tokens > 0
    assert spec.text == plain.text
    assert spec_next.stats.cached_tokens == plain_next.stats.cached_tokens > 0
    assert spec_next.text == plain_next.text


def test_prompt_lookup_proposes_what_followed_the_latest_match() -> None:
    lookup = PromptLookup()
    context = [1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 2, 3]
    assert lookup.propose(context, 2) == [5, 6]  # "2 3" last seen followed by 5 6
    assert lookup.propose(context + [5], 3) == [6, 7, 2]  # "3 5" -> 6 7 2
    assert lookup.propose([1, 2, 3], 4) == []  # nothing earlier matches "3"
    # in a repeating run the latest match overlaps the end: the first one proposes more
    assert lookup.propose([5] * 8, 3) == [5, 5, 5]


def test_drafting_pauses_when_wide_passes_cost_as_much_as_their_tokens() -> None:
    """With passes of k+1 tokens costing k+1 single ones (quantized weights on a CPU), no
    draft length pays and drafting pauses; with cheap wide passes it drafts."""
    slow, fast = PassCost(), PassCost()
    for width in range(1, 10):
        slow.record((1, width), 0.1 * width)
        fast.record((1, width), 0.1 + 0.005 * width)
    spec = Speculator(PromptLookup(), lambda: 100)
    assert spec.draft([1, 2, 1, 2, 1], slow, 1) == [] and not spec.active
    spec = Speculator(PromptLookup(), lambda: 100)
    assert spec.draft([1, 2, 1, 2, 1], fast, 1) == [2, 1]


def test_drafting_decided_by_acceptance_alone_when_step_times_are_not_learnt() -> None:
    """`PassCost(learn=False)` (Engine(learn_pass_cost=False)): the same slow wide passes
    that pause drafting when learnt leave it drafting, so the outcome is the same under any
    load; turned back on, the recorded timings decide again."""
    cost = PassCost(learn=False)
    for width in range(1, 10):
        cost.record((1, width), 0.1 * width)
    spec = Speculator(PromptLookup(), lambda: 100)
    assert spec.draft([1, 2, 1, 2, 1], cost, 1) == [2, 1] and spec.active
    cost.learn = True
    spec = Speculator(PromptLookup(), lambda: 100)
    assert spec.draft([1, 2, 1, 2, 1], cost, 1) == [] and not spec.active


@pytest.mark.parametrize("room", [0, 1])
def test_no_draft_past_the_reply_budget(room: int) -> None:
    spec = Speculator(PromptLookup(), lambda: room)
    assert spec.draft([1, 2, 1, 2, 1], PassCost(), 1) == [] and spec.active


def test_a_draft_model_drafts_and_the_replies_stay_the_same(tiny_model_dir) -> None:
    """The tiny model drafting for itself: its greedy guesses are the model's own tokens,
    so every draft token is kept, and the replies equal plain decoding's (free and JSON
    schema); without a loaded model a draft model is refused."""
    engine = Engine(learn_pass_cost=False)  # drafts whatever the machine's load
    try:
        with pytest.raises(ValueError, match="load a model"):
            engine.load_draft_model(str(tiny_model_dir)).result()
        engine.load_model(str(tiny_model_dir)).result()
        assert engine.load_draft_model(str(tiny_model_dir)).result() is not None
        assert engine.draft_model is not None
        requests = [
            ChatRequest(
                [{"role": "user", "content": "Tell me about rain."}],
                SamplingSettings(temperature=0.0, max_tokens=16),
            ),
            ChatRequest(
                [{"role": "user", "content": f"Rewrite with age 50: {DOC}"}],
                SamplingSettings(temperature=0.0, max_tokens=30),
                constraint=json_schema_constraint(PERSON, "person"),
            ),
        ]
        plain = _run(engine, requests, speculative=False, together=False)
        spec = _run(engine, requests, speculative=True, together=False)
        for p, s in zip(plain, spec, strict=True):
            _same(p, s)
        assert spec[0].stats.drafted_tokens > 0
        assert spec[0].stats.accepted_tokens == spec[0].stats.drafted_tokens
        engine.load_draft_model(None).result()
        assert engine.draft_model is None
    finally:
        engine.close()
