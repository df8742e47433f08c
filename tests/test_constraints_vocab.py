"""Masks on both vocabularies the bench measures (SmolLM2's 49,152 tokens and Gemma 3's
262,144): a grammar's packed mask, applied on the device in the sampling graph, lets
through exactly the tokens it allows; every token the decode loop samples greedily,
alone and in a batch, is the argmax of that step's own logits masked by llguidance's
numpy reference; and constrained rows decoded together give what each gives alone."""

from __future__ import annotations

import json
from unittest import mock

import jsonschema
import mlx.core as mx
import numpy as np
import pytest
from llguidance.numpy import apply_token_bitmask_inplace

from benchmarks.constraints import UNFORCED_SCHEMA
from engine.constraints.masking import allows, apply_masks, metal_available
from engine.constraints.row import RowConstraint
from engine.constraints.sources import json_schema_constraint
from engine.runtime.batch import DecodeBatch
from engine.runtime.sampling import end_token_ids
from engine.types import ChatRequest, SamplingSettings, StopReason

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2},
    },
    "required": ["name", "age", "color", "tags"],
    "additionalProperties": False,
}
VOCABS = ["49k", "262k"]


@pytest.fixture(params=VOCABS)
def vocab_engine(request):
    """The tiny model with one of the two vocabularies, on its session engine."""
    name = "tiny_engine" if request.param == "49k" else "tiny262k_engine"
    return request.getfixturevalue(name)


def _walk_masks(tokenizer, schema: dict, steps: int, seed: int) -> list[np.ndarray]:
    """The masks of a reply under `schema`, each token a random one the mask allows."""
    ends = end_token_ids(tokenizer)
    row = RowConstraint(tokenizer, json_schema_constraint(schema), ends, on_pool=False)
    step = row.collect()
    rng = np.random.default_rng(seed)
    masks = []
    while step.mask is not None and len(masks) < steps:
        masks.append(step.mask.copy())
        bits = np.unpackbits(step.mask.view(np.uint8), bitorder="little").astype(bool)
        bits[sorted(ends)] = False
        allowed = np.flatnonzero(bits)
        if not allowed.size:
            break
        row.advance(int(rng.choice(allowed)))
        step = row.collect()
    return masks


def _vocab(engine) -> int:
    return engine.run(lambda loaded: int(loaded.model.model.embed_tokens.weight.shape[0])).result()


def test_device_masks_let_through_exactly_the_allowed_tokens(vocab_engine):
    """Real masks (structural positions, where few tokens are allowed, and a free string,
    where nearly all are), one row and four: the masked logits are the numpy reference's
    bit for bit, and finite exactly where the mask allows."""
    vocab = _vocab(vocab_engine)

    def check(loaded):
        tokenizer = loaded.tokenizer
        masks = _walk_masks(tokenizer, FORM, 24, seed=1) + _walk_masks(
            tokenizer, UNFORCED_SCHEMA, 6, seed=2
        )
        counts = []
        rng = np.random.default_rng(3)
        for i, words in enumerate(masks):
            rows = [words, None, masks[(i + 1) % len(masks)], words] if i % 2 else [words]
            logits = rng.normal(size=(len(rows), vocab)).astype(np.float32) * 4
            got = np.array(apply_masks(mx.array(logits), rows, use_metal=metal_available()))
            for r, mask in enumerate(rows):
                want = logits[r : r + 1].copy()
                if mask is not None:
                    apply_token_bitmask_inplace(want, mask[None].astype(np.int32))
                assert np.array_equal(got[r].view(np.uint32), want[0].view(np.uint32)), (i, r)
                if mask is not None:
                    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab]
                    finite = np.isfinite(got[r])
                    assert np.array_equal(finite, bits.astype(bool))
                    probe = rng.integers(0, vocab, 64).tolist()
                    assert [allows(mask, t) for t in probe] == finite[probe].tolist()
                    counts.append(int(bits.sum()))
        return counts

    counts = vocab_engine.run(check).result()
    assert min(counts) < 100 and max(counts) > vocab // 2  # narrow and wide masks both seen


def _recorded(engine, requests: list[ChatRequest]):
    """Run `requests` together, recording each step's logits, masks and samples as the
    loop's `_sample` saw and made them."""
    original = DecodeBatch._sample
    steps: list[tuple[np.ndarray, list[np.ndarray | None], np.ndarray]] = []

    def recording(self, logits, masks):
        raw = np.array(logits.astype(mx.float32))
        kept = None if masks is None else [None if m is None else m.copy() for m in masks]
        y = original(self, logits, masks)
        steps.append((raw, kept or [None] * raw.shape[0], np.array(y)))
        return y

    with mock.patch.object(DecodeBatch, "_sample", recording):
        results = [h.result(timeout=600) for h in engine.submit_many(requests)]
    return results, steps


