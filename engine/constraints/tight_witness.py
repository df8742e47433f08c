"""A witness for a narrowing rewrite: one value llguidance produces under the rewritten
schema that the schema as written accepts.

The tight rewrite narrows `not`, overlapping `oneOf` and `contains` where it cannot be
exact (tight_enforce.py); a narrowing can leave nothing that the rest of the schema allows
(two branches each made to exclude the other's only values). Before such a rewrite is
kept, this walks the rewritten schema's grammar byte by byte (closing bytes first, so the
walk ends) and checks the text with jsonschema against the schema as written: a valid
text shows a reply under the rewritten schema can be valid; no text, or an invalid one,
and the narrowing is dropped.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import numpy as np
from llguidance import LLMatcher, LLTokenizer

__all__ = ["witness"]

_STEPS = 300
_ATTEMPTS = 8  # one walk in the preferred order, then random ones (seeded: repeatable)
_CLOSING = b'"}]'  # bytes that end a value: taken whenever allowed, so walks end
_PREFERRED = b"0,:1a-.tfn[{ "
_TOKENIZER: LLTokenizer | None = None


def witness(rewritten: Any, original: Any) -> Any | None:
    """A value generated under `rewritten` (compiled as Corral compiles schemas) that
    `original` accepts; None if the walk finds none."""
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = LLTokenizer("byte")
    tok = _TOKENIZER
    try:
        grammar = LLMatcher.grammar_from_json_schema(
            rewritten, defaults={"whitespace_flexible": False, "lenient": True}
        )
    except ValueError:
        return None
    cls = jsonschema.validators.validator_for(original, jsonschema.Draft202012Validator)
    validator = cls(original)
    rng = random.Random(0)
    for attempt in range(_ATTEMPTS):
        value = _walk(LLMatcher(tok, grammar, log_level=0), rng if attempt else None)
        if value is not _NOTHING and validator.is_valid(value):
            return value
    return None


_NOTHING = object()


def _walk(matcher: LLMatcher, rng: random.Random | None) -> Any:
    """The JSON value of one walk through the grammar: closing bytes first, then (with
    `rng`) a random allowed byte, else the preferred order; `_NOTHING` at a dead end."""
    if matcher.is_error():
        return _NOTHING
    text = bytearray()
    for _ in range(_STEPS):
        if matcher.is_accepting():
            break
        mask = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), np.uint8), bitorder="little")
        if matcher.is_error():
            return _NOTHING
        allowed = [b for b in range(min(256, mask.size)) if mask[b]]
        closing = [b for b in _CLOSING if b in allowed]
        if not allowed:
            return _NOTHING
        if closing:
            token = closing[0]
        elif rng is not None:
            token = rng.choice(allowed)
        else:
            token = next((b for b in _PREFERRED if b in allowed), allowed[0])
        if not matcher.consume_token(token):
            return _NOTHING
        text.append(token)
    try:
        return json.loads(text.decode("utf-8"))
    except ValueError:
        return _NOTHING
