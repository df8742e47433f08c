"""The token view's figures (engine.runtime.logprobs), checked against the model and the
grammar computed independently: the model's logits from one forward pass over the whole
reply, the masks from a fresh llguidance matcher fed the same tokens."""

from __future__ import annotations

import math

import llguidance
import llguidance.numpy
import mlx.core as mx
import numpy as np
import pytest

from engine.constraints.sources import json_schema_constraint
from engine.constraints.tokenizer import ll_tokenizer
from engine.constraints.validate import compile_constraint
from engine.runtime.sampling import end_token_ids
from engine.types import (
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    SamplingSettings,
    TokenLogprob,
    TokenLogprobs,
    logprobs_summary,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
    },
    "required": ["name", "age", "color"],
    "additionalProperties": False,
}


def _ask(engine, constraint=None, top=20, max_tokens=24, **sampling) -> ChatResult:
    sampling.setdefault("temperature", 0.0)
    request = ChatRequest(
        [{"role": "user", "content": "A person, please."}],
        SamplingSettings(max_tokens=max_tokens, **sampling),
        constraint=constraint,
        logprobs=top,
    )
    result = engine.chat(request)
    assert result.error is None, result.error
    assert result.logprobs is not None
    return result


def _model_logprobs(tiny_model, result: ChatResult) -> np.ndarray:
    """Log-probabilities the model gives each reply token's position, from one forward
    pass over the prompt and the whole reply (not the decode loop's)."""
    model, _ = tiny_model
    assert result.logprobs is not None
    prompt = result.token_ids[: result.stats.prompt_tokens]
    tokens = prompt + [t.token for t in result.logprobs]
    logits = model(mx.array(tokens)[None])[0].astype(mx.float32)
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    start = len(prompt) - 1
    return np.array(logprobs[start : start + len(result.logprobs)])


def _masks(tiny_model, constraint: ConstraintSpec, tokens: list[int]) -> list[np.ndarray]:
    """The allowed tokens (a bool per vocabulary entry) before each of `tokens`, from a
    fresh matcher."""
    _, tokenizer = tiny_model
    lltok = ll_tokenizer(tokenizer, end_token_ids(tokenizer))
    compiled = compile_constraint(constraint).compiled
    assert compiled is not None
    matcher = llguidance.LLMatcher(lltok, compiled.grammar)
    bitmask = llguidance.numpy.allocate_token_bitmask(1, lltok.vocab_size)
    masks = []
    for token in tokens:
        llguidance.numpy.fill_next_token_bitmask(matcher, bitmask, 0)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little").astype(bool)
        masks.append(bits[: lltok.vocab_size])
        assert matcher.consume_token(token)
    return masks


def test_free_reply_top1_is_the_greedy_token_and_figures_match_the_model(tiny_engine, tiny_model):
    result = _ask(tiny_engine, top=5)
    records = result.logprobs
    assert records is not None and len(records) == result.stats.generated_tokens
    expected = _model_logprobs(tiny_model, result)
    for record, row in zip(records, expected, strict=True):
        assert record.top[0].token == record.token == int(row.argmax())  # greedy
        assert len(record.top) == 5
        values = [a.logprob for a in record.top]
        assert values == sorted(values, reverse=True)
        assert record.model_logprob == pytest.approx(row[record.token], abs=2e-3)
        assert record.logprob == pytest.approx(record.model_logprob, abs=1e-5)  # no mask
        for alt in record.top:
            assert alt.allowed and alt.logprob == pytest.approx(row[alt.token], abs=2e-3)
        assert record.allowed is None and not record.forced and not record.overridden
    assert "".join(r.text for r in records) == result.text


def test_constrained_reply_against_the_model_and_the_grammar(tiny_engine, tiny_model):
    constraint = json_schema_constraint(SCHEMA, "person")
    result = _ask(tiny_engine, constraint, top=20, max_tokens=40, temperature=0.9, seed=3)
    records = result.logprobs
    assert records is not None
    tokens = [r.token for r in records]
    expected = _model_logprobs(tiny_model, result)
    masks = _masks(tiny_model, constraint, tokens)
    sampled = [i for i, r in enumerate(records) if not r.forced]
    assert sampled and len(sampled) < len(records)
    for i, (record, row, allowed) in enumerate(zip(records, expected, masks, strict=True)):
        assert allowed[record.token], f"token {i} was not allowed by the grammar"
        if record.model_logprob is None:  # never fed (the reply's last, closing tokens)
            assert record.forced and not record.top
            continue
        # before the mask: what the free model gives at this position
        best = int(row.argmax())
        assert record.top[0].token == best
        assert record.model_logprob == pytest.approx(row[record.token], abs=2e-3)
        if record.forced:
            assert record.logprob == 0.0 and record.allowed == 1
            assert record.overridden == (best != record.token)
            continue
        # after the mask: a distribution over the allowed tokens only, summing to 1
        assert record.allowed == int(allowed.sum())
        shift = record.logprob - row[record.token]  # -log(mass the mask kept)
        assert math.exp(shift) * np.exp(row[allowed]).sum() == pytest.approx(1.0, abs=1e-3)
        for alt in record.top:
            assert alt.allowed == bool(allowed[alt.token])
        assert record.overridden == (not allowed[best])
    assert sum(r.forced for r in records) == (
        result.stats.forced_tokens + result.stats.closing_tokens
    )


def test_disallowed_alternatives_are_never_sampled(tiny_engine):
    constraint = ConstraintSpec("regex", r"(yes|no)[a-z]{2,6}")
    for seed in range(4):
        result = _ask(tiny_engine, constraint, top=20, temperature=1.5, seed=seed, max_tokens=10)
        for record in result.logprobs or []:
            chosen = [a for a in record.top if a.token == record.token]
            assert all(a.allowed for a in chosen)


