"""The `agent` bench section: a replayed coding-agent session against the prompt cache's
two tiers and quantized KV caches.

A deterministic agent prompt (instructions plus tool definitions as JSON, about 2k tokens of
the default model: a 6k one takes ~40 s per uncached prefill on the 2-core CPU this runs on
in CI) and 8 turns, each adding the model's reply and a tool result; then turn 9 on the warm
engine, and a restart after turn 8 (a new Engine over a copy of the cache folder as turn 8
left it) running turn 9 again and turn 10.

- `agent_turn_ttft_over_uncached`: median over turns 2-8 of the turn's time to first token
  over the same prompt's uncached one (measured at turns 2 and 8, interpolated by length).
- `disk_restore_over_prefill`: loading the turn-9 prefix from disk over prefilling it.
- `restart_ttft_over_warm`: turn 9 after the restart over turn 9 before it.
- `kv8_memory_ratio`, `kv4_memory_ratio`: KV bytes of 512 tokens over full precision.
- `kv8_tps_ratio`, `kv8_greedy_agreement`: decode rate and identical greedy replies of
  8-bit KV over full precision, on a fixed prompt set; `kv8_token_agreement` the share of
  reply tokens before the first one that differs (all of an identical reply), and
  `kv8_first_difference_gap` the median, over the replies that differ, of how far apart
  full precision's log-probabilities of the two tokens were where they first differ (a
  near tie, a few hundredths of a nat, is a coin both sides may flip; None: none differ).
- `agent_ttft_vs_mlx_lm`: median time to first token of turns 2-8 over mlx-lm's own
  prompt cache (`LRUPromptCache`, as `mlx_lm.server` uses it) replaying the same prompts.
- `agent_reuse_overhead_ms`: what a turn costs beyond prefilling its new tokens (those the
  cache did not hold) at the uncached prefill's speed: median over turns 2-8 of TTFT less
  new tokens over that speed, in ms; `mlx_lm_agent_reuse_overhead_ms` the same for mlx-lm's
  `LRUPromptCache` replay. On a CPU a turn's time is mostly that prefill, which no cache
  removes; this is the part a cache can make small (finding the prefix, restoring it, the
  first step). It includes the first token's decode step, for both alike.
- `agent_reuse_overhead_exact_ms`: the same part measured, not estimated: each turn's
  time to first token less that of an exact cache, a KV cache of the model's own already
  holding all the turn could reuse (what it shares with the previous turn's prompt and
  reply) that prefills only the rest and takes the first token (mlx-lm's
  `stream_generate`), run beside the turn on the same engine thread, which goes first
  alternating from turn to turn. The estimate above prices new tokens at the uncached
  prompt's average speed, which a turn's few hundred tokens after 2k cached ones do not
  run at, and carries each turn's noise twice: its spread over turns was as large as the
  figure. `mlx_lm_agent_reuse_overhead_exact_ms`: mlx-lm's `LRUPromptCache` replay's
  turns over the same exact cache's.
- Spreads (`_spread`): over turns 2-8 for the TTFT ratios and overheads (one session each:
  a session is minutes of prefill on a CPU), over rounds of two prompts for
  `kv8_tps_ratio` (each prompt full and 8-bit, alternating which goes first; a round's
  rate is its replies' tokens over their time). Each says whether it can tell
  (`<key>_can_tell`, else `<key>_cannot_tell` with why; `benchmarks/rounds.py`): ratios
  within 0.05, overheads in ms within 5% of a turn's median time to first token.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from benchmarks.rounds import SPREAD_TOLERANCE, Timed, is_quick, round_ratios, spread, verdict
from engine.engine import Engine
from engine.memory.store import common_prefix
from engine.types import ChatRequest, SamplingSettings

TURNS = 8
REPLY_TOKENS = 12
TOOLS = ["read_file", "write_file", "list_dir", "grep", "run_tests", "git_diff", "edit_range"]
AGREEMENT_PROMPTS = [
    "Name three colours.",
    "What is the capital of France?",
    "Write one sentence about the sea.",
    "List three fruits.",
    "What does a compiler do?",
    "Say hello politely.",
    "Why is the sky blue?",
    "Give two tips for sleeping well.",
    "What is a prime number?",
    "Describe a mountain in one sentence.",
    "How do plants make food?",
    "Name a famous painter.",
]


def agent_system_prompt() -> str:
    """Instructions and tool definitions, the same every run."""
    rules = [
        f"Rule {i}: when a task touches module {i}, read it first, keep its public names, "
        f"run its tests, and report what changed in one short paragraph."
        for i in range(1, 19)
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name.replace('_', ' ')} in the repository; returns text. "
                "Paths are relative to the repository root and never leave it.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "a file or folder path"},
                        "pattern": {"type": "string", "description": "what to look for"},
                        "start": {"type": "integer", "description": "first line, from 1"},
                        "end": {"type": "integer", "description": "last line, inclusive"},
                    },
                    "required": ["path"],
                },
            },
        }
        for name in TOOLS
    ]
    return (
        "You are a coding agent working in a Python repository.\n"
        + "\n".join(rules)
        + "\n\nTools:\n"
        + json.dumps(tools, indent=1)
    )


def tool_result(turn: int) -> str:
    """What a tool call of turn `turn` returned: a short file listing."""
    lines = [
        f"def helper_{turn}_{i}(value: int) -> int:\n    return value * {i} + {turn}"
        for i in range(6)
    ]
    return f"Tool result (read_file src/module_{turn}.py):\n" + "\n".join(lines)


def _request(messages: list[Any], max_tokens: int = REPLY_TOKENS) -> ChatRequest:
    return ChatRequest(
        messages=list(messages),
        sampling=SamplingSettings(temperature=0.0, max_tokens=max_tokens),
    )


def _turn_messages(history: list[dict[str, str]], turn: int) -> list[dict[str, str]]:
    text = "Fix the failing test in module 1." if turn == 1 else tool_result(turn)
    return [*history, {"role": "user", "content": text}]


def run_agent_bench(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """The section's figures (`engine` is the bench's own, full precision, no disk tier)."""
    folder = Path(tempfile.mkdtemp(prefix="corral-agent-bench-"))
    # a smoke run compares kv8 on one round of two prompts
    prompts = AGREEMENT_PROMPTS[:2] if is_quick(args) else AGREEMENT_PROMPTS
    try:
        return _run(engine, args.model, folder, prompts)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class ExactCache:
    """A KV cache of the model's own holding exactly what a turn can reuse, so that a turn
    costs only its new tokens' prefill and its first token: the reference a prompt
    cache's turns are measured against (used on the engine thread, between turns)."""

    def __init__(self) -> None:
        self.cache: list[Any] | None = None
        self.held: list[int] = []  # the tokens whose KV the cache holds

    def ttft_s(self, lm: Any, tokens: list[int], reusable: int) -> float:
        """Seconds to the first token of `tokens` with `tokens[:reusable]` already held
        (brought there first, untimed)."""
        import mlx.core as mx
        from mlx_lm import stream_generate
        from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

        if self.cache is None:
            self.cache = make_prompt_cache(lm.model)
        keep = common_prefix(self.held, tokens[:reusable])
        trim_prompt_cache(self.cache, len(self.held) - keep)
        for start in range(keep, reusable, 512):  # the rest of the reusable prefix, untimed
            lm.model(mx.array(tokens[start : min(start + 512, reusable)])[None], cache=self.cache)
            mx.eval([c.state for c in self.cache])
        started = time.perf_counter()
        for _ in stream_generate(
            lm.model, lm.tokenizer, tokens[reusable:], max_tokens=1, prompt_cache=self.cache
        ):
            break
        elapsed = time.perf_counter() - started
        # the loop feeds its first token on (its next step starts before it yields)
        extra = self.cache[0].offset - len(tokens)
        if extra > 0:
            trim_prompt_cache(self.cache, extra)
        self.held = list(tokens)
        return elapsed


