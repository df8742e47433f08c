"""Branches of a cached prompt share its prefix's KV state instead of copying it: each
writes only past the branch point, the prefix they share stays bit-for-bit what it was,
every branch decodes exactly as an uncached run would, and the prompt cache counts a
shared block once, keeps it while any entry reads it, and writes shared entries to disk."""

import engine  # noqa: F401  (OpenBLAS before mlx)

# isort: split
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models import cache as mlx_cache
from mlx_lm.models.cache import make_prompt_cache

from engine.memory.attention import supports_shared_prefix
from engine.memory.prompt_cache import PromptCacheTrie, cache_nbytes, own_nbytes
from engine.memory.shared_prefix import (
    FIRST_STEP,
    MAX_SEGMENTS,
    SharedPrefixKVCache,
    blocks_of,
    freeze,
    segmented_attention,
    share,
)

MiB = 1 << 20
SHARED = 40  # tokens the branches share
STORED = [100 + (7 * i) % 3000 for i in range(64)]  # the stored prompt (its reply included)


def _greedy(model, cache, prompt: list[int], steps: int) -> tuple[list[int], np.ndarray]:
    """Feed `prompt` into `cache`, then pick `steps` tokens greedily one at a time (each fed
    but the last); the tokens, and the logits the first was picked from."""
    logits = model(mx.array([prompt]), cache=cache)[0, -1]
    first = np.array(logits)
    out: list[int] = []
    while len(out) < steps:
        if out:
            logits = model(mx.array([out[-1:]]), cache=cache)[0, -1]
        out.append(int(mx.argmax(logits).item()))
    return out, first


def _uncached(model, prompt: list[int], steps: int) -> tuple[list[int], np.ndarray]:
    return _greedy(model, make_prompt_cache(model), prompt, steps)


def _prefix_arrays(cache, n: int) -> list[np.ndarray]:
    """The keys and values of the first n tokens of every layer, as numpy copies."""
    out = []
    for c in cache:
        keys, values = c.parts()
        for run in (keys, values):
            out.append(np.array(mx.concatenate(run, axis=2)[..., :n, :]))
    return out


def test_branches_decode_on_without_changing_the_prefix_they_share(tiny_model) -> None:
    model, _ = tiny_model
    trie = PromptCacheTrie(256 * MiB)
    stored = make_prompt_cache(model)
    model(mx.array([STORED]), cache=stored)
    trie.store(STORED, stored)

    a = STORED[:SHARED] + [501, 502, 503]  # an edit of an earlier turn
    b = STORED[:SHARED] + [601, 602]  # another, diverging at the same point
    cache_a, n_a = trie.fetch(model, a)
    cache_b, n_b = trie.fetch(model, b)
    assert n_a == n_b == SHARED
    s = trie.stats()
    assert (s.shared_branches, s.copies) == (2, 0)
    assert all(isinstance(c, SharedPrefixKVCache) for c in cache_a + cache_b)
    assert blocks_of(cache_a) == blocks_of(cache_b) == blocks_of(trie.entries()[0][1])
    before = _prefix_arrays(cache_a, SHARED)

    # Both branches decode on, interleaved, and so does the stored entry (the next turn of
    # its own conversation, extending it in place): three writers past the shared prefix.
    going = STORED + [701, 702]
    entry, n = trie.fetch(model, going)
    assert n == len(STORED) and isinstance(entry[0], SharedPrefixKVCache)
    got_a, first_a = _greedy(model, cache_a, a[SHARED:], 4)
    got_b, first_b = _greedy(model, cache_b, b[SHARED:], 4)
    got_e, first_e = _greedy(model, entry, going[n:], 4)
    more_a, _ = _greedy(model, cache_a, [got_a[-1]], 4)

    for kept, now in zip(before, _prefix_arrays(cache_b, SHARED), strict=True):
        assert np.array_equal(kept, now)  # bit for bit: nothing wrote into the shared prefix
    for got, first, prompt in ((got_a, first_a, a), (got_b, first_b, b), (got_e, first_e, going)):
        want, want_first = _uncached(model, prompt, 4)
        assert got == want
        np.testing.assert_allclose(first, want_first, atol=1e-4, rtol=1e-5)
    assert got_a + more_a == _uncached(model, a, 8)[0]  # and on after the others wrote
    # each branch's own buffer grows from a few positions, not mlx-lm's 256 at once
    assert cache_b[0].tail.keys.shape[2] == FIRST_STEP


