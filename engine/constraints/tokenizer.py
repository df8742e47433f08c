"""llguidance tokenizers for loaded models, built once per tokenizer and set of end tokens.

Building an LLTokenizer from a Hugging Face tokenizer takes ~1 s, so it is cached. Every
end-of-reply token of the model and its chat template becomes one of llguidance's EOS
tokens: the matcher then allows each of them exactly when the grammar accepts, and
consuming any of them stops it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from functools import cache
from typing import Any

import llguidance

from engine.constraints import ConstraintError
from engine.constraints.closing import ClosingPolicy
from engine.prompt.tokenizer import ModelTokenizer

_lock = threading.Lock()
_by_tokenizer: weakref.WeakKeyDictionary[Any, dict[tuple[int, ...], llguidance.LLTokenizer]] = (
    weakref.WeakKeyDictionary()
)


def ll_tokenizer(tokenizer: Any, ends: Iterable[int]) -> llguidance.LLTokenizer:
    """The LLTokenizer for `tokenizer` (a ModelTokenizer, an mlx-lm TokenizerWrapper or a HF
    fast tokenizer).

    `ends` are the token ids that end a reply; with none, the tokenizer's own EOS is used.
    """
    key = tuple(sorted(set(ends)))
    tok = ModelTokenizer.of(tokenizer)
    with _lock:
        per_ends = _by_tokenizer.setdefault(tok.source, {})
        found = per_ends.get(key)
        if found is None:
            found = per_ends[key] = _build(tok.hf, list(key))
    ClosingPolicy.remember(tok.source, found)  # its closing policy lives as long as it does
    return found


def _build(hf: Any, ends: list[int]) -> llguidance.LLTokenizer:
    import llguidance.hf

    try:
        return llguidance.hf.from_tokenizer(hf, eos_token=ends or None)
    except (ValueError, TypeError) as exc:
        raise ConstraintError(
            f"constraints need a fast (Rust) Hugging Face tokenizer; this model's "
            f"{type(hf).__name__} cannot be used ({exc})"
        ) from exc


@cache
def byte_tokenizer() -> llguidance.LLTokenizer:
    """A 256-byte tokenizer for checking grammars when no model is loaded."""
    return llguidance.LLTokenizer("byte")