def _run(engine: Engine, spec: str, folder: Path, agreement: list[str]) -> dict[str, Any]:
    from engine.memory.store import NoPromptCache
    from engine.prompt.chat import encode_chat

    out: dict[str, Any] = {}
    restart_folder = folder / "after-turn-8"
    folder = folder / "session"
    history: list[dict[str, str]] = [{"role": "system", "content": agent_system_prompt()}]
    prompts: list[list[dict[str, str]]] = []
    ttft: list[float] = []
    lengths: list[int] = []
    new_tokens: list[int] = []  # what each turn prefilled (the cache held the rest)
    exact_ttft: list[float] = []  # turns 2-8 on the exact cache
    exact = ExactCache()
    computed: list[int] = []  # the previous turn's prompt and reply
    warm = Engine(speculative=False, disk_cache_dir=folder)
    try:
        warm.load_model(spec).result()
        for turn in range(1, TURNS + 2):  # turn 9: the warm reference for the restart
            if turn == TURNS + 1:  # the folder as a restart after turn 8 would find it
                warm.run(lambda lm: cast(Any, warm.prompt_cache).persist()).result()
                shutil.copytree(folder, restart_folder)
            messages = _turn_messages(history, turn)

            def on_exact(
                lm: Any, messages: list[Any] = messages, before: list[int] = computed
            ) -> float:
                tokens = encode_chat(lm.tokenizer, messages)
                reusable = min(common_prefix(tokens, before), len(tokens) - 1)
                return exact.ttft_s(lm, tokens, reusable)

            timed_exact = 2 <= turn <= TURNS
            if timed_exact and turn % 2 == 0:  # the exact cache first in even turns
                exact_ttft.append(warm.run(on_exact).result())
            result = warm.chat(_request(messages))
            if timed_exact and turn % 2 == 1:
                exact_ttft.append(warm.run(on_exact).result())
            computed = list(result.token_ids)
            prompts.append(messages)
            ttft.append(result.stats.ttft_s)
            lengths.append(result.stats.prompt_tokens)
            new_tokens.append(result.stats.prompt_tokens - result.stats.cached_tokens)
            history = [*messages, {"role": "assistant", "content": result.text}]
    finally:
        warm.close()  # writes what memory holds to the cache folder
    out["agent_prompt_tokens"] = lengths[0]
    out["agent_turn9_prompt_tokens"] = lengths[TURNS]

    cold = Engine(NoPromptCache(), speculative=False)
    try:
        cold.load_model(spec).result()
        uncached = {t: cold.chat(_request(prompts[t - 1])).stats.ttft_s for t in (2, TURNS)}
    finally:
        cold.close()
    slope = (uncached[TURNS] - uncached[2]) / max(1, lengths[TURNS - 1] - lengths[1])
    ratios = [
        ttft[t - 1] / (uncached[2] + slope * (lengths[t - 1] - lengths[1]))
        for t in range(2, TURNS + 1)
    ]
    out["agent_turn_ttft_over_uncached"] = round(statistics.median(ratios), 4)
    out["agent_turn_ttft_over_uncached_spread"] = spread(ratios, 4)
    out["agent_turn_ttft_s"] = round(statistics.median(ttft[1:TURNS]), 4)
    out["agent_uncached_ttft_s"] = round(uncached[TURNS], 3)

    restarted = Engine(speculative=False, disk_cache_dir=restart_folder)
    try:
        started = time.perf_counter()
        restarted.load_model(spec).result()
        out["restart_load_s"] = round(time.perf_counter() - started, 3)

        def restore(lm: Any) -> tuple[float, int]:
            tokens = encode_chat(lm.tokenizer, prompts[TURNS])
            t0 = time.perf_counter()
            _, n = restarted.prompt_cache.fetch(lm.model, tokens)
            return time.perf_counter() - t0, n

        restore_s, restored = restarted.run(restore).result()
        prefill_tps = lengths[TURNS - 1] / uncached[TURNS]
        out["disk_restore_tokens"] = restored
        out["disk_restore_over_prefill"] = round(restore_s / max(1e-9, restored / prefill_tps), 4)
        again = restarted.chat(_request(prompts[TURNS]))
        out["restart_ttft_over_warm"] = round(again.stats.ttft_s / ttft[TURNS], 3)
        follow = [
            *prompts[TURNS],
            {"role": "assistant", "content": again.text},
            {"role": "user", "content": tool_result(TURNS + 2)},
        ]
        out["restart_turn10_ttft_s"] = round(restarted.chat(_request(follow)).stats.ttft_s, 4)
        out["agent_disk_hits"] = restarted.snapshot.cache.disk_hits
    finally:
        restarted.close()

    prefill_tps = lengths[TURNS - 1] / uncached[TURNS]
    theirs = _mlx_lm_session(engine, prompts[:TURNS])
    their_ttft = [t for t, _ in theirs[1:]]
    out["agent_ttft_vs_mlx_lm"] = round(
        statistics.median(ttft[1:TURNS]) / statistics.median(their_ttft), 3
    )
    out["agent_ttft_vs_mlx_lm_spread"] = spread(
        round_ratios(zip(ttft[1:TURNS], their_ttft, strict=True))
    )
    ours_over = reuse_overheads_ms(ttft[1:TURNS], new_tokens[1:TURNS], prefill_tps)
    their_over = reuse_overheads_ms(their_ttft, [n for _, n in theirs[1:]], prefill_tps)
    # a turn's overhead is read to within 5% of a turn's time to first token
    turn_ms = statistics.median(ttft[1:TURNS]) * 1e3
    ms_tolerance = round(SPREAD_TOLERANCE * turn_ms, 2)
    turns = TURNS - 1

    def overhead_figures(key: str, values: list[float], why: str = "") -> dict[str, Any]:
        figures: dict[str, Any] = {
            key: round(statistics.median(values), 2),
            key.removesuffix("_ms") + "_spread_ms": spread(values, 2),
        }
        told = verdict(
            key, spread(values, 2), turns, tolerance=ms_tolerance, unit="ms", over="turns"
        )
        if told[f"{key}_cannot_tell"] and why:
            told[f"{key}_cannot_tell"] += why
        return figures | told

    estimated = (
        "; each turn is one run whose new tokens are priced at the uncached prompt's "
        "average speed: agent_reuse_overhead_exact_ms measures them"
    )
    out.update(overhead_figures("agent_reuse_overhead_ms", ours_over, estimated))
    out.update(overhead_figures("mlx_lm_agent_reuse_overhead_ms", their_over, estimated))
    exact_over = [(t - e) * 1e3 for t, e in zip(ttft[1:TURNS], exact_ttft, strict=True)]
    their_exact = [(t - e) * 1e3 for t, e in zip(their_ttft, exact_ttft, strict=True)]
    out.update(overhead_figures("agent_reuse_overhead_exact_ms", exact_over))
    out.update(overhead_figures("mlx_lm_agent_reuse_overhead_exact_ms", their_exact))
    out["agent_exact_ttft_s"] = round(statistics.median(exact_ttft), 4)
    for key in ("agent_turn_ttft_over_uncached", "agent_ttft_vs_mlx_lm"):
        out.update(verdict(key, out[f"{key}_spread"], turns, over="turns"))
    out["agent_new_tokens_per_turn"] = statistics.median(new_tokens[1:TURNS])
    out["agent_prefill_tps"] = round(prefill_tps, 2)
    out.update(_kv_figures(engine, spec, agreement))
    return out


