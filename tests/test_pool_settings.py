"""The pool's per-model settings file, its errors (naming the file and the key), and the
choices the pool makes about memory, checked without loading a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.pool.memory import MIN_KV_BUDGET, Holder, kv_share, make_room, never_fits
from engine.pool.settings import ModelSettings, ModelSettingsError, read_settings_file
from tests.pool_support import ask

GOOD = """
[models.coder]
model = "org/coder-8b"
aliases = ["code"]
pin = true
idle_unload_minutes = 30
context_length = 16384
kv_cache_gb = 2
chat_template_kwargs = { enable_thinking = false }
sampling = { temperature = 0.6, top_p = 0.95, max_tokens = 4096 }

[models.small]
idle_unload_minutes = 0.5
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_settings_file_gives_each_model_its_settings(tmp_path: Path) -> None:
    coder, small = read_settings_file(_write(tmp_path, GOOD))
    assert (coder.name, coder.spec, coder.kind, coder.aliases) == (
        "coder",
        "org/coder-8b",
        None,  # unset: the kind it is listed as, or its files say
        ("code",),
    )
    s = coder.settings
    assert s.pin is True and s.idle_unload_s == 1800 and s.context_length == 16384
    assert s.kv_budget_bytes == 2 << 30 and s.template_kwargs == {"enable_thinking": False}
    defaults = s.sampling_defaults()
    assert (defaults.temperature, defaults.top_p, defaults.max_tokens) == (0.6, 0.95, 4096)
    assert small.spec is None and small.settings.idle_unload_s == 30


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[models.a]\nsampling = { temperature = 'hot' }", "models.a.sampling.temperature"),
        ("[models.a]\nsampling = { top_p = 0 }", "models.a.sampling.top_p"),
        ("[models.a]\nsampling = { tempurature = 1 }", "models.a.sampling.tempurature"),
        ("[models.a]\nidle_unload_minutes = -1", "models.a.idle_unload_minutes"),
        ("[models.a]\ncontext_length = 4.5", "models.a.context_length"),
        ("[models.a]\nkind = 'vision'", "models.a.kind"),
        ("[models.a]\npin = 'yes'", "models.a.pin"),
        ("[models.a]\nmodel = ''", "models.a.model"),
        ("[models.a]\nmodle = 'x'", "models.a.modle"),
        ("[models.a]\naliases = 'b'", "models.a.aliases"),
        ("[models.a]\nchat_template_kwargs = 1", "models.a.chat_template_kwargs"),
        ("[server]\nport = 1", "unknown key 'server'"),
        ("[models.a]\naliases = ['b']\n[models.b]\n", "the name 'b' is already models.a's"),
        ("[models.a\n", "not valid TOML"),
    ],
)
def test_a_bad_value_is_named_with_its_file_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ModelSettingsError) as caught:
        read_settings_file(path)
    assert str(caught.value).startswith(str(path)) and where in str(caught.value)


def test_a_missing_or_binary_file_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ModelSettingsError, match="no such file"):
        read_settings_file(tmp_path / "none.toml")
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ModelSettingsError, match="not UTF-8"):
        read_settings_file(binary)


def test_settings_over_others_keep_what_they_leave_unset() -> None:
    base = ModelSettings(pin=True, idle_unload_s=60, template_kwargs={"a": 1, "b": 2})
    mine = ModelSettings(idle_unload_s=5, template_kwargs={"b": 3})
    merged = mine.over(base)
    assert merged.pin is True and merged.idle_unload_s == 5
    assert merged.template_kwargs == {"a": 1, "b": 3}


def test_room_is_made_from_idle_unpinned_models_least_recently_used_first() -> None:
    holders = [
        Holder("old", 40, last_used=1, busy=False, pinned=False),
        Holder("pinned", 30, last_used=0, busy=False, pinned=True),
        Holder("new", 20, last_used=3, busy=False, pinned=False),
    ]
    assert make_room(holders, 10, 100) == ([], True, [])
    assert make_room(holders, 40, 100) == (["old"], True, [])
    assert make_room(holders, 60, 100) == (["old", "new"], True, [])
    assert never_fits(holders, 80, 100) and not never_fits(holders, 70, 100)
    busy = [Holder("busy", 60, 0, busy=True, pinned=False), Holder("idle", 30, 1, False, False)]
    victims, fits, waiting_for = make_room(busy, 50, 100)
    assert not fits and waiting_for == ["busy"]  # it waits: the busy model must finish
    # nothing else left: a model larger than the limit loads alone
    assert make_room([Holder("idle", 30, 1, False, False)], 150, 100) == (["idle"], True, [])


def test_a_lone_model_gets_the_engines_own_kv_budget_and_several_share_the_limit() -> None:
    gib = 1 << 30
    assert kv_share(12 * gib, 4 * gib, 1, 8 * gib) == 8 * gib  # alone: the engine's own
    assert kv_share(12 * gib, 2 * gib, 2, 8 * gib) == 4 * gib  # its half, less its weights
    assert kv_share(12 * gib, 7 * gib, 2, 8 * gib) == MIN_KV_BUDGET  # never nothing


def test_a_model_of_a_kind_without_a_loader_is_refused_when_listed(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from engine.pool import LoadOrder, ModelPool
    from engine.types import ModelInfo

    class Vectors:  # a backend as an embedding loader would make one
        info = ModelInfo("vectors", str(tmp_path), 1 << 20, 512, False)
        memory_bytes = 1 << 20

        def close(self) -> None:
            pass

    def load(order: LoadOrder) -> Future[Vectors]:
        future: Future[Vectors] = Future()
        future.set_result(Vectors())
        return future

    pool = ModelPool(wire_memory=False)
    try:
        with pytest.raises(ValueError, match="cannot load embedding models"):
            pool.add_model(str(tmp_path), kind="embedding")
    finally:
        pool.close()
    pool = ModelPool(wire_memory=False, loaders={"embedding": load})  # type: ignore[dict-item]
    try:
        name = pool.add_model(str(tmp_path), alias="vectors", kind="embedding")
        with pool.lease(name, "embedding").result(timeout=30) as lease:
            assert isinstance(lease.backend, Vectors)
            held = pool.snapshot.pool.find("vectors")  # type: ignore[union-attr]
            assert held is not None and held.kind == "embedding" and held.in_flight == 1
            assert held.memory_bytes == 1 << 20
        with pytest.raises(ValueError, match="is an embedding model, not a chat model"):
            pool.submit(ask(model=name))
    finally:
        pool.close()
