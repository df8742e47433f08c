"""One chat over the default model split across two ranks on loopback (`mlx.launch -n 2
--backend ring`), against the single-process engine: the same greedy text, JSON and tool
calls, prefix reuse, stop strings, cancellation, the server; and, last, a rank killed
mid-reply. One group serves the module; token counts stay small (every step crosses between
two processes on a shared 2-core CPU).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from server_support import openai_client, serving

from engine.distributed import (
    DistributedConfig,
    DistributedEngine,
    DistributedError,
    loopback_hostfile,
)
from engine.engine import Engine
from engine.runtime.handle import RequestHandle
from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    SamplingSettings,
    StopReason,
    TextDelta,
)

pytestmark = pytest.mark.slow

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def group() -> Iterator[DistributedEngine]:
    engine = DistributedEngine(DistributedConfig(loopback_hostfile(2), timeout_s=300))
    try:
        engine.load_model("default").result(timeout=600)
        yield engine
    finally:
        engine.close()


def greedy(text: str, max_tokens: int = 8, stop: list[str] | None = None) -> ChatRequest:
    settings = SamplingSettings(temperature=0.0, max_tokens=max_tokens, stop=stop or [])
    return ChatRequest([{"role": "user", "content": text}], settings)


def both(
    single: Engine, group: DistributedEngine, request: ChatRequest
) -> tuple[ChatResult, ChatResult]:
    # A group decodes without speculation, whose last token is never fed: the single engine
    # decodes the same way, so the token ids sent and computed compare too.
    was = single.speculative
    single.set_speculative(False)
    try:
        one = single.chat(request)
    finally:
        single.set_speculative(was)
    many = group.chat(request)
    assert one.error is None and many.error is None, (one.error, many.error)
    return one, many


def test_the_model_is_split_in_two_with_a_plan_per_rank(
    group: DistributedEngine, default_engine: Engine
) -> None:
    info = group.group_info
    assert info is not None and info.size == 2
    assert info.mode == "pipeline"  # SmolLM2's 9 heads do not split in two
    whole = default_engine.snapshot.model
    assert whole is not None
    for rank in info.ranks:
        assert 0 < rank.weights_bytes < whole.weights_bytes  # a share, not the whole model
        assert rank.kv_budget_bytes > 0 and rank.plan.fits
    memory = group.snapshot.memory
    assert memory is not None and memory.kv_budget_bytes == info.ranks[0].kv_budget_bytes


def test_greedy_text_is_the_single_process_text(
    group: DistributedEngine, default_engine: Engine
) -> None:
    one, many = both(default_engine, group, greedy("What is the capital of France?"))
    assert many.text == one.text and many.text
    assert many.token_ids == one.token_ids
    assert many.stop_reason == one.stop_reason


def test_stop_strings_end_the_reply_as_on_one_machine(
    group: DistributedEngine, default_engine: Engine
) -> None:
    request = greedy("What is the capital of France?", 12, stop=["France"])
    one, many = both(default_engine, group, request)
    assert many.stop_reason == StopReason.STOP_STRING == one.stop_reason
    assert many.text == one.text and "France" not in many.text


def test_json_schema_reply(group: DistributedEngine, default_engine: Engine) -> None:
    request = greedy("What is 2 + 2? Reply in JSON.", 12)
    request.constraint = ConstraintSpec("json_schema", json.dumps(ANSWER), "answer")
    one, many = both(default_engine, group, request)
    assert many.text == one.text
    assert isinstance(json.loads(many.text)["answer"], int)
    assert many.stats.constrained and not many.incomplete


def test_checked_constraint_travels_to_rank_0(group: DistributedEngine) -> None:
    report = group.check_constraint(ConstraintSpec("json_schema", json.dumps(ANSWER), "answer"))
    assert report.ok and report.spec.compiled is not None
    request = greedy("What is 2 + 2? Reply in JSON.", 12)
    request.constraint = report.spec
    result = group.chat(request)
    assert result.error is None and "answer" in json.loads(result.text)
    bad = group.check_constraint(ConstraintSpec("regex", "(unclosed", "bad"))
    assert not bad.ok and bad.errors


def test_tool_call_reply(group: DistributedEngine, default_engine: Engine) -> None:
    request = greedy("What is the weather in Paris?", 30)
    request.tools = [WEATHER]  # type: ignore[list-item]
    request.tool_choice = "required"
    one, many = both(default_engine, group, request)
    assert [c.name for c in many.tool_calls] == ["get_weather"]
    assert [c.arguments for c in many.tool_calls] == [c.arguments for c in one.tool_calls]


def test_second_turn_reuses_the_first_turns_cache(
    group: DistributedEngine, default_engine: Engine
) -> None:
    first = greedy("Name a fruit.", 6)
    one, many = both(default_engine, group, first)
    follow = [
        *first.messages,
        {"role": "assistant", "content": many.text},
        {"role": "user", "content": "And a vegetable?"},
    ]
    second = ChatRequest(follow, first.sampling)
    one, many = both(default_engine, group, second)
    assert many.stats.cached_tokens >= len(first.messages[0]["content"] or "") // 4
    assert many.stats.cached_tokens > many.stats.prompt_tokens // 2
    assert many.text == one.text
    assert group.snapshot.cache.hits >= 1


def test_a_branch_copies_the_shared_prefix_on_every_rank(
    group: DistributedEngine, default_engine: Engine
) -> None:
    system = {"role": "system", "content": "You are a terse assistant. Answer in one word."}
    fruit = ChatRequest([system, {"role": "user", "content": "Name a fruit."}], greedy("").sampling)
    color = ChatRequest([system, {"role": "user", "content": "Name a colour."}], fruit.sampling)
    copies = group.snapshot.cache.copies
    for request in (fruit, color, fruit):  # the second branches off the first, which stays
        one, many = both(default_engine, group, request)
        assert many.text == one.text
    assert many.stats.cached_tokens > 0
    assert group.snapshot.cache.copies > copies  # the shared prefix was copied, not recomputed


def long_reply_under_way(group: DistributedEngine) -> RequestHandle:
    """A 400-token reply, once its first text has arrived."""
    first_text = threading.Event()

    def on_event(event: ChatEvent) -> None:
        if isinstance(event, TextDelta):
            first_text.set()

    handle = group.submit(greedy("Write a long story about a ship.", 400), on_event)
    assert first_text.wait(300)
    return handle


def test_cancel_mid_reply(group: DistributedEngine) -> None:
    handle = long_reply_under_way(group)
    cancelled_at = time.monotonic()
    handle.cancel()
    result = handle.result(timeout=120)
    assert result.stop_reason == StopReason.CANCELLED
    assert 0 < result.stats.generated_tokens < 400
    assert time.monotonic() - cancelled_at < 60
    after = group.chat(greedy("What is 2 + 2?", 3))  # the group goes on serving
    assert after.error is None and after.text


def test_the_server_serves_from_the_group(group: DistributedEngine) -> None:
    loaded = group.snapshot.model
    assert loaded is not None
    with serving(group) as server:
        reply = openai_client(server, timeout=300).chat.completions.create(
            model=loaded.name,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=6,
            temperature=0.0,
        )
    assert "Paris" in (reply.choices[0].message.content or "")


def test_running_code_on_the_model_is_refused(group: DistributedEngine) -> None:
    with pytest.raises(Exception, match="rank 0"):
        group.run(lambda loaded: None).result()


def test_last_a_killed_rank_ends_the_reply_naming_rank_and_host(group: DistributedEngine) -> None:
    """Last in this module: it takes the shared group down (the fixture then has nothing to
    close)."""
    import psutil

    pids = list(group.rank_pids)
    handle = long_reply_under_way(group)
    os.kill(pids[1], signal.SIGKILL)
    killed_at = time.monotonic()
    result = handle.result(timeout=120)
    assert time.monotonic() - killed_at < 30
    assert result.stop_reason == StopReason.ERROR and result.error_kind == "unavailable"
    error = result.error or ""
    assert "rank 1 (127.0.0.1) was killed (SIGKILL)" in error, error
    assert group.failure == error
    # later requests fail at once, with the same reason
    assert group.chat(greedy("What is 2 + 2?", 3)).error == error
    with pytest.raises(DistributedError):
        group.load_model("default").result(timeout=5)
    # rank 0 is stopped too, and closing takes no time
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pids[0]) and psutil.Process(pids[0]).status() != "zombie":
        assert time.monotonic() < deadline, "rank 0 outlived the group"
        time.sleep(0.2)
    started = time.monotonic()
    group.close()
    assert time.monotonic() - started < 15