@pytest.mark.parametrize("rows", [1, 4])
def test_every_greedy_token_is_the_reference_masked_argmax(vocab_engine, rows):
    """The loop's samples, step by step, against llguidance's numpy masking of the very
    logits the step computed: the same token for every row at every step (free rows, and
    rows whose next token is forced, take the plain argmax)."""
    settings = SamplingSettings(temperature=0.0, max_tokens=40)
    form = json_schema_constraint(FORM, "form")
    free_text = json_schema_constraint(UNFORCED_SCHEMA, "free text")
    specs = [form, free_text, None, form][:rows]
    requests = [
        ChatRequest(
            [{"role": "user", "content": f"Fill in the form, {i}."}], settings, constraint=c
        )
        for i, c in enumerate(specs)
    ]
    results, steps = _recorded(vocab_engine, requests)
    assert all(r.error is None for r in results), [r.error for r in results]
    masked_steps = 0
    for raw, masks, chosen in steps:
        for r, mask in enumerate(masks):
            want = raw[r : r + 1].copy()
            if mask is not None:
                apply_token_bitmask_inplace(want, mask[None].astype(np.int32))
                masked_steps += 1
            assert int(chosen[r]) == int(np.argmax(want[0]))
    assert masked_steps >= 5 * sum(spec is not None for spec in specs)
    for result, spec in zip(results, specs, strict=True):
        if spec is form and result.stop_reason is StopReason.EOS:
            jsonschema.validate(json.loads(result.text), FORM)


def _forget_prompts(engine) -> None:
    engine.run(lambda _: engine.prompt_cache.clear()).result()


def test_constrained_rows_together_give_what_each_gives_alone(vocab_engine):
    settings = SamplingSettings(temperature=0.0, max_tokens=32)
    specs = [json_schema_constraint(FORM, "form"), json_schema_constraint(UNFORCED_SCHEMA)]
    requests = [
        ChatRequest([{"role": "user", "content": f"Row {i}, as JSON."}], settings, constraint=c)
        for i, c in enumerate(specs * 2)
    ]
    alone = []
    for request in requests:  # every run computes its prompt afresh, as together
        _forget_prompts(vocab_engine)
        alone.append(vocab_engine.chat(request))
    _forget_prompts(vocab_engine)
    together = [h.result(timeout=600) for h in vocab_engine.submit_many(requests)]
    for batched, single in zip(together, alone, strict=True):
        assert batched.error is None and single.error is None
        assert batched.text == single.text
        assert batched.stats.generated_tokens == single.stats.generated_tokens


def test_rows_advanced_together_get_what_each_gets_alone(vocab_engine):
    """Several rows' tokens consumed in one job, their masks filled at once by
    llguidance's executor: each row's step (forced tokens, mask, count) is the one it gets
    advanced alone; a row whose token its grammar rejects fails alone."""
    from engine.constraints import ConstraintError

    tokenizer = vocab_engine.run(lambda loaded: loaded.tokenizer).result()
    ends = end_token_ids(tokenizer)
    specs = [json_schema_constraint(FORM), json_schema_constraint(UNFORCED_SCHEMA)] * 2

    def rows():
        made = [RowConstraint(tokenizer, spec, ends) for spec in specs]
        return made, [row.collect() for row in made]

    together, firsts = rows()
    alone, _ = rows()
    rng = np.random.default_rng(4)
    for _ in range(12):
        tokens = []
        for step in firsts:
            bits = np.unpackbits(step.mask.view(np.uint8), bitorder="little").astype(bool)
            bits[sorted(ends)] = False
            tokens.append(int(rng.choice(np.flatnonzero(bits))))
        RowConstraint.advance_rows(list(zip(together, tokens, strict=True)))
        firsts = []
        for row, single, token in zip(together, alone, tokens, strict=True):
            single.advance(token)
            want, got = single.collect(), row.collect()
            assert got.ff == want.ff and got.stopped == want.stopped
            assert got.allowed == want.allowed and np.array_equal(got.mask, want.mask)
            firsts.append(got)
        if any(step.stopped or step.mask is None for step in firsts):
            break
    # a token the grammar rejects: that row fails, the other row goes on
    good, bad = (RowConstraint(tokenizer, json_schema_constraint(FORM), ends) for _ in range(2))
    first = good.collect()
    bad.collect()
    bits = np.unpackbits(first.mask.view(np.uint8), bitorder="little").astype(bool)
    refused = int(np.flatnonzero(~bits)[0])
    RowConstraint.advance_rows([(good, int(np.flatnonzero(bits)[0])), (bad, refused)])
    assert good.collect().error is None
    with pytest.raises(ConstraintError):
        bad.collect()
