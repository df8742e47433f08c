"""The token trie serves prompts from cached KV state exactly as a full prefill would."""

import random

import engine  # noqa: F401  (OpenBLAS before mlx)

# isort: split
import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import (
    ConcatenateKVCache,
    QuantizedKVCache,
    RotatingKVCache,
    make_prompt_cache,
)

from engine.memory.prompt_cache import PromptCacheTrie, cache_length, cache_nbytes, own_nbytes
from engine.memory.shared_prefix import blocks_of

SYSTEM = "You are a concise assistant who answers questions about the solar system."
MiB = 1 << 20


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model


def chat(tokenizer, *turns: str, system: str = SYSTEM) -> list[int]:
    """Prompt tokens for alternating user/assistant turns, ending with an assistant header."""
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True))


def lcp(a: list[int], b: list[int]) -> int:
    diff = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(diff, min(len(a), len(b)))


def encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def run(model, cache, tokens: list[int]) -> np.ndarray:
    """Feed `tokens` into `cache`; the logits of the last one (the only ones computed: the
    49k-wide head over every position would dominate the test's time)."""
    hidden = model.model(mx.array([tokens]), cache=cache)[:, -1:]
    logits = model.model.embed_tokens.as_linear(hidden)[0, -1]  # tied embeddings
    mx.eval(logits)
    return np.array(logits)


def scratch(model, tokens: list[int], make=make_prompt_cache) -> np.ndarray:
    return run(model, make(model), tokens)


def scratch_cache(model, tokens: list[int]):
    cache = make_prompt_cache(model)
    run(model, cache, tokens)
    return cache


def serve(
    trie,
    model,
    prompt: list[int],
    reply: list[int] | None = None,
    make=make_prompt_cache,
    atol: float = 1e-4,
):
    """One request: fetch, check the logits against a full prefill, feed the reply, store."""
    cache, n = trie.fetch(model, prompt)
    assert 0 <= n <= len(prompt) - 1
    np.testing.assert_allclose(
        run(model, cache, prompt[n:]), scratch(model, prompt, make), atol=atol, rtol=1e-5
    )
    full = prompt + (reply or [])
    if reply:
        run(model, cache, reply)
    trie.store(full, cache)
    return n, cache


def test_next_turn_extends_the_stored_cache_in_place(tiny):
    model, tok = tiny
    trie = PromptCacheTrie(256 * MiB)
    p1 = chat(tok, "How far is Mars?")
    r1 = encode(tok, "About 225 million km on average.")
    n, cache1 = serve(trie, model, p1, r1)
    assert n == 0
    p2 = chat(tok, "How far is Mars?", "About 225 million km on average.", "And Jupiter?")
    assert p2[: len(p1 + r1)] == p1 + r1
    cache, n = trie.fetch(model, p2)
    assert n == len(p1 + r1)
    assert cache is cache1  # handed back, not copied
    np.testing.assert_allclose(run(model, cache, p2[n:]), scratch(model, p2), atol=1e-4, rtol=1e-5)
    assert trie.stats().entries == 0  # it left the trie until stored again
    trie.store(p2, cache)
    assert trie.stats().entries == 1


def test_regenerate_and_edit_reuse_the_shared_prefix_and_keep_the_branch(tiny):
    model, tok = tiny
    trie = PromptCacheTrie(256 * MiB)
    p1 = chat(tok, "Name a moon of Saturn.")
    r1 = encode(tok, "Titan is the largest moon of Saturn, with a thick nitrogen atmosphere. " * 3)
    serve(trie, model, p1, r1)

    # Regenerate: the same prompt again; everything but the last token is cached.
    r2 = encode(tok, "Enceladus, which has geysers of water ice at its south pole. " * 3)
    n, _ = serve(trie, model, p1, r2)
    assert n == len(p1) - 1
    s = trie.stats()  # the branch reads the stored prefix, copying nothing
    assert (s.shared_branches, s.copies, s.entries) == (1, 0, 2)

    # Edit the first message: the system prompt and the user header are shared.
    p_edit = chat(tok, "Name a moon of Jupiter.")
    n, _ = serve(trie, model, p_edit, encode(tok, "Europa."))
    assert n == lcp(p1, p_edit)

    # Switch back to the first branch: its reply is still cached.
    p_back = p1 + r1 + encode(tok, "<|im_end|>\n<|im_start|>user\nTell me more.<|im_end|>\n")
    n, _ = serve(trie, model, p_back)
    assert n == len(p1 + r1)


