"""Model stores laid out exactly as each app lays them out (LM Studio, the Hugging Face cache,
Ollama, Corral's own cache), in a temporary home folder: the `stores` fixture."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as T
from gguf_support import write_arch_gguf

from benchmarks.gguf_fixtures import write_quant_gguf


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


def make_stores(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A home folder with every store, and Corral's cache, filled the way each app fills it
    (HOME and CORRAL_CACHE_DIR point at them for the test)."""
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
    write_arch_gguf(odd / "mamba.gguf", "mamba")

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
    from engine.library.load import ensure_gguf_imported

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
        "q6k": q6k,
    }
