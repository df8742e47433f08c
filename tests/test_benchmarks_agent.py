"""The agent section's exact cache (the reference a turn's reuse overhead is measured
against), on the tiny model: it holds exactly each turn's tokens, the KV state a fresh
prefill of them gives, however the turns share their prefixes. (The whole section replays
minutes of prefill on the default model: the bench runs it, not the tests.)"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from benchmarks.agent import ExactCache


def _fresh_keys(lm: Any, tokens: list[int]) -> np.ndarray:
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(lm.model)
    lm.model(mx.array(tokens)[None], cache=cache)
    return np.array(cache[0].keys[..., : len(tokens), :])


def test_the_exact_cache_holds_each_turn_as_a_fresh_prefill_would(tiny_engine) -> None:
    def check(lm: Any) -> list[tuple[int, int, bool]]:
        exact = ExactCache()
        first = list(range(1000, 1300))
        # a turn that extends the first, one that branches inside it, one that shares nothing
        turns = [
            (first, 0),
            (first + list(range(2000, 2100)), len(first)),
            (first[:120] + list(range(3000, 3050)), 120),
            (list(range(4000, 4080)), 0),
        ]
        seen = []
        for tokens, reusable in turns:
            assert exact.ttft_s(lm, tokens, reusable) > 0
            assert exact.cache is not None
            held = np.array(exact.cache[0].keys[..., : len(tokens), :])
            same = bool(np.allclose(held, _fresh_keys(lm, tokens), atol=1e-4))
            seen.append((exact.cache[0].offset, len(tokens), same))
            assert exact.held == tokens
        return seen

    for offset, length, same in tiny_engine.run(check).result():
        assert offset == length and same, (offset, length)