def test_an_override_and_a_forced_token_are_flagged(tiny_engine):
    """The tiny model always wants to repeat its last token (a newline at first): a schema
    forbids that everywhere, so the reply opens on forced tokens the model did not want
    and samples under masks that leave out its first choice."""
    result = _ask(tiny_engine, json_schema_constraint(SCHEMA, "person"), max_tokens=30)
    records = result.logprobs
    assert records is not None
    first = records[0]
    assert first.text == '{"' and first.forced and first.overridden
    assert first.model_logprob is not None and first.model_logprob < first.top[0].logprob
    override = next(r for r in records if r.overridden and not r.forced)
    assert not override.top[0].allowed
    assert override.allowed is not None and override.allowed > 1
    assert any(a.allowed and a.token == override.token for a in override.top) or (
        override.token not in {a.token for a in override.top}
    )
    summary = logprobs_summary(records)
    overridden = sum(r.overridden for r in records)
    forced = sum(r.forced and not r.closing for r in records)
    closing = sum(r.closing for r in records)  # the reply is closed to fit its 30 tokens
    assert closing and records[-1].closing
    assert summary == (
        f"the constraint overrode the model at {overridden} of {len(records)} tokens; "
        f"{forced} forced; {closing} written by Corral to close it"
    )


def test_figures_stream_in_order_and_round_trip(tiny_engine):
    request = ChatRequest(
        [{"role": "user", "content": "A person."}],
        SamplingSettings(temperature=0.0, max_tokens=20),
        constraint=json_schema_constraint(SCHEMA, "person"),
        logprobs=2,
    )
    handle = tiny_engine.submit(request)
    streamed = [t for e in handle.events() if isinstance(e, TokenLogprobs) for t in e.tokens]
    result = handle.result()
    assert streamed == result.logprobs
    assert [TokenLogprob.from_dict(t.to_dict()) for t in streamed] == streamed


def test_a_recording_row_beside_free_rows(tiny_engine):
    """Decoded side by side, the recording row gives what it gives alone and the rows that
    do not record give no figures."""
    constraint = json_schema_constraint(SCHEMA, "person")
    alone = _ask(tiny_engine, constraint, top=4)
    free = SamplingSettings(temperature=0.0, max_tokens=16)
    handles = [
        tiny_engine.submit(ChatRequest([{"role": "user", "content": text}], free))
        for text in ("Hi", "Tell me about the sea.")
    ]
    recorded = tiny_engine.submit(
        ChatRequest(
            [{"role": "user", "content": "A person, please."}],
            SamplingSettings(temperature=0.0, max_tokens=24),
            constraint=constraint,
            logprobs=4,
        )
    )
    together = recorded.result()
    assert all(h.result().logprobs is None for h in handles)
    assert together.logprobs is not None and alone.logprobs is not None
    assert [t.token for t in together.logprobs] == [t.token for t in alone.logprobs]
    for a, b in zip(together.logprobs, alone.logprobs, strict=True):
        assert (a.forced, a.overridden, a.allowed) == (b.forced, b.overridden, b.allowed)
        assert [x.token for x in a.top[:1]] == [x.token for x in b.top[:1]]
        assert a.logprob == pytest.approx(b.logprob, abs=1e-2)


def test_out_of_range_alternatives_fail_the_request(tiny_engine):
    request = ChatRequest([{"role": "user", "content": "Hi"}], SamplingSettings(max_tokens=4))
    request.logprobs = 21
    result = tiny_engine.chat(request)
    assert result.error_kind == "input" and "between 0 and 20, got 21" in (result.error or "")


def test_cli_chat_logprobs_json(tiny_model_dir, tmp_path, capsys):
    import json

    from engine.cli import main

    schema = tmp_path / "person.json"
    schema.write_text(json.dumps(SCHEMA))
    args = ["chat", "--model", str(tiny_model_dir), "--prompt", "A person", "--temperature", "0"]
    args += ["--max-tokens", "12", "--json-schema", str(schema), "--logprobs", "3", "--json"]
    assert main(args) == 3  # 12 tokens are too few for the model to end the reply
    data = json.loads(capsys.readouterr().out)
    assert data["ending"] in ("filled", "cut")
    tokens = [TokenLogprob.from_dict(t) for t in data["logprobs"]]
    assert len(tokens) == data["stats"]["generated_tokens"]
    assert tokens[0].forced and tokens[0].overridden and len(tokens[0].top) == 3
    assert any(not t.forced and t.allowed for t in tokens)
    assert main([*args[:-3], "--logprobs", "21", "--json"]) == 1
    assert "between 0 and 20, got 21" in capsys.readouterr().err


@pytest.mark.parametrize("vocab", [1000, 49152, 151936, 262144])
@pytest.mark.parametrize("k", [1, 2, 5, 20])
def test_the_top_ids_hold_the_k_largest_logits(vocab, k):
    """Found block by block, the top ids are those of the k largest logits of each row
    (any vocabulary size, padded or not; rows of their own)."""
    from engine.runtime.logprobs import top_ids

    rng = np.random.default_rng(vocab + k)
    logits = rng.normal(size=(3, vocab)).astype(np.float32)
    logits[1, rng.integers(0, vocab, 40)] += 8  # the largest bunched in a few blocks
    logits[2, -k:] += 20  # the largest in the last (padded) block
    ids = np.array(top_ids(mx.array(logits), k))
    assert ids.shape == (3, k)
    for row, chosen in zip(logits, ids, strict=True):
        assert len(set(chosen.tolist())) == k
        assert sorted(row[chosen].tolist()) == sorted(np.sort(row)[-k:].tolist())
