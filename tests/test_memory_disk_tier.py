"""The prompt cache's disk tier: evicted prefixes written to disk, found again after a
restart, never read by another model or KV precision, damaged files removed unread, the
disk budget kept, and two processes sharing one folder."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Tool {i}: reads file number {i} and returns its lines." for i in range(24)
)


def _chat(engine, text: str, history: list[dict] | None = None, max_tokens: int = 4):
    from engine.types import ChatRequest, SamplingSettings

    messages = [{"role": "system", "content": SYSTEM}, *(history or [])]
    messages.append({"role": "user", "content": text})
    settings = SamplingSettings(temperature=0.0, max_tokens=max_tokens)
    return engine.chat(ChatRequest(messages=messages, sampling=settings))


def _engine(model_dir: Path, folder: Path, **kwargs):
    from engine.engine import Engine

    eng = Engine(disk_cache_dir=folder, **kwargs)
    eng.load_model(str(model_dir)).result()
    return eng


def _entry_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.safetensors"))


def test_restart_serves_the_prefix_from_disk(tiny_model_dir: Path, tmp_path: Path) -> None:
    first = _engine(tiny_model_dir, tmp_path)
    try:
        before = _chat(first, "List the files.")
    finally:
        first.close()  # closing writes what memory holds
    assert _entry_files(tmp_path), "closing the engine wrote no entry to disk"
    second = _engine(tiny_model_dir, tmp_path)
    try:
        again = _chat(second, "List the files.")
        stats = second.snapshot.cache
    finally:
        second.close()
    assert stats.disk_hits == 1
    assert stats.disk_restored_tokens > 100  # the system prompt, not recomputed
    assert again.text == before.text
    assert again.stats.cached_tokens == stats.disk_restored_tokens


def test_disk_hit_logits_equal_a_fresh_prefill(tiny_model, tmp_path: Path) -> None:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.memory.disk_tier import DiskTier
    from engine.memory.prompt_cache import PromptCacheTrie
    from engine.memory.tiered import TieredPromptCache

    model, tokenizer = tiny_model
    tokens = tokenizer.encode(SYSTEM)
    assert len(tokens) > 100
    store = TieredPromptCache(PromptCacheTrie(1 << 30), DiskTier(tmp_path / "id", "id"))
    cache, _ = store.fetch(model, tokens)
    model(mx.array(tokens)[None], cache=cache)
    store.store(tokens, cache)
    store.trie.budget_bytes = 0  # evict: the entry goes to disk
    store.disk.flush()
    assert store.stats().entries == 0 and store.stats().disk_entries == 1

    query = tokens + tokenizer.encode(" Next")
    restored, n = store.fetch(model, query)
    assert n == len(tokens) and store.stats().disk_hits == 1
    got = model(mx.array(query[n:])[None], cache=restored)[0, -1]
    fresh = model(mx.array(query)[None], cache=make_prompt_cache(model))[0, -1]
    assert mx.allclose(got, fresh, atol=1e-4).item()
    store.close()


def test_another_model_or_precision_never_reads_an_entry(
    tiny_model_dir: Path, tmp_path: Path, default_model_dir: Path
) -> None:
    from benchmarks.tiny_model import build_tiny_model

    cache = tmp_path / "cache"
    eng = _engine(tiny_model_dir, cache)
    try:
        _chat(eng, "Open the first file.")
    finally:
        eng.close()
    other_dir = build_tiny_model(tmp_path / "other-model", default_model_dir, seed=7)
    for model_dir, kwargs in ((tiny_model_dir, {"kv_bits": 8}), (other_dir, {})):
        eng = _engine(model_dir, cache, **kwargs)
        try:
            _chat(eng, "Open the first file.")
            assert eng.snapshot.cache.disk_hits == 0
        finally:
            eng.close()
    folders = {p.parent for p in _entry_files(cache)}
    assert len(folders) == 3  # one identity each: the model, at 8 bits, the other model


def test_foreign_entry_copied_into_a_folder_is_removed(tiny_model_dir: Path, tmp_path: Path):
    eng = _engine(tiny_model_dir, tmp_path)
    try:
        _chat(eng, "Open the first file.")
    finally:
        eng.close()
    eng = _engine(tiny_model_dir, tmp_path, kv_bits=4)
    eng.close()  # made the 4-bit folder, empty
    (ours,) = _entry_files(tmp_path)
    four_bit = next(p for p in tmp_path.iterdir() if p.is_dir() and p != ours.parent)
    (four_bit / ours.name).write_bytes(ours.read_bytes())
    eng = _engine(tiny_model_dir, tmp_path, kv_bits=4)
    try:
        _chat(eng, "Open the first file.")
        assert eng.snapshot.cache.disk_hits == 0
        assert eng.snapshot.cache.disk_removed_bad == 1
    finally:
        eng.close()
    # what is there now is the 4-bit engine's own entry for the same tokens, written at close
    assert (four_bit / ours.name).read_bytes() != ours.read_bytes()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_entry_is_skipped_and_removed(
    tiny_model_dir: Path, tmp_path: Path, damage: str
) -> None:
    eng = _engine(tiny_model_dir, tmp_path)
    try:
        expected = _chat(eng, "Read the second file.")
    finally:
        eng.close()
    (entry,) = _entry_files(tmp_path)
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\x07" * 5000)
    eng = _engine(tiny_model_dir, tmp_path)
    try:
        reply = _chat(eng, "Read the second file.")
        stats = eng.snapshot.cache
    finally:
        eng.close()
    assert stats.disk_hits == 0 and stats.disk_removed_bad == 1
    assert reply.text == expected.text  # computed again, not read from the damaged file
    assert entry not in _entry_files(tmp_path) or entry.read_bytes() != data[: len(data) // 2]


def test_disk_budget_holds_under_a_flood_of_prefixes(tiny_model, tmp_path: Path) -> None:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.memory.disk_tier import DiskTier

    model, _ = tiny_model
    one = 2 * 2 * 2 * 64 * 32 * 4  # layers * (k, v) * kv heads * tokens * head dim * float32
    tier = DiskTier(tmp_path / "id", "id", budget_bytes=int(3.5 * one) + 3 * 4096)
    for i in range(20):
        tokens = [1000 + i] + list(range(2, 65))
        cache = make_prompt_cache(model)
        model(mx.array(tokens)[None], cache=cache)
        tier.put(tokens, cache)
    tier.flush()
    files = _entry_files(tmp_path)
    assert tier.nbytes <= tier.budget_bytes
    assert sum(f.stat().st_size for f in files) == tier.nbytes
    assert 1 <= len(files) == tier.entries <= 3
    assert tier.counts["evictions"] == 20 - len(files)
    # least recently used out: the newest prefix is there, the first is gone
    assert tier.best([1019, *range(2, 65)], better_than=0) is not None
    assert tier.best([1000, *range(2, 65)], better_than=0) is None
    tier.close()


_WRITER = textwrap.dedent(
    """
    import sys
    import mlx.core as mx
    import mlx_lm
    from mlx_lm.models.cache import make_prompt_cache
    from pathlib import Path
    from engine.memory.disk_tier import DiskTier

    model, _ = mlx_lm.load(sys.argv[1])
    tier = DiskTier(Path(sys.argv[2]), "id", budget_bytes=int(sys.argv[4]))
    for i in range(12):
        tokens = [int(sys.argv[3]) + i] + list(range(2, 65))
        cache = make_prompt_cache(model)
        model(mx.array(tokens)[None], cache=cache)
        tier.put(tokens, cache)
    tier.close()
    """
)


def test_two_processes_share_one_folder(tiny_model_dir: Path, tmp_path: Path) -> None:
    import numpy as np

    from engine.memory.disk_format import entry_name
    from engine.memory.disk_tier import DiskTier

    folder = tmp_path / "id"
    budget = 10 * 70_000
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tiny_model_dir), str(folder), str(base)]
            + [str(budget)],
            cwd=Path(__file__).resolve().parents[1],
        )
        for base in (1000, 2000)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0
    tier = DiskTier(folder, "id", budget_bytes=budget)
    files = _entry_files(tmp_path)
    assert tier.counts["removed_bad"] == 0  # no half-written or damaged file
    assert len(files) == tier.entries and tier.nbytes <= budget
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
    assert tier.entries >= 8  # the budget holds about 10: the writers evicted each other's
    kept = 0
    for base in (1000, 2000):  # every entry either writer left is whole and loads
        for i in range(12):
            tokens = [base + i, *range(2, 65)]
            name = entry_name(np.array(tokens))
            if (folder / name).exists():
                assert tier.best(tokens, better_than=0) == (name, 64)
                assert tier.load(name, tokens, 64) is not None
                kept += 1
    assert kept == tier.entries
    tier.close()
