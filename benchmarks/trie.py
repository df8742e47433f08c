"""Figures for the prompt-cache trie: time to first token (TTFT) over a growing chat with and
without the trie, regenerate and edit, the hit rate of a scripted session, and the cost of a
lookup against mlx-lm's `LRUPromptCache` on the same caches.

Drives the model directly (chunked prefill, `mx.eval`) on the calling thread, which must be the
thread that loaded it. Replies are scripted text fed to the model as the generated tokens would
be; their KV state is what decoding them would leave.
"""

from __future__ import annotations

import copy
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mlx_lm.models import cache as mlx_cache

from engine.memory.plan import model_nbytes, plan_memory
from engine.memory.prompt_cache import PromptCacheTrie, cache_arrays
from engine.memory.store import KVState, common_prefix

_WORDS = (
    "the planet orbit moon star light system water ice rock gas giant ring storm wind dust "
    "crater surface core mantle crust magnetic field solar cloud sky night day year season "
    "distance mass gravity heat cold pressure layer ocean mountain valley river plain comet "
    "asteroid belt spacecraft probe mission data image signal telescope observer theory model "
    "because which while after before during about around between small large bright dark "
    "slow fast early late many several most every each other new old first last long short"
).split()
SYSTEM = (
    "You are Corral, a careful assistant. Answer clearly and briefly, and say so when "
    "you are not sure of a fact."
)


def _text(rng: random.Random, tokenizer: Any, n_tokens: int) -> str:
    """Scripted prose of roughly `n_tokens` tokens."""
    words = [rng.choice(_WORDS) for _ in range(max(1, n_tokens))]
    text = " ".join(words)
    ratio = len(tokenizer.encode(text, add_special_tokens=False)) / len(words)
    return " ".join(words[: max(1, int(n_tokens / max(ratio, 1e-6)))]).capitalize() + "."


def _render(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    if hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(t) for t in out]


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def _feed(model: Any, cache: KVState, tokens: list[int], step: int, logits: bool = True) -> None:
    """Prefill as mlx-lm does: all but the last token in chunks of `step` (cache only, so the
    vocabulary-wide head never runs on them), then the last token's logits and its argmax."""
    if not tokens:
        return
    body = tokens[:-1] if logits else tokens
    for pos in range(0, len(body), step):
        model(mx.array([body[pos : pos + step]]), cache=cache)
        mx.eval(cache_arrays(cache))
    if logits:
        first = mx.argmax(model(mx.array([tokens[-1:]]), cache=cache)[0, -1])
        mx.eval(first, cache_arrays(cache))


def _snapshot(cache: KVState) -> KVState:
    """An evaluated deep copy: the cache exactly as it is, buffers and slack included."""
    out = copy.deepcopy(cache)
    mx.eval(cache_arrays(out))
    return out


def _best_ttft(model: Any, make: Any, tokens: list[int], step: int, reps: int) -> float:
    """Least time over `reps` to prefill `tokens` onto a fresh `make()` cache (made untimed)."""
    best = float("inf")
    for _ in range(reps):
        cache = make()
        t0 = time.perf_counter()
        _feed(model, cache, tokens, step)
        best = min(best, time.perf_counter() - t0)
    return best


def _scratch_ttft(model: Any, prompt: list[int], step: int, reps: int) -> float:
    return _best_ttft(model, lambda: mlx_cache.make_prompt_cache(model), prompt, step, reps)


class _Session:
    """Requests served through the trie, with what a perfect cache could have reused.

    Times are the least over `reps` runs (this machine may be shared); between runs the trie is
    put back as it was, so each run does the same work.
    """

    def __init__(self, model: Any, trie: PromptCacheTrie, step: int, reps: int) -> None:
        self.model, self.trie, self.step, self.reps = model, trie, step, reps
        self.computed: list[list[int]] = []
        self.cached = 0
        self.perfect = 0
        self.requests = 0

    def perfect_reuse(self, prompt: list[int]) -> int:
        best = max((common_prefix(prompt, s) for s in self.computed), default=0)
        return min(best, len(prompt) - 1)

    def request(
        self, prompt: list[int], reply: list[int], *, new_prefill: bool = False
    ) -> dict[str, Any]:
        perfect = self.perfect_reuse(prompt)
        ttft = float("inf")
        for rep in range(self.reps):
            t0 = time.perf_counter()
            cache, n = self.trie.fetch(self.model, prompt)
            fetch_s = time.perf_counter() - t0
            before = _snapshot(cache) if new_prefill or rep < self.reps - 1 else []
            t0 = time.perf_counter()
            _feed(self.model, cache, prompt[n:], self.step)
            ttft = min(ttft, fetch_s + time.perf_counter() - t0)
            if rep < self.reps - 1:  # undo: the trie holds what it held before this run
                self.trie.store(prompt[:n], before)
        out = {
            "prompt_tokens": len(prompt),
            "cached_tokens": n,
            "perfect_tokens": perfect,
            "ttft_s": ttft,
        }
        if new_prefill:  # the ideal: only tokens no cache could hold, onto that exact context
            if n != perfect:
                before = _snapshot(cache)
                mlx_cache.trim_prompt_cache(before, len(prompt) - perfect)
            out["new_prefill_s"] = _best_ttft(
                self.model, lambda: _snapshot(before), prompt[perfect:], self.step, self.reps
            )
        _feed(self.model, cache, reply, self.step, logits=False)
        self.trie.store(prompt + reply, cache)
        self.computed.append(prompt + reply)
        self.cached += n
        self.perfect += perfect
        self.requests += 1
        return out


