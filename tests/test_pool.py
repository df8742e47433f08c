"""The model pool on two tiny models: requests by the model they name, each model with its
own prompt cache and disk-tier folder, LRU unloading under the limit, pinning, idle
unloading, a model mid-reply never unloaded, and a request that cannot get its model's
memory in time answered as unavailable."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.serving_pool import watching
from engine.errors import ModelNotFoundError, ModelUnavailableError
from engine.pool import DEFAULT_LOAD_WAIT_S, MODEL_BUSY, ModelPool, ModelSettings
from engine.types import Finished, StopReason, TextDelta
from tests.pool_support import KV, MiB, ask, make_pool, state_of, wait_until


@pytest.fixture(scope="module")
def second_model_dir(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> Path:
    """A second tiny model: other weights, the same tokenizer."""
    from benchmarks.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("second"), default_model_dir, seed=1)


@pytest.fixture(scope="module")
def both(tiny_model_dir: Path, second_model_dir: Path):
    """A pool of the two tiny models (room for both), for the tests that unload nothing."""
    pool = make_pool(tiny_model_dir)
    pool.add_model(str(second_model_dir), alias="second", settings=KV)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def swapping(tiny_model_dir: Path, second_model_dir: Path):
    """(pool, a, b): the two tiny models under a limit that holds one of them, never both.
    Each test leaves nothing pinned, no idle unloading and the limit as it found it."""
    pool = make_pool(tiny_model_dir, second_model_dir)
    a, b = (m.id for m in pool.snapshot.pool.models)  # type: ignore[union-attr]
    for name in (a, b):
        pool.ensure_loaded(name).result(timeout=120)
    sizes = [m.memory_bytes for m in pool.snapshot.pool.models]  # type: ignore[union-attr]
    limit = max(sizes) + min(sizes) // 2
    pool.set_memory_limit(limit)
    wait_until(lambda: _held(pool) <= limit, what="one model unloaded")
    yield pool, a, b
    pool.close()


@pytest.fixture
def swap(swapping):
    pool, a, b = swapping
    yield pool, a, b
    for name in (a, b):
        pool.pin_model(name, False)
    pool.set_idle_unload(None)


def _loaded_only(pool: ModelPool, name: str) -> None:
    """Load `name` (unloading the other) and wait until the pool holds it alone."""
    pool.ensure_loaded(name).result(timeout=120)
    wait_until(
        lambda: [m.id for m in pool.snapshot.pool.models if m.state != "unloaded"] == [name],  # type: ignore[union-attr]
        what=f"{name} alone",
    )


def _held(pool: ModelPool) -> int:
    snap = pool.snapshot.pool
    assert snap is not None
    return snap.held_bytes


def test_requests_go_to_the_model_they_name_by_id_alias_or_folder(
    both: ModelPool, tiny_model_dir: Path, second_model_dir: Path
) -> None:
    snap = both.snapshot.pool
    assert snap is not None
    ids = [m.id for m in snap.models]
    assert ids == [tiny_model_dir.name, "second"]  # the alias names the model it lists
    assert snap.models[0].default and not snap.models[1].default
    assert snap.models[1].context_length == 8192 and snap.models[1].kind == "chat"
    for name, expected in (
        (None, tiny_model_dir.name),
        (tiny_model_dir.name, tiny_model_dir.name),
        ("second", "second"),
        (second_model_dir.name, "second"),  # the folder's own name
        (str(second_model_dir), "second"),  # the folder
        (str(second_model_dir) + "/", "second"),  # written another way
    ):
        handle = both.submit(ask(model=name))
        assert handle.request.model == expected and handle.result(timeout=60).error is None
    with pytest.raises(ModelNotFoundError, match="'gpt-4o' is not one this server serves"):
        both.submit(ask(model="gpt-4o"))


def test_each_model_keeps_its_own_prompt_cache(both: ModelPool) -> None:
    prompt = "A prompt long enough to be kept in the prompt cache, " * 4
    assert both.chat(ask(prompt, model="second", max_tokens=2)).error is None
    again = both.chat(ask(prompt, model="second", max_tokens=2))
    assert again.stats.cached_tokens >= again.stats.prompt_tokens - 2  # its own prefix
    # The default model reads the same prompt: it reuses only what it computed itself
    # (the chat template's system prompt), exactly as for a prompt nobody sent before.
    fresh = both.chat(ask("Nobody sent this one before, " * 8, max_tokens=2))
    other = both.chat(ask(prompt, max_tokens=2))
    assert other.stats.cached_tokens == fresh.stats.cached_tokens < 30


def test_under_a_limit_for_one_each_model_is_answered_in_turn(swap) -> None:
    pool, a, b = swap
    with watching(pool) as seen:
        for name, other in ((a, b), (b, a), (a, b)):
            result = pool.chat(ask(model=name))
            assert result.error is None, result.error
            assert state_of(pool, name) == "loaded"
            # the least recently used model made room, each time (read after the reply,
            # not polled: an unload can be quicker than any poll)
            assert state_of(pool, other) != "loaded"
    limit = pool.memory_limit_bytes
    assert all(s.held_bytes <= limit for s in seen)
    assert max(sum(m.loaded for m in s.models) for s in seen) == 1


def test_a_model_mid_reply_is_never_unloaded(swap) -> None:
    pool, a, b = swap
    _loaded_only(pool, a)
    started = []
    long_reply = pool.submit(
        ask("Write on.", model=a, max_tokens=80),
        on_event=lambda e: started.append(e) if isinstance(e, TextDelta) else None,
    )
    wait_until(lambda: bool(started), what="a's first token")
    with watching(pool) as seen:
        other = pool.submit(ask(model=b))
        result = long_reply.result(timeout=120)
        second = other.result(timeout=120)
    assert result.error is None and result.stop_reason == StopReason.LENGTH
    assert result.stats.generated_tokens == 80  # finished, never cut short
    assert second.error is None
    for snap in seen:  # b never started loading while a had its reply in flight
        by_id = {m.id: m for m in snap.models}
        if by_id[a].in_flight:
            assert by_id[b].state in ("unloaded", "failed"), snap
            assert by_id[a].state == "loaded"
    waiting = [m for s in seen for m in s.models if m.id == b and m.waiting]
    assert waiting and waiting[0].queue_position == 1


def test_a_request_that_cannot_get_memory_in_time_is_unavailable(swap) -> None:
    pool, a, b = swap
    _loaded_only(pool, a)
    pool.set_load_wait(0.5)
    try:
        with pool.lease(a).result(timeout=120):  # a is busy for as long as this holds it
            result = pool.chat(ask(model=b))
            assert result.error_kind == "unavailable" and result.error_code == MODEL_BUSY
            assert f"model {b} could not be loaded within 0.5 s" in (result.error or "")
            assert f"{a} (1 request)" in (result.error or "")
            with pytest.raises(ModelUnavailableError):
                pool.lease(b, wait_s=0.2).result(timeout=30)
    finally:
        pool.set_load_wait(DEFAULT_LOAD_WAIT_S)
    assert pool.chat(ask(model=b)).error is None  # once a is free, b loads


def test_a_pinned_model_is_never_unloaded_for_another(swap) -> None:
    pool, a, b = swap
    _loaded_only(pool, a)
    pool.pin_model(a)
    refused = pool.chat(ask(model=b))
    assert refused.error_code == MODEL_BUSY and "pinned models hold" in (refused.error or "")
    assert state_of(pool, a) == "loaded"
    pool.pin_model(a, False)
    assert pool.chat(ask(model=b)).error is None
    assert state_of(pool, a) == "unloaded"  # unpinned, it made room


def test_idle_models_unload_after_their_time(both: ModelPool, tiny_model_dir: Path) -> None:
    a = tiny_model_dir.name
    assert both.chat(ask(model=a)).error is None
    assert both.chat(ask(model="second")).error is None
    with both._state.lock:  # the second model's own setting: never
        both._state.entries["second"].base = ModelSettings(idle_unload_s=0).over(KV)
    both.set_idle_unload(0.3)
    try:
        wait_until(lambda: state_of(both, a) == "unloaded", timeout=30, what="idle-unloaded")
        assert state_of(both, "second") == "loaded"
        assert both.snapshot.pool.find("second").idle_unload_s is None  # type: ignore[union-attr]
        assert both.snapshot.pool.find(a).idle_unload_s == 0.3  # type: ignore[union-attr]
    finally:
        both.set_idle_unload(None)
    assert both.chat(ask(model=a)).error is None  # back on the next request


def test_each_model_has_its_own_disk_tier_folder(
    tiny_model_dir: Path, second_model_dir: Path, tmp_path: Path
) -> None:
    options = {"disk_cache_dir": tmp_path, "disk_budget_bytes": 64 * MiB, "learn_pass_cost": False}
    pool = make_pool(tiny_model_dir, second_model_dir, engine_options=options)
    prompt = "Kept on disk once the memory lets go of it, and never read by another model. " * 3
    try:
        a, b = (m.id for m in pool.snapshot.pool.models)  # type: ignore[union-attr]
        assert pool.chat(ask(prompt, model=a, max_tokens=2)).error is None
        pool.unload_model(a).result(timeout=60)  # its prompt cache is written to disk
        other = pool.chat(ask(prompt, model=b, max_tokens=2))
        assert other.error is None and other.stats.cached_tokens == 0
        back = pool.chat(ask(prompt, model=a, max_tokens=2))
        assert back.stats.cached_tokens > 20  # restored from a's own folder
        folders = [p for p in tmp_path.iterdir() if p.is_dir()]
        assert len(folders) == 2  # one namespace per model identity
    finally:
        pool.close()


def test_a_request_waiting_for_its_model_can_be_cancelled(swap) -> None:
    pool, a, b = swap
    _loaded_only(pool, a)
    with pool.lease(a).result(timeout=120):
        handle = pool.submit(ask(model=b))
        wait_until(lambda: pool.snapshot.pool.find(b).waiting == 1)  # type: ignore[union-attr]
        handle.cancel()
        result = handle.result(timeout=30)
    assert result.stop_reason == StopReason.CANCELLED
    wait_until(lambda: pool.snapshot.pool.find(b).waiting == 0)  # type: ignore[union-attr]


def test_model_settings_reach_its_requests(tiny_model_dir: Path, thinking_model_dir: Path) -> None:
    pool = make_pool(tiny_model_dir)
    thinking = pool.add_model(
        str(thinking_model_dir),
        settings=ModelSettings(
            kv_budget_bytes=KV.kv_budget_bytes,
            template_kwargs={"enable_thinking": False, "custom_flag": 1},
            context_length=512,
        ),
    )
    try:
        handle = pool.submit(ask(model=thinking))
        events = list(handle.events(timeout=120))
        assert isinstance(events[-1], Finished)
        request = handle.request
        assert request.sampling.think is False  # the switch is the request's default
        assert request.template_kwargs == {"enable_thinking": False, "custom_flag": 1}
        info = pool.snapshot.pool.find(thinking)  # type: ignore[union-attr]
        assert info is not None and info.context_length == 512
        long = pool.chat(ask("word " * 600, model=thinking))
        assert long.error_code == "context_length_exceeded"
    finally:
        pool.close()


def test_the_chats_earlier_model_stays_loaded_while_it_fits_then_leaves_the_list(
    tiny_model_dir: Path, second_model_dir: Path
) -> None:
    pool = make_pool(engine_options={"learn_pass_cost": False})  # automatic KV budgets
    try:
        first = pool.load_model(str(tiny_model_dir)).result(timeout=120).name
        alone = pool.snapshot.pool.find(first).kv_budget_bytes  # type: ignore[union-attr]
        second = pool.load_model(str(second_model_dir)).result(timeout=120).name
        snap = pool.snapshot.pool
        assert snap is not None and snap.default is not None and snap.default.id == second
        # each pick of the chat gets the whole cache alone: the earlier one made room, and
        # was only listed because the chat had picked it
        assert snap.find(second).kv_budget_bytes == alone  # type: ignore[union-attr]
        wait_until(lambda: [m.id for m in pool.snapshot.pool.models] == [second])  # type: ignore[union-attr]
        # with a budget both fit in, the earlier pick stays loaded until it is unloaded
        pool.set_kv_budget(KV.kv_budget_bytes).result(timeout=60)
        assert pool.load_model(str(tiny_model_dir)).result(timeout=120).name == first
        snap = pool.snapshot.pool
        assert snap is not None and snap.find(second).state == "loaded"  # type: ignore[union-attr]
        pool.unload_model(second).result(timeout=60)
        assert [m.id for m in pool.snapshot.pool.models] == [first]  # type: ignore[union-attr]
    finally:
        pool.close()
