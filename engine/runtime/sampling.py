"""Turn SamplingSettings into samplers and logits processors, and find end tokens.

A reply samples with its own PRNG keys rather than MLX's global generator: the token at
each position is drawn with a key fixed by the reply's seed and that position. Replies
decoded side by side draw the same tokens as they would alone, and a reply draws the same
tokens whether or not speculative decoding verified a draft at that position
(`engine.runtime.speculative`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.sample_utils import (
    apply_min_p,
    apply_top_k,
    apply_top_p,
    make_logits_processors,
)

from engine.prompt.tokenizer import ModelTokenizer
from engine.types import SamplingSettings

LogitsProcessor = Callable[[mx.array, mx.array], mx.array]

# End-of-turn markers of common chat templates; a model ends its reply with any of them.
_END_MARKERS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "</s>",
    "<|return|>",  # gpt-oss ends its final message so, and a call with <|call|>
    "<|call|>",
)


class RowSampler:
    """How one reply picks its next token from logits (1, vocab): the argmax when greedy,
    else mlx-lm's filters (top-p, min-p, top-k, in mlx-lm's order) on the log-probabilities
    and a draw with the key of the token's position (`position_key`)."""

    def __init__(self, settings: SamplingSettings) -> None:
        self.greedy = settings.temperature == 0
        self._scale = 0.0 if self.greedy else 1.0 / settings.temperature
        self._filters: list[Callable[[mx.array], mx.array]] = []
        if 0 < settings.top_p < 1.0:
            self._filters.append(lambda x: apply_top_p(x, settings.top_p))
        if settings.min_p:
            self._filters.append(lambda x: apply_min_p(x, settings.min_p))
        if settings.top_k > 0:
            self._filters.append(lambda x: apply_top_k(x, settings.top_k))
        self.seed = generation_seed(settings)

    def __call__(self, logits: mx.array, position: int) -> mx.array:
        """The token at `position` (of the whole sequence, prompt included), lazily."""
        if self.greedy:
            return mx.argmax(logits, axis=-1)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        for keep in self._filters:
            logprobs = keep(logprobs)
        key = mx.random.key(position_key(self.seed, position))
        return mx.random.categorical(logprobs * self._scale, key=key)


def position_key(seed: int, position: int) -> int:
    """A 64-bit PRNG seed for the token at `position` of a reply seeded with `seed`
    (splitmix64 of both: keys of nearby seeds and positions are unrelated, so seed + i
    alternatives never share draws)."""
    x = (seed * 0x9E3779B97F4A7C15 + position * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % 2**64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % 2**64
    return x ^ (x >> 31)


def build_processors(settings: SamplingSettings) -> list[LogitsProcessor]:
    """Logits processors (repetition penalty) applied before sampling."""
    if settings.repetition_penalty == 1.0:
        return []
    return make_logits_processors(
        repetition_penalty=settings.repetition_penalty,
        repetition_context_size=settings.repetition_context,
    )


def generation_seed(settings: SamplingSettings) -> int:
    """The seed a reply samples with: the user's, or a fresh random one."""
    if settings.seed is not None:
        return settings.seed
    return int.from_bytes(os.urandom(4), "little")


def end_token_ids(tokenizer: Any) -> set[int]:
    """Every token that ends a reply: the model's EOS ids plus its template's end markers."""
    tok = ModelTokenizer.of(tokenizer)
    ids = tok.eos_token_ids
    template = tok.chat_template or ""
    for marker in _END_MARKERS:
        if marker in template or not template:
            if (token_id := tok.token_id(marker)) is not None:
                ids.add(token_id)
    # ChatML models also end documents with <|endoftext|>, which templates never write.
    if "<|im_end|>" in template and (token_id := tok.token_id("<|endoftext|>")) is not None:
        ids.add(token_id)
    return ids