def test_a_shared_block_is_counted_once_and_kept_while_an_entry_reads_it(tiny_model) -> None:
    model, _ = tiny_model
    trie = PromptCacheTrie(256 * MiB)
    stored = make_prompt_cache(model)
    model(mx.array([STORED]), cache=stored)
    plain = cache_nbytes(stored)
    trie.store(STORED, stored)
    branch = STORED[:SHARED] + [501, 502]
    cache, n = trie.fetch(model, branch)
    model(mx.array([branch[n:]]), cache=cache)
    trie.store(branch, cache)

    s = trie.stats()
    # The stored entry's buffers (now a block both read) once, plus the branch's own part.
    assert s.entries == 2 and s.bytes == plain + own_nbytes(cache)
    assert own_nbytes(cache) < plain < cache_nbytes(cache) + plain  # what copies would take

    # The first conversation goes on elsewhere (handed out, never given back): the branch
    # still reads the block, which stays counted and serves it.
    taken, _ = trie.fetch(model, STORED + [9])
    s = trie.stats()
    assert s.entries == 1 and s.bytes == plain + own_nbytes(cache)
    got, n = trie.fetch(model, branch + [77])
    assert n == len(branch)
    want = make_prompt_cache(model)
    np.testing.assert_allclose(
        np.array(model(mx.array([[77]]), cache=got)[0, -1]),
        np.array(model(mx.array([branch + [77]]), cache=want)[0, -1]),
        atol=1e-4,
        rtol=1e-5,
    )
    trie.store(branch + [77], got)
    trie.budget_bytes = 0  # the last reader goes: nothing is counted any more
    assert (trie.stats().entries, trie.stats().bytes) == (0, 0)
    del taken


def test_a_shared_entry_goes_to_disk_and_comes_back(tiny_model, tmp_path: Path) -> None:
    from engine.memory.disk_tier import DiskTier
    from engine.memory.tiered import TieredPromptCache

    model, _ = tiny_model
    store = TieredPromptCache(PromptCacheTrie(256 * MiB), DiskTier(tmp_path / "id", "id"))
    cache, _ = store.fetch(model, STORED)
    model(mx.array([STORED]), cache=cache)
    store.store(STORED, cache)
    branch = STORED[:SHARED] + [501 + i for i in range(30)]
    cache, n = store.fetch(model, branch)
    assert n == SHARED and isinstance(cache[0], SharedPrefixKVCache)
    model(mx.array([branch[n:]]), cache=cache)
    store.store(branch, cache)
    store.close()  # writes both entries, the branch as the tokens it holds

    again = TieredPromptCache(PromptCacheTrie(256 * MiB), DiskTier(tmp_path / "id", "id"))
    try:
        query = branch + [88]
        got, n = again.fetch(model, query)
        assert n == len(branch) and again.stats().disk_hits == 1
        want = make_prompt_cache(model)
        np.testing.assert_allclose(
            np.array(model(mx.array([[88]]), cache=got)[0, -1]),
            np.array(model(mx.array([query]), cache=want)[0, -1]),
            atol=1e-4,
            rtol=1e-5,
        )
    finally:
        again.close()


