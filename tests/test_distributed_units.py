"""The distributed pieces that need no group: hostfiles, per-rank memory plans, the launcher's
reading of what ranks report, the request handle, sharding decisions, the pipelined llama
forward pass; and the `--distributed` commands (one run over two loopback ranks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.distributed.hostfile import HostfileError, parse_hostfile, read_hostfile
from engine.distributed.info import GroupInfo
from engine.distributed.launch import GroupProcess, RankExit
from engine.distributed.protocol import HEARTBEAT, rebuild_error, strip_request
from engine.errors import ModelLoadError
from engine.types import (
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    Finished,
    GenerationStats,
    StopReason,
    TextDelta,
)

LOOPBACK = [{"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}, {"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}]
TWO_MACS = {
    "hosts": [
        {"ssh": "localhost", "ips": ["192.168.2.1"]},
        {"ssh": "studio.local", "ips": ["192.168.2.2"]},
    ]
}


# ---- hostfiles ----


def test_a_loopback_hostfile_and_an_mlx_style_one_are_read(tmp_path: Path) -> None:
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(LOOPBACK))
    hf = read_hostfile(path)
    assert hf.size == 2 and hf.backend == "ring"
    assert [hf.host_name(r) for r in range(2)] == ["this machine", "127.0.0.1"]
    macs = parse_hostfile(TWO_MACS)
    assert macs.host_name(0) == "localhost" and macs.host_name(1) == "studio.local"
    launched = macs.launch_json()
    assert launched["hosts"][0]["ssh"] == "127.0.0.1"  # rank 0 starts here, not over ssh
    assert launched["hosts"][0]["ips"] == ["192.168.2.1"]
    assert launched["hosts"][1]["ssh"] == "studio.local" and launched["backend"] == "ring"


def test_jaccl_needs_no_ring_addresses() -> None:
    hf = parse_hostfile(
        {
            "backend": "jaccl",
            "hosts": [
                {"ssh": "127.0.0.1", "ips": ["10.0.0.1"], "rdma": [None, "rdma_en3"]},
                {"ssh": "mini.local", "rdma": ["rdma_en3", None]},
            ],
        }
    )
    assert hf.backend == "jaccl" and hf.hosts[1].rdma == ("rdma_en3", None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}], "at least two hosts"),
        ({"hosts": LOOPBACK, "backend": "mpi"}, "backend must be one of"),
        ({"hosts": LOOPBACK, "extra": 1}, "unknown key 'extra'"),
        ([LOOPBACK[0], {"ssh": "b.local"}], r"host 1 \(b.local\): the ring backend needs 'ips'"),
        ([LOOPBACK[0], {"ssh": "b.local", "ips": ["not-an-ip"]}], "'not-an-ip' is not an IP"),
        ([LOOPBACK[0], {"ssh": "-oProxyCommand=x", "ips": ["10.0.0.2"]}], "'ssh' must be"),
        ([{"ssh": "far.example.com", "ips": ["10.0.0.1"]}, LOOPBACK[1]], "must be this machine"),
        ({"hosts": LOOPBACK, "envs": ["NOEQUALS"]}, "NAME=VALUE"),
    ],
)
def test_bad_hostfiles_say_what_is_wrong(data: Any, message: str) -> None:
    with pytest.raises(HostfileError, match=message):
        parse_hostfile(data, "hosts.json")


def test_unreadable_hostfiles_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(HostfileError, match="no such hostfile"):
        read_hostfile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(HostfileError, match=r"bad.json: not valid JSON"):
        read_hostfile(bad)


# ---- memory plans ----


def test_the_group_plan_keeps_as_many_tokens_as_the_tightest_rank() -> None:
    from engine.distributed.plan import RankFigures, decode_report, encode_report, group_plan

    gib = 1 << 30
    big = RankFigures(0, 4 * gib, 1000, 0, 64 * gib)
    small = RankFigures(1, 4 * gib, 3000, 0, 16 * gib)
    plan, ranks = group_plan([big, small], ["this machine", "mini.local"], None)
    pairs = zip(ranks, [big, small], strict=True)
    tokens = min(r.plan.kv_budget_bytes // f.kv_bytes_per_token for r, f in pairs)
    assert plan.kv_budget_bytes == tokens * 1000 and ranks[1].kv_budget_bytes == tokens * 3000
    assert ranks[1].kv_budget_bytes <= ranks[1].plan.kv_budget_bytes and plan.fits
    # a rank whose share does not fit is named in the warning
    tiny = RankFigures(1, 30 * gib, 3000, 0, 16 * gib)
    plan, ranks = group_plan([big, tiny], ["this machine", "mini.local"], None)
    assert not plan.fits and plan.warning is not None and "rank 1 (mini.local)" in plan.warning
    info = GroupInfo("ring", "pipeline", tuple(ranks))
    assert "rank 1 (mini.local) 32.21 GB" in info.summary()
    # what ranks report round-trips through int32, errors included
    row = encode_report(small, None)
    assert row.dtype == np.int32 and decode_report(row, 1) == (small, None)
    assert decode_report(encode_report(None, "no such file: é"), 1) == (None, "no such file: é")


def test_kv_bytes_per_token_of_a_real_cache(tiny_model: Any) -> None:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.distributed.plan import kv_bytes_per_token

    model, _ = tiny_model
    cache = make_prompt_cache(model)
    model(mx.array([[1]]), cache=cache)
    # 2 layers x (keys + values) x 2 KV heads x 32 dims x 4 bytes (float32)
    args = model.args
    head_dim = args.hidden_size // args.num_attention_heads
    expected = args.num_hidden_layers * 2 * args.num_key_value_heads * head_dim * 4
    assert kv_bytes_per_token(cache) == expected


# ---- what the launcher reads ----


def test_the_launcher_reads_heartbeats_and_exits() -> None:
    group = GroupProcess(parse_hostfile(LOOPBACK), "/tmp/none.sock", b"k" * 32)
    try:
        group._note(f"{HEARTBEAT} 1 42")
        assert group.heartbeats[1][1] == 42
        group._note("\x1b[33m[WARN] Node with rank 0 exited with code -15 \x1b[0m")
        group._note("Traceback (most recent call last):")
        group._note("ValueError: something broke")
        group._note("\x1b[33m[WARN] Node with rank 1 exited with code -9 \x1b[0m")
        # the rank that ended on its own is the cause, not the one mlx.launch then stopped
        assert group.first_exit() == RankExit(1, -9)
        assert RankExit(1, -9).describe() == "was killed (SIGKILL)"
        assert RankExit(2, 1).describe() == "exited with status 1"
        assert group.tail(1) == ["ValueError: something broke"]
        command = group.command()
        assert "--hostfile" in command and "engine.distributed.rank" in command
        assert b"k".hex() * 32 not in " ".join(command)  # the key is never on a command line
    finally:
        group.stop()


def test_the_first_finished_event_wins() -> None:
    from engine.distributed.client import RemoteRequestHandle, failed_result

    cancelled: list[int] = []
    handle = RemoteRequestHandle(7, ChatRequest([]), None, cancelled.append)
    handle.emit(TextDelta("a"))
    handle.emit(Finished(failed_result("rank 1 (mini.local) was killed (SIGKILL)")))
    late = ChatResult("late", StopReason.EOS, GenerationStats())
    handle.emit(Finished(late))  # rank 0's own ending arrives after the watchdog's: ignored
    handle.emit(TextDelta("b"))
    events = list(handle.events(timeout=1))
    assert [type(e).__name__ for e in events] == ["TextDelta", "Finished"]
    assert handle.result().error_kind == "unavailable"
    handle.cancel()
    handle.cancel()
    assert cancelled == [7]


def test_a_compiled_grammar_travels_as_its_text() -> None:
    from engine.constraints.validate import validate_constraint

    report = validate_constraint(ConstraintSpec("regex", "[0-9]+", "digits"))
    request = ChatRequest([{"role": "user", "content": "x"}], constraint=report.spec)
    plain, grammar = strip_request(request)
    assert plain.constraint is not None and plain.constraint.compiled is None
    assert report.spec.compiled is not None and grammar == report.spec.compiled.grammar
    assert request.constraint is report.spec  # the caller's request is left as it was
    assert isinstance(rebuild_error("model", "x.gguf: missing"), ModelLoadError)
    assert isinstance(rebuild_error("other", "boom"), RuntimeError)


# ---- sharding ----


def test_tensor_parallel_only_where_the_heads_divide(tiny_model: Any) -> None:
    from engine.distributed.shard import _tensor_parallel_problem

    model, _ = tiny_model
    assert _tensor_parallel_problem(model, 2) is None
    assert "num_attention_heads (4) does not divide among 3" in (
        _tensor_parallel_problem(model, 3) or ""
    )


def test_the_pipelined_llama_forward_matches_llamas(tiny_model_dir: Path) -> None:
    """With one stage the pipelined forward pass (masks, caches, layers) must be llama's."""
    import mlx.core as mx
    import mlx_lm
    from mlx_lm.models.cache import make_prompt_cache

    from engine.distributed.shard import _pipeline_llama

    class OneRank:
        def rank(self) -> int:
            return 0

        def size(self) -> int:
            return 1

    plain = mlx_lm.load(str(tiny_model_dir))[0]
    piped = mlx_lm.load(str(tiny_model_dir))[0]
    _pipeline_llama(piped, OneRank())  # type: ignore[arg-type]
    tokens = mx.array([[1, 5, 9, 13, 2]])
    a_cache, b_cache = make_prompt_cache(plain), make_prompt_cache(piped)
    assert len(b_cache) == len(a_cache)
    for step in (tokens, mx.array([[7]])):
        a, b = plain(step, cache=a_cache), piped(step, cache=b_cache)
        assert mx.allclose(a, b, atol=1e-5).item()


