"""Recorded tokens (`engine.types.TokenLogprob`) in OpenAI's `logprobs` shapes.

OpenAI's fields describe the distribution each token was sampled from, after the
constraint's mask: `logprob` is the token's, and `top_logprobs` are the tokens the mask
allowed among the N most likely, each renormalised as the mask renormalised the token
(exact without penalties). A forced token has `logprob` 0.0 and itself as its only
alternative. Corral's extension `corral` adds what the model wanted, before the mask:
the token's `model_logprob`, the N most likely tokens with `allowed` flags, the number of
tokens the grammar allowed, and the `forced`, `overridden` and `closing` flags (`closing`:
Corral's closing policy wrote the token, not the model).
"""

from __future__ import annotations

from typing import Any

from engine.types import TokenAlternative, TokenLogprob


def _alternative(alt: TokenAlternative, logprob: float) -> dict[str, Any]:
    return {"token": alt.text, "logprob": logprob, "bytes": list(alt.bytes)}


def _sampled_alternatives(record: TokenLogprob, top: int) -> list[dict[str, Any]]:
    """The allowed ones among the `top` most likely tokens, in the sampled distribution."""
    if record.forced:
        return [{"token": record.text, "logprob": 0.0, "bytes": list(record.bytes)}][:top]
    shift = 0.0 if record.model_logprob is None else record.logprob - record.model_logprob
    return [_alternative(a, a.logprob + shift) for a in record.top[:top] if a.allowed]


def corral_token(record: TokenLogprob) -> dict[str, Any]:
    """Corral's extension of one token's entry: the figures before the mask, and flags."""
    return {
        "token_id": record.token,
        "model_logprob": record.model_logprob,
        "allowed": record.allowed,
        "forced": record.forced,
        "overridden": record.overridden,
        "closing": record.closing,
        "top": [
            {
                "token": a.text,
                "token_id": a.token,
                "logprob": a.logprob,
                "bytes": list(a.bytes),
                "allowed": a.allowed,
            }
            for a in record.top
        ],
    }


def chat_entry(record: TokenLogprob, top: int) -> dict[str, Any]:
    """One entry of a chat choice's `logprobs.content`, with `top` alternatives at most."""
    return {
        "token": record.text,
        "logprob": record.logprob,
        "bytes": list(record.bytes),
        "top_logprobs": _sampled_alternatives(record, top),
        "corral": corral_token(record),
    }


def chat_logprobs(records: list[TokenLogprob] | None, top: int) -> dict[str, Any] | None:
    """A chat choice's `logprobs` (None when the request did not ask)."""
    if records is None:
        return None
    return {"content": [chat_entry(r, top) for r in records], "refusal": None}


def completion_logprobs(
    records: list[TokenLogprob] | None, top: int, offset: int = 0
) -> dict[str, Any] | None:
    """A text completion choice's `logprobs` (the legacy shape: parallel lists), its text
    offsets counted from `offset`."""
    if records is None:
        return None
    offsets = []
    for record in records:
        offsets.append(offset)
        offset += len(record.text)
    return {
        "tokens": [r.text for r in records],
        "token_logprobs": [r.logprob for r in records],
        "top_logprobs": [
            {a["token"]: a["logprob"] for a in _sampled_alternatives(r, top)} for r in records
        ],
        "text_offset": offsets,
        "corral": [corral_token(r) for r in records],
    }
