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
from typing import Any

import jsonschema
import numpy as np
from llguidance import LLMatcher, LLTokenizer

__all__ = ["witness"]

_STEPS = 400
# Bytes tried first: those that end a value, then short digits and letters.
_PREFERRED = b'"}]0,:1a-.tfn[{ '
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
    matcher = LLMatcher(tok, grammar, log_level=0)
    if matcher.is_error():
        return None
    order = list(_PREFERRED) + [b for b in range(256) if b not in _PREFERRED]
    text = bytearray()
    for _ in range(_STEPS):
        if matcher.is_accepting():
            break
        mask = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), np.uint8), bitorder="little")
        if matcher.is_error():
            return None
        token = next((b for b in order if b < mask.size and mask[b]), None)
        if token is None or not matcher.consume_token(token):
            return None
        text.append(token)
    try:
        value = json.loads(text.decode("utf-8"))
    except ValueError:
        return None
    cls = jsonschema.validators.validator_for(original, jsonschema.Draft202012Validator)
    return value if cls(original).is_valid(value) else None