def test_second_chat_sharing_the_system_prompt(tiny):
    model, tok = tiny
    trie = PromptCacheTrie(256 * MiB)
    a = chat(tok, "What is a comet?")
    serve(trie, model, a, encode(tok, "A ball of ice and dust."))
    b = chat(tok, "Why is Venus hot?")
    n, _ = serve(trie, model, b, encode(tok, "A runaway greenhouse effect."))
    assert n == lcp(a, b) > len(encode(tok, SYSTEM))


def test_short_rerendered_tail_is_trimmed_in_place(tiny):
    model, tok = tiny
    trie = PromptCacheTrie(256 * MiB)
    p = chat(tok, "Say hi.")
    reply = encode(tok, "Hi!  \n")
    _, cache = serve(trie, model, p, reply)
    # The template strips the reply's trailing whitespace when it renders the next turn.
    nxt = p + encode(tok, "Hi!<|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n")
    got, n = trie.fetch(model, nxt)
    assert n == lcp(p + reply, nxt) == len(p) + 2 and got is cache
    np.testing.assert_allclose(run(model, got, nxt[n:]), scratch(model, nxt), atol=1e-4, rtol=1e-5)


def _entry(model, first: int, length: int):
    tokens = [first] + list(range(1000, 1000 + length - 1))
    cache = make_prompt_cache(model)
    run(model, cache, tokens)
    return tokens, cache


