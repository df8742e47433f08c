"""Quantized KV caches (`kv_bits`): smaller entries, replies that agree with full precision,
prefixes reused, and requests served side by side one row at a time (mlx-lm cannot merge
quantized caches into a batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.types import ChatRequest, SamplingSettings

PROMPTS = [
    "Name three colours.",
    "What is two plus two?",
    "Write a haiku about rain.",
    "Say hello in French.",
    "List the days of the week.",
    "Describe a cat in one line.",
]


def _request(text: str, max_tokens: int = 8) -> ChatRequest:
    return ChatRequest(
        messages=[
            {"role": "system", "content": "You are terse. " * 10},
            {"role": "user", "content": text},
        ],
        sampling=SamplingSettings(temperature=0.0, max_tokens=max_tokens),
    )


@pytest.fixture(scope="module")
def engines(tiny_model_dir: Path):
    from engine.engine import Engine

    made = {}
    for bits in (None, 8):
        eng = Engine(kv_bits=bits, speculative=False)
        eng.load_model(str(tiny_model_dir)).result()
        made[bits] = eng
    yield made
    for eng in made.values():
        eng.close()


def test_kv8_greedy_replies_agree_with_full_precision(engines) -> None:
    full = [engines[None].chat(_request(p)).text for p in PROMPTS]
    kv8 = [engines[8].chat(_request(p)).text for p in PROMPTS]
    agree = sum(a == b for a, b in zip(full, kv8, strict=True)) / len(PROMPTS)
    assert agree >= 0.5, (full, kv8)
    assert engines[8].snapshot.cache.kv_bits == 8


def test_kv8_entries_take_less_memory_and_are_reused(engines) -> None:
    sizes = {}
    for bits, eng in engines.items():
        first = eng.chat(_request("Count to five."))
        follow = ChatRequest(
            messages=[
                *_request("Count to five.").messages,
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": "Now to ten."},
            ],
            sampling=SamplingSettings(temperature=0.0, max_tokens=4),
        )
        second = eng.chat(follow)
        assert second.stats.cached_tokens >= first.stats.prompt_tokens - 4
        sizes[bits] = eng.run(lambda _, e=eng: _bytes_per_position(e)).result()
    # float32 tiny model: 8 bits plus a scale and bias per group of 32 values
    assert sizes[8] < 0.4 * sizes[None]


def _bytes_per_position(eng) -> float:
    """KV bytes per token position of the entry stored last (the trie counts blocks that
    full-precision branches share once, so its total says less about one entry's size)."""
    from engine.memory.prompt_cache import cache_nbytes

    trie = getattr(eng.prompt_cache, "trie", eng.prompt_cache)
    _, cache = trie.entries()[0]
    layer = cache[0]
    keys = getattr(layer, "keys", None)
    keys = keys[0] if isinstance(keys, tuple) else keys  # quantized: (values, scales, biases)
    width = keys.shape[2] if keys is not None else layer.capacity  # a shared-prefix layer
    return cache_nbytes(cache) / width


def test_kv8_requests_side_by_side_run_one_row_at_a_time(engines) -> None:
    from engine.memory.prompt_cache import PromptCacheTrie
    from engine.runtime.batch import can_batch

    eng = engines[8]
    cache = eng.run(lambda loaded: eng.prompt_cache.fetch(loaded.model, [1, 2, 3])[0]).result()
    assert not can_batch(cache)  # mlx-lm's QuantizedKVCache has no merge: no shared batch
    assert isinstance(eng.prompt_cache, PromptCacheTrie)
    alone = [eng.chat(_request(p)).text for p in PROMPTS[:3]]
    handles = eng.submit_many([_request(p) for p in PROMPTS[:3]])
    together = [h.result().text for h in handles]
    assert together == alone


def test_kv8_speculative_decoding_gives_the_same_greedy_reply(tiny_model_dir: Path) -> None:
    from engine.engine import Engine

    eng = Engine(kv_bits=8, speculative=True, learn_pass_cost=False)  # drafts whatever the load
    try:
        eng.load_model(str(tiny_model_dir)).result()
        # a repetitive prompt gives prompt lookup drafts to verify
        text = "one two three four " * 8
        with_spec = eng.chat(_request(f"Repeat: {text}", max_tokens=24))
        eng.set_speculative(False)
        without = eng.chat(_request(f"Repeat: {text}", max_tokens=24))
    finally:
        eng.close()
    assert with_spec.stats.drafted_tokens > 0  # the quantized cache took the rollbacks
    assert with_spec.text == without.text


def test_a_prompt_beyond_the_kv_budget_is_refused_with_the_numbers(tiny_model_dir: Path) -> None:
    from engine.engine import Engine

    request = _request("Summarise this: " + "the cache holds tokens. " * 12)
    answers = {}
    for bits in (None, 8):
        # tiny model, float32: 1 KB of KV per token, 320 bytes at 8 bits; room for 64 / 204
        eng = Engine(kv_budget_bytes=64 << 10, kv_bits=bits)
        try:
            eng.load_model(str(tiny_model_dir)).result()
            answers[bits] = eng.chat(request)
        finally:
            eng.close()
    refused = answers[None]
    assert refused.error_code == "context_length_exceeded"
    assert "1.0 KB per token at full precision" in (refused.error or "")
    assert "room for 64 tokens" in (refused.error or "")
    assert "--kv-bits" in (refused.error or "")
    assert answers[8].error is None and answers[8].stats.prompt_tokens > 64
