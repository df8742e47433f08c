"""Turn SamplingSettings into mlx-lm samplers and logits processors, and find end tokens."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.sample_utils import make_logits_processors, make_sampler

from engine.tokenizer import ModelTokenizer
from engine.types import SamplingSettings

Sampler = Callable[[mx.array], mx.array]
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
)


def build_sampler(settings: SamplingSettings) -> Sampler:
    """A sampler over log-probabilities; temperature 0 is greedy."""
    return make_sampler(
        temp=settings.temperature,
        top_p=settings.top_p if settings.top_p < 1.0 else 0.0,
        min_p=settings.min_p,
        top_k=settings.top_k,
    )


def build_processors(settings: SamplingSettings) -> list[LogitsProcessor]:
    """Logits processors (repetition penalty) applied before sampling."""
    if settings.repetition_penalty == 1.0:
        return []
    return make_logits_processors(
        repetition_penalty=settings.repetition_penalty,
        repetition_context_size=settings.repetition_context,
    )


def seed_generation(settings: SamplingSettings) -> int:
    """Seed MLX's generator for this request: the user's seed, or a fresh random one."""
    seed = settings.seed if settings.seed is not None else int.from_bytes(os.urandom(4), "little")
    mx.random.seed(seed)
    return seed


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