def test_a_branch_of_a_branch_reads_each_run_once_and_compacts_past_the_limit(
    tiny_model,
) -> None:
    model, _ = tiny_model
    cache = make_prompt_cache(model)
    model(mx.array([STORED[:8]]), cache=cache)
    for i in range(MAX_SEGMENTS + 2):  # each freeze adds the tokens fed since as a run
        freeze(cache)
        assert len(cache[0].prefix_keys) == i + 1
        model(mx.array([STORED[8 + 4 * i : 12 + 4 * i]]), cache=cache)
    trie = PromptCacheTrie(256 * MiB)
    tokens = STORED[: cache[0].offset]
    trie.store(tokens, cache)
    branch, n = trie.fetch(model, tokens[:-10] + [5, 6])
    assert n == len(tokens) - 10
    assert len(branch[0].prefix_keys) == 1  # compacted: one copy, once
    np.testing.assert_allclose(
        np.array(model(mx.array([[5, 6]]), cache=branch)[0, -1]),
        np.array(model(mx.array([tokens[:-10] + [5, 6]]), cache=make_prompt_cache(model))[0, -1]),
        atol=1e-4,
        rtol=1e-5,
    )


@pytest.mark.parametrize("repeats", [1, 3])
@pytest.mark.parametrize("mask", [None, "causal", "bool", "additive"])
def test_attention_over_runs_is_attention_over_their_concatenation(repeats, mask) -> None:
    rng = np.random.default_rng(0)
    queries = 4 if mask is not None else 1
    q = mx.array(rng.standard_normal((1, 2 * repeats, queries, 16)), dtype=mx.float32)
    k = mx.array(rng.standard_normal((1, 2, 23, 16)), dtype=mx.float32)
    v = mx.array(rng.standard_normal((1, 2, 23, 16)), dtype=mx.float32)
    m = mask
    if mask in ("bool", "additive"):
        allowed = rng.random((1, 1, queries, 23)) > 0.3
        allowed[..., -1] = True
        m = mx.array(allowed) if mask == "bool" else mx.array(np.where(allowed, 0.0, -1e9))
    sinks = mx.array(rng.standard_normal(2 * repeats), dtype=mx.float32)
    for s in (None, sinks):
        want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.25, mask=m, sinks=s)
        runs = [(0, 9), (9, 10), (10, 23)]
        got = segmented_attention(
            q,
            [k[:, :, a:b] for a, b in runs],
            [v[:, :, a:b] for a, b in runs],
            scale=0.25,
            mask=m,
            sinks=s,
        )
        np.testing.assert_allclose(np.array(got), np.array(want), atol=1e-5, rtol=1e-5)


class _OwnAttention:
    """A model with attention of its own: it updates its caches but never reads them
    through Corral's attention."""

    def __init__(self, model) -> None:
        self.layers = model.layers
        self._model = model

    def modules(self):
        return []

    def __call__(self, inputs, cache):
        for c in cache:
            kv = mx.zeros((1, 2, inputs.shape[1], 16))
            c.update_and_fetch(kv, kv)
        return mx.zeros((1, inputs.shape[1], 8))


def test_a_model_that_does_not_read_shared_prefixes_gets_copies(tiny_model) -> None:
    model, _ = tiny_model
    assert supports_shared_prefix(model, lambda c, n: c)
    own = _OwnAttention(model)
    assert not supports_shared_prefix(own, lambda c, n: c)
    trie = PromptCacheTrie(256 * MiB)
    cache = make_prompt_cache(own)
    own(mx.array([STORED]), cache)
    trie.store(STORED, cache)
    branch, n = trie.fetch(own, STORED[:SHARED] + [5])
    assert n == SHARED and type(branch[0]) is mlx_cache.KVCache
    assert (trie.stats().copies, trie.stats().shared_branches) == (1, 0)
    # and a shared cache updated twice without being read refuses, never half-reads
    shared = make_prompt_cache(model)
    model(mx.array([STORED[:4]]), cache=shared)
    freeze(shared)
    layer = share(shared, 4, lambda c, n: c)[0]
    kv = mx.zeros((1, 2, 1, 16))
    layer.update_and_fetch(kv, kv)
    with pytest.raises(RuntimeError, match="does not read"):
        layer.update_and_fetch(kv, kv)
