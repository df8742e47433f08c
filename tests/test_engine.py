"""The engine's request loop on the tiny model: streaming, cancellation, stop conditions."""

from __future__ import annotations

import threading

import pytest

from engine.engine import Engine
from engine.types import (
    ChatRequest,
    Finished,
    PrefillProgress,
    SamplingSettings,
    StopReason,
    TextDelta,
)


def _request(text: str = "Hello there", **sampling) -> ChatRequest:
    sampling.setdefault("temperature", 0.0)
    return ChatRequest([{"role": "user", "content": text}], SamplingSettings(**sampling))


def test_streams_deltas_then_one_finished_event(tiny_engine: Engine) -> None:
    events = list(tiny_engine.submit(_request(max_tokens=12)).events(timeout=60))
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    result = events[-1].result
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == result.text and text
    assert result.stop_reason in (StopReason.LENGTH, StopReason.EOS)
    stats = result.stats
    assert stats.prompt_tokens > 5 and 0 < stats.generated_tokens <= 12
    assert stats.ttft_s > 0 and stats.total_s >= stats.ttft_s


def test_max_tokens_stops_with_length(tiny_engine: Engine) -> None:
    result = tiny_engine.chat(_request(max_tokens=5))
    assert result.stats.generated_tokens == 5
    assert result.stop_reason == StopReason.LENGTH


def test_stop_string_cuts_the_reply(tiny_engine: Engine) -> None:
    free = tiny_engine.chat(_request(max_tokens=16))
    assert len(free.text) > 6
    stop = free.text[3:6]
    result = tiny_engine.chat(_request(max_tokens=16, stop=[stop]))
    assert result.stop_reason == StopReason.STOP_STRING
    assert result.text == free.text[: free.text.find(stop)]
    assert stop not in result.text


def test_same_seed_same_text(tiny_engine: Engine) -> None:
    # A prompt of its own: "Hello there" may be cached from rows other tests decoded side
    # by side, whose KV values differ from a lone row's in the last float bits, and at
    # temperature 1.5 that can tip a draw (the seed fixes the draws, not the cache).
    text = "Same seed, same words?"
    a = tiny_engine.chat(_request(text, max_tokens=16, temperature=1.5, seed=7))
    b = tiny_engine.chat(_request(text, max_tokens=16, temperature=1.5, seed=7))
    c = tiny_engine.chat(_request(text, max_tokens=16, temperature=1.5, seed=8))
    assert a.text == b.text
    assert a.text != c.text


def test_cancel_during_prefill_ends_within_one_chunk(tiny_engine: Engine) -> None:
    long_prompt = " ".join(f"word{i}" for i in range(1500))  # several prefill chunks
    progress: list[PrefillProgress] = []
    handle_box: list = []

    def on_event(event) -> None:
        if isinstance(event, PrefillProgress):
            progress.append(event)
            handle_box[0].cancel()  # cancel as soon as the first chunk is done

    handle = tiny_engine.submit(_request(long_prompt, max_tokens=5), on_event=on_event)
    handle_box.append(handle)
    result = handle.result(timeout=120)
    assert result.stop_reason == StopReason.CANCELLED
    assert result.stats.generated_tokens == 0
    assert len(progress) == 1 and progress[0].done < progress[0].total
    # The engine is ready for the next request.
    assert tiny_engine.chat(_request(max_tokens=3)).stop_reason == StopReason.LENGTH


def test_cancel_during_decoding(tiny_engine: Engine) -> None:
    handle_box: list = []

    def on_event(event) -> None:
        if isinstance(event, TextDelta):
            handle_box[0].cancel()

    handle = tiny_engine.submit(_request(max_tokens=200), on_event=on_event)
    handle_box.append(handle)
    result = handle.result(timeout=120)
    assert result.stop_reason == StopReason.CANCELLED
    assert 1 <= result.stats.generated_tokens <= 3
    assert tiny_engine.chat(_request(max_tokens=3)).stop_reason == StopReason.LENGTH


def test_cancel_from_another_thread_while_queued(tiny_engine: Engine) -> None:
    gate = threading.Event()
    tiny_engine.run(lambda lm: gate.wait(30))  # keep the engine busy
    handle = tiny_engine.submit(_request(max_tokens=50))
    handle.cancel()
    gate.set()
    assert handle.result(timeout=60).stop_reason == StopReason.CANCELLED


def test_bad_settings_are_an_error_result_not_a_crash(tiny_engine: Engine) -> None:
    result = tiny_engine.chat(_request(top_p=0.0))
    assert result.stop_reason == StopReason.ERROR
    assert "top_p" in result.error
    assert tiny_engine.chat(_request(max_tokens=2)).stats.generated_tokens == 2


