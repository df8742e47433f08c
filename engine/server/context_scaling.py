"""Context scaling (`--report-context N`): token counts reported as if the model read N
tokens, as oMLX does for Claude Code.

An agent built for a 200k-token model decides when to compact its conversation from the
token counts the server reports (usage, count_tokens). On a 32k model it would never
compact before the prompt no longer fits. With N = 200000, every count a reply or a
count_tokens call reports is multiplied by N / the model's context, so the agent sees its
window fill at the rate the real one does and compacts in time.

The trade-off: the reported counts are no longer token counts. Cost estimates, tokens per
second computed from usage and anything else that reads them are off by the same factor
(Corral's own `corral` figures, the request log and the context-length errors stay real),
and a `max_tokens` the agent sends is still read as real tokens.
"""

from __future__ import annotations

from dataclasses import replace

from engine.types import ChatResult


def scale_factor(report_context: int | None, context_length: int | None) -> float:
    """How much larger reported counts are than real ones (1.0: not scaled)."""
    if not report_context or not context_length:
        return 1.0
    return report_context / context_length


def reported(tokens: int, factor: float) -> int:
    return tokens if factor == 1.0 else round(tokens * factor)


def scaled_result(result: ChatResult, factor: float) -> ChatResult:
    """`result` with the token counts a client reads scaled by `factor`."""
    if factor == 1.0:
        return result
    s = result.stats
    stats = replace(
        s,
        prompt_tokens=reported(s.prompt_tokens, factor),
        cached_tokens=reported(s.cached_tokens, factor),
        generated_tokens=reported(s.generated_tokens, factor),
        thinking_tokens=reported(s.thinking_tokens, factor),
        answer_tokens=reported(s.answer_tokens, factor),
    )
    return replace(result, stats=stats)