def _one_token(cache: KVState, shapes: Sequence[tuple[tuple[int, ...], Any]]) -> None:
    """What reuse costs before the next forward pass can run: take one token, evaluate."""
    for c, (shape, dtype) in zip(cache, shapes, strict=True):
        kv = mx.zeros(shape, dtype)
        c.update_and_fetch(kv, kv)
    mx.eval(cache_arrays(cache))


def _mlx_lm_lru() -> Any:
    """mlx-lm's LRUPromptCache class (in models.cache since 0.31, in server.py before)."""
    if hasattr(mlx_cache, "LRUPromptCache"):
        return mlx_cache.LRUPromptCache
    import mlx_lm.server

    return getattr(mlx_lm.server, "LRUPromptCache")  # noqa: B009 (not exported there)


def _expect(got: int, want: int) -> None:
    if got != want:
        raise RuntimeError(f"trie lookup bench: {got} tokens cached, expected {want}")


def _lookup_costs(model: Any, n: int, reps: int, rng: random.Random) -> dict[str, float]:
    """Median ms of lookup + one-token reuse, trie vs mlx-lm, extending and branching."""
    probe = mlx_cache.make_prompt_cache(model)
    model(mx.array([[1]]), cache=probe)
    shapes = [((1, c.keys.shape[1], 1, c.keys.shape[3]), c.keys.dtype) for c in probe]
    base = mlx_cache.make_prompt_cache(model)
    for c, (shape, dtype) in zip(base, shapes, strict=True):
        for pos in range(0, n, 512):
            k = min(512, n - pos)
            kv = mx.random.normal((1, shape[1], k, shape[3])).astype(dtype)
            c.update_and_fetch(kv, kv)
        mx.eval(c.keys, c.values)
    tokens = [rng.randrange(100, 40000) for _ in range(n)]
    extend = tokens + [rng.randrange(100, 40000) for _ in range(64)]
    shared = n - min(200, n // 2)
    branch = tokens[:shared] + [rng.randrange(100, 40000) for _ in range(64)]

    trie = PromptCacheTrie(1 << 62)
    trie.store(tokens, copy.deepcopy(base))
    lru = _mlx_lm_lru()(max_size=4)
    lru.insert_cache("model", tokens, copy.deepcopy(base))
    del base

    def timed(fn: Any) -> float:
        times = []
        for i in range(reps + 1):
            t0 = time.perf_counter()
            cache, after = fn()
            _one_token(cache, shapes)
            if i:  # the first run warms up
                times.append((time.perf_counter() - t0) * 1000)
            after(cache)
        return statistics.median(times)

    def trie_extend() -> tuple[KVState, Any]:
        cache, got = trie.fetch(model, extend)
        _expect(got, n)

        def give_back(c: KVState) -> None:
            mlx_cache.trim_prompt_cache(c, 1)
            trie.store(tokens, c)

        return cache, give_back

    def trie_branch() -> tuple[KVState, Any]:
        cache, got = trie.fetch(model, branch)
        _expect(got, shared)
        return cache, lambda c: None

    def lru_fetch(query: list[int]) -> Any:
        def fetch() -> tuple[KVState, Any]:
            cache, _rest = lru.fetch_nearest_cache("model", query)
            return cache, lambda c: None

        return fetch

    return {
        "trie": timed(trie_extend),
        "mlx_lm": timed(lru_fetch(extend)),
        "trie_branch": timed(trie_branch),
        "mlx_lm_branch": timed(lru_fetch(branch)),
    }


def _label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def run_trie_bench(
    model: Any,
    tokenizer: Any,
    *,
    turns: int = 8,
    history_tokens: int = 2000,
    lookup_tokens: tuple[int, ...] = (2000, 8000),
    uncached_every_turn: bool = True,
    prefill_step: int = 512,
    reps: int = 3,
    lookup_reps: int = 10,
    budget_bytes: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the trie figures on `model`; a JSON-ready dict (times in seconds unless `_ms`).

    Times are the least of `reps` runs (lookups: the median of `lookup_reps`).
    `uncached_every_turn=False` measures the uncached TTFT at the last turn only, for slow
    machines. The hit rate counts cached prompt tokens against the longest prefix each prompt,
    as tokenized, shares with anything computed before it.
    """
    rng = random.Random(seed)
    step = prefill_step
    if budget_bytes is None:
        budget_bytes = plan_memory(model_nbytes(model)).kv_budget_bytes
    trie = PromptCacheTrie(budget_bytes)
    session = _Session(model, trie, step, reps)
    per_turn = max(16, history_tokens // turns)
    user_len, reply_len = max(8, per_turn // 4), max(8, per_turn - per_turn // 4 - 10)
    users = [_text(rng, tokenizer, user_len) for _ in range(turns + 3)]
    replies = [_text(rng, tokenizer, reply_len) for _ in range(turns + 4)]
    _feed(
        model,
        mlx_cache.make_prompt_cache(model),
        _render(tokenizer, [{"role": "user", "content": "warm up"}]),
        step,
    )

    # 1. A chat growing turn by turn.
    chat = [{"role": "system", "content": SYSTEM}]
    rows = []
    for k in range(turns):
        chat.append({"role": "user", "content": users[k]})
        prompt = _render(tokenizer, chat)
        row = session.request(prompt, _encode(tokenizer, replies[k]), new_prefill=True)
        if uncached_every_turn or k == turns - 1:
            row["uncached_ttft_s"] = _scratch_ttft(model, prompt, step, reps)
        rows.append(row)
        chat.append({"role": "assistant", "content": replies[k]})
    last = rows[-1]

    # 2. Regenerate the last reply; then edit the first message (the chat branches there).
    regen = session.request(_render(tokenizer, chat[:-1]), _encode(tokenizer, replies[turns]))
    chat[-1] = {"role": "assistant", "content": replies[turns]}
    edited = [chat[0], {"role": "user", "content": "Instead: " + users[turns]}]
    edit_prompt = _render(tokenizer, edited)
    edit = session.request(edit_prompt, _encode(tokenizer, replies[turns + 1]))
    edit["uncached_ttft_s"] = _scratch_ttft(model, edit_prompt, step, reps)

    # 3. A second conversation sharing the system prompt, whose first reply reasons in a block
    #    the history drops (as reasoning models' templates do); then back to the first branch.
    other = [chat[0]]
    for j in (1, 2):
        other.append({"role": "user", "content": users[turns + j]})
        text = replies[turns + 1 + j]
        fed = f"<think>{_text(rng, tokenizer, 40)}</think>{text}" if j == 1 else text
        second = session.request(_render(tokenizer, other), _encode(tokenizer, fed))
        other.append({"role": "assistant", "content": text})
    chat.append({"role": "user", "content": users[0]})
    back = session.request(_render(tokenizer, chat), _encode(tokenizer, replies[0]))

    # 4. Lookup plus reuse at fixed cache sizes.
    lookups = {n: _lookup_costs(model, n, lookup_reps, rng) for n in lookup_tokens}
    if hasattr(mx, "clear_cache"):
        mx.clear_cache()

    ratios = [r["ttft_s"] / r["new_prefill_s"] for r in rows]
    out: dict[str, Any] = {
        "trie_turns": turns,
        "trie_history_tokens": last["prompt_tokens"],
        "trie_ttft_over_new_prefill": max(ratios),
        "trie_ttft_over_uncached_last_turn": last["ttft_s"] / last["uncached_ttft_s"],
        "trie_hit_rate": session.cached / max(1, session.perfect),
        "trie_session_requests": session.requests,
        "trie_session_cached_tokens": session.cached,
        "trie_session_perfect_tokens": session.perfect,
        "trie_turn_prompt_tokens": [r["prompt_tokens"] for r in rows],
        "trie_turn_cached_tokens": [r["cached_tokens"] for r in rows],
        "trie_turn_ttft_s": [r["ttft_s"] for r in rows],
        "trie_turn_new_prefill_s": [r["new_prefill_s"] for r in rows],
        "trie_turn_uncached_ttft_s": [r.get("uncached_ttft_s") for r in rows],
        "trie_turn_ttft_over_new_prefill": ratios,
        "trie_regenerate_prompt_tokens": regen["prompt_tokens"],
        "trie_regenerate_cached_tokens": regen["cached_tokens"],
        "trie_regenerate_ttft_s": regen["ttft_s"],
        "trie_regenerate_uncached_ttft_s": last["uncached_ttft_s"],
        "trie_edit_prompt_tokens": edit["prompt_tokens"],
        "trie_edit_cached_tokens": edit["cached_tokens"],
        "trie_edit_ttft_s": edit["ttft_s"],
        "trie_edit_uncached_ttft_s": edit["uncached_ttft_s"],
        "trie_reasoning_dropped_cached_tokens": second["cached_tokens"],
        "trie_reasoning_dropped_prompt_tokens": second["prompt_tokens"],
        "trie_switch_back_cached_tokens": back["cached_tokens"],
        "trie_switch_back_prompt_tokens": back["prompt_tokens"],
        "trie_stats": trie.stats().to_dict(),
    }
    for n, costs in lookups.items():
        label = _label(n)
        out[f"trie_lookup_ms_{label}"] = costs["trie"]
        out[f"mlx_lm_lookup_ms_{label}"] = costs["mlx_lm"]
        out[f"trie_branch_lookup_ms_{label}"] = costs["trie_branch"]
        out[f"mlx_lm_branch_lookup_ms_{label}"] = costs["mlx_lm_branch"]
    trie.clear()
    return out


def format_trie_bench(d: dict[str, Any]) -> str:
    """The figures of `run_trie_bench` as a few readable lines."""
    ms = 1000
    lines = [
        f"Prompt-cache trie: {d['trie_turns']} turns, "
        f"{d['trie_history_tokens']} tokens at the last turn",
        "  turn  prompt  cached  TTFT trie  new-only  uncached  trie/new",
    ]
    for i, (p, c, t, nw, u, r) in enumerate(
        zip(
            d["trie_turn_prompt_tokens"],
            d["trie_turn_cached_tokens"],
            d["trie_turn_ttft_s"],
            d["trie_turn_new_prefill_s"],
            d["trie_turn_uncached_ttft_s"],
            d["trie_turn_ttft_over_new_prefill"],
            strict=True,
        )
    ):
        unc = f"{u * ms:7.0f}ms" if u is not None else "        -"
        lines.append(
            f"  {i + 1:4d}  {p:6d}  {c:6d}  {t * ms:7.0f}ms  {nw * ms:6.0f}ms {unc}  {r:7.2f}x"
        )
    lines += [
        f"  worst turn TTFT / new-token prefill: {d['trie_ttft_over_new_prefill']:.2f}x "
        "(goal <= 1.25x)",
        f"  last turn TTFT / uncached: {d['trie_ttft_over_uncached_last_turn']:.1%} (goal <= 20%)",
        f"  regenerate: {d['trie_regenerate_cached_tokens']}/"
        f"{d['trie_regenerate_prompt_tokens']} cached, TTFT "
        f"{d['trie_regenerate_ttft_s'] * ms:.0f}ms (uncached "
        f"{d['trie_regenerate_uncached_ttft_s'] * ms:.0f}ms)",
        f"  edit first message: {d['trie_edit_cached_tokens']}/{d['trie_edit_prompt_tokens']} "
        f"cached, TTFT {d['trie_edit_ttft_s'] * ms:.0f}ms (uncached "
        f"{d['trie_edit_uncached_ttft_s'] * ms:.0f}ms)",
        f"  next turn after a dropped reasoning block: "
        f"{d['trie_reasoning_dropped_cached_tokens']}/{d['trie_reasoning_dropped_prompt_tokens']}"
        " cached",
        f"  switch back to the first branch: {d['trie_switch_back_cached_tokens']}/"
        f"{d['trie_switch_back_prompt_tokens']} cached",
        f"  session hit rate: {d['trie_hit_rate']:.3f} ({d['trie_session_cached_tokens']}/"
        f"{d['trie_session_perfect_tokens']} reusable tokens, {d['trie_session_requests']} "
        "requests; goal >= 0.95)",
    ]
    for key in sorted(k for k in d if k.startswith("trie_lookup_ms_")):
        label = key.removeprefix("trie_lookup_ms_")
        lines.append(
            f"  lookup+reuse at {label} tokens: trie {d[key]:.2f}ms vs mlx-lm "
            f"{d['mlx_lm_lookup_ms_' + label]:.2f}ms (extend); branch: trie "
            f"{d['trie_branch_lookup_ms_' + label]:.2f}ms vs mlx-lm "
            f"{d['mlx_lm_branch_lookup_ms_' + label]:.2f}ms"
        )
    s = d["trie_stats"]
    lines.append(
        f"  trie: {s['entries']} entries, {s['bytes'] / 1e6:.1f} MB of "
        f"{s['budget_bytes'] / 1e6:.0f} MB, {s['hits']} hits, {s['misses']} misses, "
        f"{s['evictions']} evictions"
    )
    return "\n".join(lines)