def reuse_overheads_ms(ttft_s: list[float], new: list[int], prefill_tps: float) -> list[float]:
    """Each turn's time to first token less its new tokens' prefill at `prefill_tps`, ms."""
    return [(t - n / prefill_tps) * 1e3 for t, n in zip(ttft_s, new, strict=True)]


def _mlx_lm_session(engine: Engine, prompts: list[list[dict[str, str]]]) -> list[tuple[float, int]]:
    """(time to first token, tokens prefilled) of each turn through mlx-lm's LRUPromptCache."""
    from mlx_lm import stream_generate
    from mlx_lm.models.cache import LRUPromptCache, make_prompt_cache

    from engine.prompt.chat import encode_chat

    def session(lm: Any) -> list[tuple[float, int]]:
        lru = LRUPromptCache(max_size=10)
        times = []
        for messages in prompts:
            tokens = encode_chat(lm.tokenizer, messages)
            t0 = time.perf_counter()
            cache, rest = lru.fetch_nearest_cache("model", tokens)
            if cache is None:
                cache, rest = make_prompt_cache(lm.model), tokens
            for _ in stream_generate(
                lm.model, lm.tokenizer, rest, max_tokens=1, prompt_cache=cache
            ):
                break
            times.append((time.perf_counter() - t0, len(rest)))
            lru.insert_cache("model", tokens, cache)
        return times

    return engine.run(session).result()


