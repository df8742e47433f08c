"""The library finds models in fixture folders laid out like each app's store (Corral's cache,
the Hugging Face cache, LM Studio, Ollama), describes them from their headers, loads them,
and deletes nothing but Corral's own copies."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as T

from benchmarks.gguf_fixtures import write_quant_gguf
from engine.errors import LibraryError, ModelLoadError
from engine.library.budget import GiB, MemoryBudget
from engine.library.discovery import LibraryRoots, ollama_blob, scan_library
from engine.library.paths import delete_own_copy

BIG = MemoryBudget(False, 64 * GiB)


def _snapshot(hub: Path, repo_id: str, files: dict[str, Path], revision: str = "a" * 40) -> Path:
    """A repo in the Hugging Face cache: blobs, refs/main, snapshot links to the blobs."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name, src in files.items():
        data = src.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


def _ollama(root: Path, model: str, tag: str, blob_source: Path | None) -> Path:
    data = blob_source.read_bytes() if blob_source else b"gone"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": len(data)},
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:0", "size": 9},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    if blob_source:
        (root / "blobs" / digest.replace(":", "-")).write_bytes(data)
    return manifest


@pytest.fixture()
def stores(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A home folder with every store, and Corral's cache, filled the way each app fills it."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for var in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS"):
        monkeypatch.delenv(var, raising=False)
    corral = tmp_path / "corral-cache"
    monkeypatch.setenv("CORRAL_CACHE_DIR", str(corral))
    ggufs = tmp_path / "ggufs"
    ggufs.mkdir()
    q4k = write_quant_gguf(ggufs / "TinyLlama-Q4_K.gguf", T.Q4_K)
    q6k = write_quant_gguf(ggufs / "TinyLlama-Q6_K.gguf", T.Q6_K, seed=1)

    # LM Studio: PUBLISHER/REPO/FILE.gguf (and a vision projector to skip), an MLX folder
    lms = home / ".lmstudio" / "models" / "lmstudio-community" / "TinyLlama-GGUF"
    lms.mkdir(parents=True)
    shutil.copy(q4k, lms / q4k.name)
    (lms / "mmproj-TinyLlama-f16.gguf").write_bytes(q4k.read_bytes()[:1000])
    shutil.copytree(tiny_model_dir, home / ".lmstudio" / "models" / "mlx-community" / "Tiny-mlx")
    odd = home / ".lmstudio" / "models" / "someone" / "Mamba-GGUF"
    odd.mkdir(parents=True)
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(odd / "mamba.gguf"), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((8, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    # Hugging Face cache: an MLX repo and a GGUF repo
    hub = home / ".cache" / "huggingface" / "hub"
    files = {p.name: p for p in tiny_model_dir.iterdir()}
    _snapshot(hub, "mlx-community/Tiny-4bit", files)
    _snapshot(hub, "bartowski/TinyLlama-GGUF", {q6k.name: q6k}, revision="b" * 40)

    # Ollama: a model, and a manifest whose blob is missing
    ollama = home / ".ollama" / "models"
    _ollama(ollama, "tinyllama", "q4k", q4k)
    _ollama(ollama, "ghost", "latest", None)

    # Corral's own: a GGUF import, a finished download, an unfinished one
    from engine.models import ensure_gguf_imported

    imported = ensure_gguf_imported(q6k)
    done = corral / "downloads" / "mlx-community--Tiny-4bit"
    shutil.copytree(tiny_model_dir, done)
    (done / "corral_download.json").write_text(json.dumps({"repo_id": "mlx-community/Tiny-4bit"}))
    partial = corral / "downloads" / "org--half"
    (partial / ".partial").mkdir(parents=True)
    (partial / ".partial" / "model.safetensors").write_bytes(b"x" * 1000)
    return {
        "home": home,
        "corral": corral,
        "imported": imported,
        "lms": lms,
        "hub": hub,
        "ollama": ollama,
        "q4k": q4k,
    }


def _by_name(models):
    return {m.name: m for m in models}


def test_every_store_is_listed_with_what_people_need_to_choose(stores: dict) -> None:
    started = time.perf_counter()
    found = scan_library(LibraryRoots.default(stores["corral"]), BIG)
    elapsed = time.perf_counter() - started
    by = _by_name(found)
    assert set(by) == {
        "TinyLlama-Q6_K (imported)",
        "mlx-community/Tiny-4bit",  # Corral's download and the HF cache's copy
        "org/half",
        "bartowski/TinyLlama-GGUF/TinyLlama-Q6_K.gguf",
        "TinyLlama-Q4_K",
        "mlx-community/Tiny-mlx",
        "mamba",
        "tinyllama:q4k",
        "ghost:latest",
    }
    assert [m.source for m in found] == sorted(
        (m.source for m in found), key=("corral", "huggingface", "lmstudio", "ollama").index
    )
    lm = by["TinyLlama-Q4_K"]
    assert (lm.source, lm.kind, lm.architecture, lm.quantization) == (
        "lmstudio",
        "gguf",
        "llama",
        "Q4_K",
    )
    import gguf

    reader = gguf.GGUFReader(str(stores["q4k"]))  # gguf's own count of the values
    assert lm.parameters == sum(int(t.n_elements) for t in reader.tensors)
    assert lm.context_length == 2048
    assert lm.size_bytes == stores["q4k"].stat().st_size and lm.can_run and not lm.deletable
    assert lm.repo_id == "lmstudio-community/TinyLlama-GGUF"
    ollama = by["tinyllama:q4k"]
    assert ollama.spec == "ollama:tinyllama:q4k" and ollama.can_run
    ghost = by["ghost:latest"]
    assert not ghost.can_run and "missing" in (ghost.reason or "")
    assert "architecture not supported yet: mamba" in (by["mamba"].reason or "")
    mlx = [m for m in found if m.name == "mlx-community/Tiny-4bit"]
    assert {m.source for m in mlx} == {"corral", "huggingface"}
    for m in mlx:
        assert (m.kind, m.architecture, m.quantization) == ("mlx", "llama", "float32")
        assert m.parameters and m.parameters > 6_000_000 and m.context_length == 8192
    imported = by["TinyLlama-Q6_K (imported)"]
    assert imported.deletable and imported.quantization == "8-bit"
    assert imported.origin and imported.origin.endswith("TinyLlama-Q6_K.gguf")
    assert not by["org/half"].can_run and "resume" in (by["org/half"].reason or "")
    assert not any("mmproj" in m.path for m in found)
    assert elapsed < 10


def test_memory_budget_decides_can_run(stores: dict) -> None:
    tiny = MemoryBudget(False, 2 * GiB)  # nothing left after the OS's headroom
    found = scan_library(LibraryRoots.default(stores["corral"]), tiny)
    runnable = [m for m in found if m.reason and m.reason.startswith("needs about")]
    assert runnable and all("this machine's budget is" in (m.reason or "") for m in runnable)


def test_ollama_model_loads_by_name_and_a_missing_blob_is_clear(stores: dict) -> None:
    from engine.models import load_model

    loaded = load_model("ollama:tinyllama:q4k")
    assert loaded.info.name == "tinyllama:q4k"
    with pytest.raises(ModelLoadError, match="ghost:latest.*missing") as err:
        load_model("ollama:ghost")
    assert "ollama pull ghost:latest" in str(err.value)
    blob = ollama_blob("tinyllama:q4k", stores["ollama"])
    assert blob.read_bytes()[:4] == b"GGUF"


def _tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.lstat().st_size for p in sorted(folder.rglob("*"))}


def test_only_corrals_own_copies_are_deleted(stores: dict) -> None:
    corral, home = stores["corral"], stores["home"]
    before = _tree(home)
    found = scan_library(LibraryRoots.default(corral), BIG)
    for m in found:
        if m.deletable:
            continue
        with pytest.raises(LibraryError, match="not one of Corral's own copies"):
            delete_own_copy(m.path, corral)
    # a link inside Corral's folder to another app's model: the link goes, the model stays
    link = corral / "models" / "linked"
    link.symlink_to(stores["lms"])
    delete_own_copy(link, corral)
    assert not link.exists() and stores["lms"].is_dir()
    # names that climb out of Corral's folders
    for sneaky in (corral / "models" / ".." / "..", corral / "models" / "..", corral):
        with pytest.raises(LibraryError):
            delete_own_copy(sneaky, corral)
    for m in found:
        if m.deletable:
            assert delete_own_copy(m.path, corral) > 0
            assert not Path(m.path).exists()
    assert _tree(home) == before  # no other app's file changed
    assert (
        list((corral / "models").iterdir()) == [] and list((corral / "downloads").iterdir()) == []
    )


def test_cli_lists_the_library(stores: dict, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {m["source"] for m in listed} == {"corral", "huggingface", "lmstudio", "ollama"}
    assert main(["models"]) == 0
    table = capsys.readouterr().out
    assert "tinyllama:q4k" in table and "no: blob" in table
    assert main(["models", "--delete", str(stores["lms"] / "TinyLlama-Q4_K.gguf")]) == 2
    assert "not one of Corral's own copies" in capsys.readouterr().err
    assert (stores["lms"] / "TinyLlama-Q4_K.gguf").exists()