def test_no_model_loaded_is_an_error() -> None:
    eng = Engine()
    try:
        result = eng.chat(_request(max_tokens=2))
        assert result.stop_reason == StopReason.ERROR
        assert "no model" in result.error
    finally:
        eng.close()


def test_missing_model_folder_fails_the_load(tmp_path) -> None:
    from engine.errors import ModelLoadError

    eng = Engine()
    try:
        with pytest.raises(ModelLoadError, match="no such model folder"):
            eng.load_model(str(tmp_path / "missing")).result(timeout=60)
    finally:
        eng.close()


def test_sampling_options_run(tiny_engine: Engine) -> None:
    result = tiny_engine.chat(
        _request(
            max_tokens=8,
            temperature=0.9,
            top_p=0.9,
            top_k=20,
            min_p=0.05,
            repetition_penalty=1.3,
            seed=1,
        )
    )
    assert result.stats.generated_tokens == 8


def test_next_turn_reuses_the_cached_prefix(tiny_engine: Engine) -> None:
    first_turn = [{"role": "user", "content": "A question about prefix caching"}]
    first = tiny_engine.chat(ChatRequest(first_turn, SamplingSettings(temperature=0, max_tokens=6)))
    second_turn = first_turn + [
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "And a follow-up"},
    ]
    second = tiny_engine.chat(
        ChatRequest(second_turn, SamplingSettings(temperature=0, max_tokens=6))
    )
    # Everything up to the first reply was computed already and is reused (the last
    # prompt token may merge with the reply's first characters when the text is re-tokenized).
    assert second.stats.cached_tokens >= first.stats.prompt_tokens - 1
    assert tiny_engine.snapshot.cache.hits >= 1
    plan = tiny_engine.snapshot.memory
    assert plan is not None and plan.kv_budget_bytes > 0


def test_prefix_reuse_can_be_turned_off(tiny_model_dir) -> None:
    eng = Engine(reuse_prefixes=False)
    try:
        eng.load_model(str(tiny_model_dir)).result()
        request = _request("Same prompt twice", max_tokens=3)
        eng.chat(request)
        assert eng.chat(request).stats.cached_tokens == 0
    finally:
        eng.close()


def test_a_callback_gets_the_events_and_nothing_queues_them_twice(tiny_engine: Engine) -> None:
    seen: list[object] = []
    handle = tiny_engine.submit(_request(max_tokens=16), on_event=seen.append)
    result = handle.result(timeout=60)
    assert isinstance(seen[-1], Finished) and seen[-1].result is result
    assert sum(isinstance(e, TextDelta) for e in seen) >= 1
    assert handle.backlog == 0  # the callback had them: no second copy waits in a queue
    with pytest.raises(RuntimeError, match="on_event"):
        next(handle.events())
    queued = tiny_engine.submit(_request(max_tokens=4))
    queued.result(timeout=60)
    assert queued.backlog >= 2  # without a callback the events wait for events()
    assert isinstance(list(queued.events(timeout=5))[-1], Finished) and queued.backlog == 0


def test_stats_read_from_another_thread_during_generation_are_whole_snapshots(
    tiny_model_dir,
) -> None:
    """A thread hammers the statistics while the engine thread serves requests that store,
    reuse and evict prompt caches: every read is a snapshot the engine thread published
    (never a walk over the trie it is changing), so it never fails and always adds up."""
    # small: requests evict each other's caches (which share their prefixes' blocks)
    eng = Engine(kv_budget_bytes=1 << 19)
    eng.load_model(str(tiny_model_dir)).result()
    stop = threading.Event()
    failures: list[BaseException] = []
    reads = 0

    def hammer() -> None:
        nonlocal reads
        last = -1
        while not stop.is_set():
            try:
                snapshot = eng.snapshot
                assert snapshot.model is not None and snapshot.memory is not None
                cache = snapshot.cache
                # each finished request looked the cache up once: a torn read breaks this
                assert cache.hits + cache.misses == snapshot.requests_done
                assert 0 <= cache.bytes <= cache.budget_bytes
                assert snapshot.requests_done >= last and cache.entries >= 0
                last = snapshot.requests_done
                reads += 1
            except BaseException as exc:  # collected and re-raised on the test's thread
                failures.append(exc)
                return

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        for i in range(24):
            text = f"Question {i % 5}: " + "and more words " * (i % 7)
            result = eng.chat(_request(text, max_tokens=4, temperature=1.0, seed=i))
            assert result.error is None
    finally:
        stop.set()
        thread.join(timeout=30)
        snapshot = eng.snapshot
        eng.close()
    assert not failures, failures[0]
    assert reads > 100 and snapshot.requests_done == 24
    assert snapshot.cache.evictions > 0 and snapshot.cache.hits > 0
