"""Turn SamplingSettings into mlx-lm samplers and logits processors, and find end tokens."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.sample_utils import make_logits_processors, make_sampler

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


def _token_id(hf: Any, token: str) -> int | None:
    """The id of `token` if it is one token of the vocabulary (no 49k-entry vocab copy)."""
    if not hasattr(hf, "convert_tokens_to_ids"):
        return None
    token_id = hf.convert_tokens_to_ids(token)
    if isinstance(token_id, int) and hf.convert_ids_to_tokens(token_id) == token:
        return token_id
    return None  # unknown tokens map to the unk id, whose text differs


def end_token_ids(tokenizer: Any) -> set[int]:
    """Every token that ends a reply: the model's EOS ids plus its template's end markers."""
    ids = set(getattr(tokenizer, "eos_token_ids", set()) or set())
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    template = getattr(tokenizer, "chat_template", None) or ""
    for marker in _END_MARKERS:
        if marker in template or not template:
            if (token_id := _token_id(hf, marker)) is not None:
                ids.add(token_id)
    # ChatML models also end documents with <|endoftext|>, which templates never write.
    if "<|im_end|>" in template and (token_id := _token_id(hf, "<|endoftext|>")) is not None:
        ids.add(token_id)
    return ids