def test_lru_eviction_order_and_byte_accounting(tiny):
    model, _ = tiny
    entries = [_entry(model, 10 + i, 300) for i in range(3)]
    size = cache_nbytes(entries[0][1])
    layer = entries[0][1][0]
    assert layer.keys.shape[2] == 512  # step-allocated: bytes count the whole buffer
    assert size == len(model.layers) * 2 * layer.keys.nbytes

    trie = PromptCacheTrie(2 * size + size // 2)
    (ta, ca), (tb, cb), (tc, cc) = entries
    trie.store(ta, ca)
    trie.store(tb, cb)
    assert trie.stats().bytes == 2 * size
    cache, n = trie.fetch(model, ta + [5])  # use A again, so B is now least recently used
    assert n == len(ta)
    trie.store(ta, cache)
    trie.store(tc, cc)
    s = trie.stats()
    assert (s.entries, s.evictions, s.bytes) == (2, 1, 2 * size)
    assert trie.fetch(model, tb + [5])[1] == 0  # B went
    assert trie.fetch(model, ta + [5])[1] == len(ta)

    trie.budget_bytes = size // 2  # lowering the budget evicts at once
    s = trie.stats()
    assert (s.entries, s.bytes) == (0, 0)


def test_entry_larger_than_the_budget_is_not_kept_and_evicts_nothing(tiny):
    model, _ = tiny
    small_t, small_c = _entry(model, 10, 20)
    big_t, big_c = _entry(model, 11, 600)
    trie = PromptCacheTrie(cache_nbytes(big_c) - 1)
    trie.store(small_t, small_c)
    trie.store(big_t, big_c)
    s = trie.stats()
    assert (s.entries, s.rejected, s.evictions) == (1, 1, 0)
    assert trie.fetch(model, small_t + [5])[1] == len(small_t)


def test_shared_system_prompt_is_the_last_to_go(tiny):
    model, tok = tiny
    long_reply = encode(tok, "The rings are made of ice particles and rocky debris. " * 12)
    a, b = chat(tok, "Tell me about Saturn."), chat(tok, "Tell me about Uranus.")
    trie = PromptCacheTrie(256 * MiB)
    _, ca = serve(trie, model, a, long_reply)
    _, cb = serve(trie, model, b, long_reply)
    one = cache_nbytes(scratch_cache(model, a + long_reply))  # one chat, unshared
    # Room for one chat: A (least recent) goes, but B reads A's buffers through the prefix
    # they share, so they stay, and B goes too; the system prompt they shared survives,
    # compacted to its exact size.
    trie.budget_bytes = one + one // 2
    s = trie.stats()
    assert (s.entries, s.shrinks) == (1, 1) and s.bytes <= trie.budget_bytes
    # An unrelated chat fits beside it.
    other = chat(tok, "Hello.", system="You are a pirate.")
    _, c_other = serve(trie, model, other, long_reply)
    s = trie.stats()
    assert s.shrinks == 1 and s.entries == 2 and s.bytes <= trie.budget_bytes
    keys = scratch_cache(model, a)[0].keys
    per_token = 2 * len(model.layers) * keys.shape[1] * keys.shape[3] * keys.itemsize
    # the other chat reads the few tokens it shares with the kept prefix (a block now)
    assert s.bytes - own_nbytes(c_other) == lcp(a, b) * per_token  # compact, exact size
    c = chat(tok, "Tell me about Neptune.")
    n, _ = serve(trie, model, c)
    assert n == lcp(a, b)


def test_cancelled_prefill_keeps_only_the_computed_part(tiny):
    model, tok = tiny
    trie = PromptCacheTrie(256 * MiB)
    prompt = chat(tok, "Explain orbits. " * 30)
    cache, n = trie.fetch(model, prompt)
    run(model, cache, prompt[:100])  # first chunk done, then the user cancels
    trie.store(prompt, cache)
    assert trie.stats().stored_tokens == 100
    cache, n = trie.fetch(model, prompt)
    assert n == 100
    np.testing.assert_allclose(
        run(model, cache, prompt[n:]), scratch(model, prompt), atol=1e-4, rtol=1e-5
    )
    # One token fed beyond those reported (a decode step ran ahead): trimmed, not stored wrong.
    run(model, cache, [42])
    trie.store(prompt, cache)
    assert trie.stats().stored_tokens == len(prompt)
    # An untouched branch copy given back adds nothing.
    copy, n = trie.fetch(model, prompt[:50] + [7, 8, 9])
    assert n == 50
    trie.store(prompt[:50], copy)
    assert trie.stats().entries == 1


@pytest.mark.parametrize("kind", ["rotating", "quantized", "concatenate"])
def test_branching_works_for_other_trimmable_cache_kinds(tiny, kind):
    model, tok = tiny

    def make(m):
        if kind == "rotating":  # a window the chat never fills stays trimmable
            return [RotatingKVCache(max_size=1024, keep=4) for _ in m.layers]
        if kind == "quantized":
            return [QuantizedKVCache(group_size=32, bits=8) for _ in m.layers]
        return [ConcatenateKVCache() for _ in m.layers]

    trie = PromptCacheTrie(256 * MiB, make_cache=make)
    atol = 1e-3 if kind == "quantized" else 1e-4  # quantized kernels differ by query length
    prompt = chat(tok, "Which planet has the most moons?")
    first = encode(tok, "Saturn, with well over a hundred confirmed moons. " * 2)
    serve(trie, model, prompt, first, make, atol)
    n, _ = serve(trie, model, prompt, encode(tok, "Saturn."), make, atol)  # regenerate
    assert n == len(prompt) - 1
    n, _ = serve(trie, model, prompt + first + [2, 198], None, make, atol)  # the first branch
    assert n == len(prompt + first)
    # A re-rendered tail of two tokens is trimmed off in place.
    in_place = trie.stats().reused_in_place
    n, _ = serve(trie, model, prompt + first[:-2] + [12345, 2, 198], None, make, atol)
    assert n == len(prompt + first) - 2 and trie.stats().reused_in_place == in_place + 1


def test_rotating_cache_reuses_only_exact_prefixes(tiny):
    model, tok = tiny

    def make(m):
        return [RotatingKVCache(max_size=32, keep=4) for _ in m.layers]

    trie = PromptCacheTrie(256 * MiB, make_cache=make)
    prompt = chat(tok, "Describe the Moon in detail, please.")
    reply = encode(tok, "The Moon is rocky and cratered, with dark basaltic maria. " * 2)
    assert len(prompt) + len(reply) > 32  # the window has wrapped: not trimmable any more
    cache, n = trie.fetch(model, prompt)
    assert n == 0
    run(model, cache, prompt)
    run(model, cache, reply)
    trie.store(prompt + reply, cache)

    # Regenerate would need the state of a prefix: not recoverable, so a miss.
    got, n = trie.fetch(model, prompt)
    assert n == 0 and type(got[0]).__name__ == "RotatingKVCache"
    # The exact stored sequence plus more is reused, and gives the same logits as computing it.
    more = encode(tok, "<|im_end|>\n<|im_start|>user\nAnd Mars?<|im_end|>\n")
    got, n = trie.fetch(model, prompt + reply + more)
    assert n == len(prompt + reply)
    ref = make(model)
    run(model, ref, prompt)
    run(model, ref, reply)
    np.testing.assert_allclose(run(model, got, more), run(model, ref, more), atol=1e-4, rtol=1e-5)


def test_another_model_clears_the_trie(tiny):
    model, tok = tiny
    trie = PromptCacheTrie(256 * MiB)
    serve(trie, model, chat(tok, "Hi."), encode(tok, "Hello."))

    class Other:
        layers = model.layers

    cache, n = trie.fetch(Other(), chat(tok, "Hi.") + [5])
    assert n == 0 and trie.stats().entries == 0


def check_tree(trie: PromptCacheTrie) -> None:
    """Structural invariants: depths, entry counts, bytes, and each cache's length."""
    seen = []

    def visit(node) -> int:
        count = 0
        for first, child in node.children.items():
            assert child.parent is node and child.span[0] == first
            assert child.depth == node.depth + len(child.span)
            count += visit(child)
        if node.entry is not None:
            assert node.entry.node is node and cache_length(node.entry.cache) == node.depth
            seen.append(node.entry)
            count += 1
        assert node.n_entries == count
        return count

    visit(trie._root)
    assert set(seen) == trie._entries
    s = trie.stats()
    blocks = set().union(*(blocks_of(e.cache) for e in seen))  # each shared block once
    own = sum(own_nbytes(e.cache) for e in seen)
    assert s.bytes == own + sum(b.nbytes for b in blocks) <= s.budget_bytes


def test_random_session_with_cancels_and_evictions_stays_consistent(tiny):
    model, _ = tiny
    rng = random.Random(7)
    trie = PromptCacheTrie(1200 * 1024)  # three or four entries of the tiny model
    seqs = [[rng.randrange(100, 5000) for _ in range(24)]]  # a shared "system prompt"
    for _ in range(40):
        parent = rng.choice(seqs)
        cut = rng.randrange(1, len(parent) + 1)
        prompt = parent[:cut] + [rng.randrange(100, 5000) for _ in range(rng.randrange(1, 40))]
        cache, n = trie.fetch(model, prompt)
        if rng.random() < 0.25:  # cancelled part-way through the prefill
            done = n + rng.randrange(0, len(prompt) - n)
            if done > n:
                run(model, cache, prompt[n:done])
            trie.store(prompt, cache)
            seqs.append(prompt[:done] or prompt)
        else:
            np.testing.assert_allclose(
                run(model, cache, prompt[n:]), scratch(model, prompt), atol=1e-4, rtol=1e-5
            )
            reply = [rng.randrange(100, 5000) for _ in range(rng.randrange(1, 60))]
            run(model, cache, reply)
            trie.store(prompt + reply, cache)
            seqs.append(prompt + reply)
        check_tree(trie)
    s = trie.stats()
    assert s.evictions > 0 and s.hits > 20
