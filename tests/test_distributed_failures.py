"""When a rank freezes or hangs mid-reply, the reply ends with an error naming the rank and
its host within a bounded time, the group is stopped, and nothing in Corral's process hangs;
a killed Corral leaves no rank behind. (A killed rank: the last test of test_distributed.py.)
Also tensor parallelism (the tiny model's heads split in two) and load errors."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from engine.distributed import (
    DistributedConfig,
    DistributedEngine,
    loopback_hostfile,
)
from engine.engine import Engine
from engine.errors import ModelLoadError
from engine.types import (
    ChatEvent,
    ChatRequest,
    PrefillProgress,
    SamplingSettings,
    TextDelta,
)

pytestmark = pytest.mark.slow

# How long a reply may take to end after a failure before the test calls it hung: a guard,
# not a measure (the tests assert which mechanism ended it, from the error and its order).
HANG_GUARD_S = 600.0


def story(max_tokens: int = 400) -> ChatRequest:
    return ChatRequest(
        [{"role": "user", "content": "Write a long story about a ship."}],
        SamplingSettings(temperature=0.0, max_tokens=max_tokens),
    )


def gone(pid: int, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def reply_then(engine: DistributedEngine, act: threading.Event) -> tuple[object, float]:
    """Submit a long reply; once it is under way (its prompt processed), set `act` and time
    the rest."""
    first = threading.Event()

    def on_event(event: ChatEvent) -> None:
        if isinstance(event, TextDelta | PrefillProgress):
            first.set()

    handle = engine.submit(story(), on_event)
    deadline = time.monotonic() + 300
    while not first.wait(0.1):
        assert not handle.done(), f"the reply ended before it started: {handle.result().error}"
        assert time.monotonic() < deadline, "the reply did not start"
    act.set()
    started = time.monotonic()
    result = handle.result(timeout=HANG_GUARD_S)
    return result, time.monotonic() - started


def reply_with_a_rank_stopped(
    model_dir: Path, config: DistributedConfig, rank: int, *, warm: bool = False
) -> tuple[str, float]:
    """Start a group, begin a long reply and stop `rank` (SIGSTOP) once it is under way; the
    reply's error and the seconds from the stop to the reply's end. The group is closed
    after, and every rank must be gone."""
    engine = DistributedEngine(config)
    pids: list[int] = []
    try:
        engine.load_model(str(model_dir)).result(timeout=600)
        pids = list(engine.rank_pids)
        if warm:
            assert engine.chat(story(2)).error is None  # a first step can be slow here
        act = threading.Event()
        threading.Thread(
            target=lambda: act.wait() and os.kill(pids[rank], signal.SIGSTOP), daemon=True
        ).start()
        result, took = reply_then(engine, act)
    finally:
        if pids:
            try:
                os.kill(pids[rank], signal.SIGCONT)  # let a stopped rank take its SIGTERM
            except ProcessLookupError:
                pass
        engine.close()
    assert all(gone(pid) for pid in pids)
    return result.error or "", took  # type: ignore[attr-defined]


def test_a_frozen_rank_is_named_by_the_watchdog(tiny_model_dir: Path) -> None:
    config = DistributedConfig(loopback_hostfile(2), timeout_s=300, stall_s=6.0)
    error, took = reply_with_a_rank_stopped(tiny_model_dir, config, rank=1)
    assert "rank 1 (127.0.0.1) stopped answering" in error, error
    # the watchdog ended it, long before the timeout would have (a margin no load reaches)
    assert took < config.timeout_s, took


@pytest.fixture(scope="module")
def tiny_group(tiny_model_dir: Path) -> Iterator[DistributedEngine]:
    engine = DistributedEngine(DistributedConfig(loopback_hostfile(2), timeout_s=300))
    try:
        engine.load_model(str(tiny_model_dir)).result(timeout=600)
        yield engine
    finally:
        engine.close()


def test_tensor_parallel_where_the_heads_divide(
    tiny_group: DistributedEngine, tiny_engine: Engine
) -> None:
    info = tiny_group.group_info
    assert info is not None and info.mode == "tensor"
    request = ChatRequest(
        [{"role": "user", "content": "Hello there"}],
        SamplingSettings(temperature=0.0, max_tokens=12),
    )
    tiny_engine.set_speculative(False)  # as the group decodes: the same tokens computed
    try:
        one = tiny_engine.chat(request)
    finally:
        tiny_engine.set_speculative(True)
    many = tiny_group.chat(request)
    assert many.error is None
    assert many.token_ids == one.token_ids


def test_a_model_that_cannot_load_leaves_the_group_serving(
    tiny_group: DistributedEngine, tiny_model_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ModelLoadError, match="no such model folder"):
        tiny_group.load_model(str(tmp_path / "missing")).result(timeout=120)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "broken" / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(ModelLoadError, match=r"rank 0 \(this machine\).*rank 1 \(127.0.0.1\)"):
        tiny_group.load_model(str(tmp_path / "broken")).result(timeout=120)
    tiny_group.load_model(str(tiny_model_dir)).result(timeout=600)
    result = tiny_group.chat(story(3))
    assert result.error is None and result.stats.generated_tokens > 0


def test_a_stuck_rank_0_ends_the_reply_after_the_timeout(tiny_model_dir: Path) -> None:
    config = DistributedConfig(loopback_hostfile(2), timeout_s=15.0, stall_s=300)
    error, took = reply_with_a_rank_stopped(tiny_model_dir, config, rank=0, warm=True)
    assert "made no progress for 15 s" in error and "rank 1 (127.0.0.1)" in error, error
    # the timeout ended it, long before the stall watchdog would have
    assert took < config.stall_s, took


ORPHAN_SCRIPT = """
import sys, time
from engine.distributed import DistributedConfig, DistributedEngine, loopback_hostfile
engine = DistributedEngine(DistributedConfig(loopback_hostfile(2)))
engine.load_model(sys.argv[1]).result(timeout=600)
print(*engine.rank_pids, flush=True)
time.sleep(600)
"""


def test_no_rank_outlives_a_killed_corral(tiny_model_dir: Path) -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_SCRIPT, str(tiny_model_dir)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
    )
    try:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2, "the group did not start"
    finally:
        proc.kill()  # as a crash would: no close, no goodbye
        proc.wait()
    # rank 0 sees its connection close, stops the other ranks and itself
    assert all(gone(pid, within=60) for pid in pids)