def test_a_model_that_splits_neither_way_is_refused(tiny_model: Any) -> None:
    import mlx.nn as nn

    from engine.distributed.shard import shard_model

    class TwoRanks:
        def rank(self) -> int:
            return 0

        def size(self) -> int:
            return 2

    with pytest.raises(ModelLoadError, match="cannot be split across machines"):
        shard_model(nn.Linear(4, 4), TwoRanks())  # type: ignore[arg-type]
    model, _ = tiny_model
    with pytest.raises(ModelLoadError, match="tensor-parallel: .*does not divide among 3"):
        shard_model(model, type("Three", (TwoRanks,), {"size": lambda self: 3})(), "tensor")  # type: ignore[arg-type]


# ---- the commands ----


def test_a_bad_hostfile_stops_the_command_before_anything_starts(tmp_path: Path) -> None:
    from engine.cli import main

    path = tmp_path / "hosts.json"
    path.write_text(json.dumps([LOOPBACK[0]]))
    code = main(["chat", "--prompt", "hi", "--distributed", str(path)])
    assert code == 2


@pytest.mark.slow
def test_chat_distributed_over_two_loopback_ranks(tmp_path: Path, tiny_model_dir: Path) -> None:
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps(LOOPBACK))
    run = subprocess.run(
        [sys.executable, "-m", "engine", "chat", "--distributed", str(hosts)]
        + ["--model", str(tiny_model_dir), "--prompt", "Hello", "--max-tokens", "5"]
        + ["--temperature", "0", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 3, run.stderr[-3000:]  # cut at its 5 tokens: not the model's end
    reply = json.loads(run.stdout)
    assert reply["error"] is None and reply["stats"]["generated_tokens"] == 5
    assert reply["ending"] == "cut"


def test_a_bad_split_or_timeout_is_refused_before_anything_starts() -> None:
    from engine.distributed import DistributedConfig, DistributedEngine, loopback_hostfile

    with pytest.raises(ValueError, match="shard must be auto, tensor or pipeline"):
        DistributedEngine(DistributedConfig(loopback_hostfile(), shard="diagonal"))
    with pytest.raises(ValueError, match="timeouts must be positive"):
        DistributedEngine(DistributedConfig(loopback_hostfile(), timeout_s=0))


def test_the_packaged_app_needs_the_hostfile_to_name_a_python(monkeypatch) -> None:
    from dataclasses import replace

    from engine.distributed import DistributedConfig, DistributedEngine, loopback_hostfile
    from engine.distributed.launch import rank_python

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    with pytest.raises(HostfileError, match='add "python"'):
        DistributedEngine(DistributedConfig(loopback_hostfile()))
    named = replace(loopback_hostfile(), python="/opt/corral/bin/python")
    assert rank_python(named) == "/opt/corral/bin/python"
