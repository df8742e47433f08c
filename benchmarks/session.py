"""Prefix-cache hit rate over a scripted chat session, driven through the Engine's chat API.

The session has several turns, a regenerate, an edit that branches, a second conversation
sharing the system prompt, and a switch back to the first branch. The hit rate is cached
prompt tokens over the tokens a perfect cache could have reused, both counted on the tokens
actually sent: for each request, the longest prefix it shares with anything sent or
computed before (at most all but its last token, which must be computed for logits).
"""

from __future__ import annotations

from typing import Any

from engine.engine import Engine
from engine.memory.store import common_prefix
from engine.types import ChatMessage, ChatRequest, ChatResult, SamplingSettings

SYSTEM = "You are Corral, a concise and friendly assistant running on the user's own Mac."


def run_session_hit_rate(engine: Engine, *, max_tokens: int = 12) -> dict[str, Any]:
    """Run the scripted session on `engine` and return its hit-rate figures."""
    settings = SamplingSettings(temperature=0.0, max_tokens=max_tokens)
    # Start cold: what earlier requests left in the cache is not part of this session.
    engine.run(lambda _: engine.prompt_cache.clear()).result()
    seen: list[list[int]] = []
    cached = perfect = 0
    steps: list[dict[str, Any]] = []

    def ask(label: str, messages: list[ChatMessage]) -> ChatResult:
        nonlocal cached, perfect
        result = engine.chat(ChatRequest(messages, settings))
        if result.error:
            raise RuntimeError(result.error)
        prompt = result.token_ids[: result.stats.prompt_tokens]
        best = max((common_prefix(prompt, s) for s in seen), default=0)
        best = min(best, len(prompt) - 1)
        cached += result.stats.cached_tokens
        perfect += best
        steps.append(
            {
                "step": label,
                "prompt": len(prompt),
                "cached": result.stats.cached_tokens,
                "reusable": best,
            }
        )
        seen.append(result.token_ids)
        return result

    def user(text: str) -> ChatMessage:
        return {"role": "user", "content": text}

    def assistant(result: ChatResult) -> ChatMessage:
        return {"role": "assistant", "content": result.text}

    chat: list[ChatMessage] = [{"role": "system", "content": SYSTEM}, user("What is a KV cache?")]
    r = ask("turn 1", chat)
    chat += [assistant(r), user("Why does it make chat faster?")]
    r = ask("turn 2", chat)
    chat += [assistant(r), user("Give me one example.")]
    r = ask("turn 3", chat)
    ask("regenerate turn 3", chat)
    chat += [assistant(r), user("Summarise in five words.")]
    ask("turn 4", chat)
    edited = chat[:1] + [user("What is a prefix trie?")]
    r_edit = ask("edit message 1", edited)
    ask("turn 2 on the edited branch", edited + [assistant(r_edit), user("And an LRU?")])
    other: list[ChatMessage] = [
        {"role": "system", "content": SYSTEM},
        user("Write a haiku about rain."),
    ]
    ask("second conversation", other)
    ask("back to the first branch", chat)
    return {
        "engine_session_hit_rate": round(cached / perfect, 4) if perfect else 1.0,
        "engine_session_cached_tokens": cached,
        "engine_session_reusable_tokens": perfect,
        "engine_session_steps": steps,
    }
