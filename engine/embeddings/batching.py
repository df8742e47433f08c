"""Which inputs share a forward pass: longest first, as many as fit a budget of padded
tokens, so that short inputs are not padded to a long one's length and no batch's
attention grows past what a long input alone needs."""

from __future__ import annotations

# Padded tokens per forward pass, and inputs per pass at most.
BATCH_TOKENS = 16384
BATCH_INPUTS = 64


def plan_batches(
    lengths: list[int], budget: int = BATCH_TOKENS, most: int = BATCH_INPUTS
) -> list[list[int]]:
    """Indices into `lengths`, grouped into batches: sorted longest first, each batch as
    large as `budget` padded tokens and `most` inputs allow (one input at least)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches:
            batch = batches[-1]
            longest = lengths[batch[0]]  # sorted: the first is the longest
            if len(batch) < most and (len(batch) + 1) * longest <= budget:
                batch.append(i)
                continue
        batches.append([i])
    return batches