def _reply_tokens(result: Any) -> list[int]:
    return list(result.token_ids[result.stats.prompt_tokens :])


def _first_difference(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _gap_at(engine: Engine, request: ChatRequest, position: int, theirs: list[int]) -> float | None:
    """How much likelier full precision found its own token than the 8-bit cache's at
    `position` of the reply (None where the latter is not among its 5 likeliest)."""
    import dataclasses

    again = engine.chat(dataclasses.replace(request, logprobs=5))
    if again.logprobs is None or position >= len(again.logprobs) or position >= len(theirs):
        return None
    at = again.logprobs[position]
    other = next((t.logprob for t in at.top if t.token == theirs[position]), None)
    own = at.model_logprob if at.model_logprob is not None else at.logprob
    return None if other is None else own - other


def _kv_figures(engine: Engine, spec: str, agreement: list[str]) -> dict[str, Any]:
    import mlx.core as mx

    from engine.memory.kv_precision import cache_maker
    from engine.memory.prompt_cache import cache_nbytes

    def sizes(lm: Any) -> dict[int | None, int]:
        tokens = mx.array(encode_prompt(lm)[:512])[None]
        found = {}
        for bits in (None, 8, 4):
            cache = cache_maker(bits)(lm.model)
            lm.model(tokens, cache=cache)
            mx.eval([c.state for c in cache])
            found[bits] = cache_nbytes(cache)
        return found

    def encode_prompt(lm: Any) -> list[int]:
        from engine.prompt.chat import encode_chat

        return encode_chat(lm.tokenizer, [{"role": "system", "content": agent_system_prompt()}])

    nbytes = engine.run(sizes).result()
    out: dict[str, Any] = {
        "kv8_memory_ratio": round(nbytes[8] / nbytes[None], 4),
        "kv4_memory_ratio": round(nbytes[4] / nbytes[None], 4),
    }
    kv8 = Engine(kv_bits=8, speculative=False)
    try:
        kv8.load_model(spec).result()
        full_tps, q_tps, same = [], [], 0
        matched, total, gaps = 0, 0, []
        # rounds of two prompts: each round's rate is its replies' tokens over their time
        rounds: list[tuple[Timed, Timed]] = []
        for start in range(0, len(agreement), 2):
            full, quant = Timed(0, 0.0, 0), Timed(0, 0.0, 0)
            for i in range(start, min(start + 2, len(agreement))):
                request = _request([{"role": "user", "content": agreement[i]}], max_tokens=24)
                if i % 2 == 0:  # which goes first alternates from prompt to prompt
                    a, b = engine.chat(request), kv8.chat(request)
                else:
                    b, a = kv8.chat(request), engine.chat(request)
                full_tps.append(a.stats.decode_tps)
                q_tps.append(b.stats.decode_tps)
                full, quant = full + _decode(a), quant + _decode(b)
                same += a.text == b.text
                ours, theirs = _reply_tokens(a), _reply_tokens(b)
                first = _first_difference(ours, theirs)
                matched += first
                total += max(len(ours), len(theirs))
                if first < max(len(ours), len(theirs)):
                    gaps.append(_gap_at(engine, request, first, theirs))
            rounds.append((quant, full))
    finally:
        kv8.close()
    out["kv8_tps_ratio"] = round(statistics.median(q_tps) / statistics.median(full_tps), 3)
    ratios = round_ratios((q.rate, f.rate) for q, f in rounds)
    out["kv8_tps_ratio_spread"] = spread(ratios)
    side_s = min(t.seconds for pair in rounds for t in pair)
    out.update(verdict("kv8_tps_ratio", out["kv8_tps_ratio_spread"], len(ratios), side_s=side_s))
    out["kv8_greedy_agreement"] = round(same / len(agreement), 3)
    out["kv8_token_agreement"] = round(matched / max(1, total), 3)
    known = [g for g in gaps if g is not None]
    out["kv8_first_difference_gap"] = round(statistics.median(known), 3) if known else None
    out["kv_prompts"] = len(agreement)
    return out


def _decode(result: Any) -> Timed:
    """A reply's tokens after the first over the time from its first token to its last."""
    stats = result.stats
    return Timed.from_rate(max(0, stats.generated_tokens - 1), stats.decode_tps)
