"""What a model in a pool is called before it loads: its id (what /v1/models lists and
responses carry), the other names a request may use for it, the key that tells two specs
of one model apart from two models, and the kind its files say it is. Nothing here reads
weights."""

from __future__ import annotations

from pathlib import Path

from engine.library.discovery import OLLAMA_PREFIX
from engine.library.load import DEFAULT_MODEL, DEFAULT_MODEL_NAME, local_folder
from engine.types import ModelKind


def model_id(spec: str) -> str:
    """The id of the model `spec` loads: the default model's name, Ollama's name, a repo
    id as written, or a folder's or file's name."""
    if spec == DEFAULT_MODEL:
        return DEFAULT_MODEL_NAME
    if spec.startswith(OLLAMA_PREFIX):
        return spec[len(OLLAMA_PREFIX) :]
    path = Path(spec).expanduser()
    if is_repo_id(spec) and not path.exists():
        return spec
    if spec.lower().endswith(".gguf"):
        return path.stem
    return path.name or spec


def is_repo_id(spec: str) -> bool:
    """Whether `spec` reads as a Hugging Face repo id ("org/name")."""
    return spec.count("/") == 1 and not spec.startswith((".", "/", "~"))


def spec_key(spec: str) -> str:
    """One key per model, however its spec is written: a path resolved, anything else as
    is. Two specs with one key are one model in a pool (its names), never two copies."""
    if spec == DEFAULT_MODEL or spec.startswith(OLLAMA_PREFIX):
        return spec
    path = Path(spec).expanduser()
    if path.exists() or not is_repo_id(spec):
        return str(path.resolve())
    return spec


def spec_names(spec: str) -> tuple[str, ...]:
    """Names besides the id that a request may use for the model `spec` loads: the spec
    as written and its resolved path."""
    names = [spec]
    key = spec_key(spec)
    if key != spec:
        names.append(key)
    return tuple(names)


def check_exists(spec: str) -> None:
    """ModelLoadError, as loading would say it, for a spec that names a file or folder
    that is not there (checked before a pool lists it: nothing is unloaded for it)."""
    from engine.errors import ModelLoadError

    if spec == DEFAULT_MODEL or spec.startswith(OLLAMA_PREFIX) or is_repo_id(spec):
        return
    path = Path(spec).expanduser()
    if not path.exists():
        what = "no such file" if spec.lower().endswith(".gguf") else "no such model folder"
        raise ModelLoadError(f"{path}: {what}")


def spec_kind(spec: str) -> ModelKind:
    """The kind of model `spec` is, as its folder's files say (engine.embeddings.families:
    an embedding model or a cross-encoder reranker Corral can serve); "chat" for anything
    else, and for a repo not downloaded yet (its kind is given then: --embedding-model,
    --rerank-model, or `kind` in the settings file)."""
    from engine.embeddings.families import folder_kind

    if spec == DEFAULT_MODEL or spec.startswith(OLLAMA_PREFIX) or spec.lower().endswith(".gguf"):
        return "chat"
    folder = local_folder(spec)
    return (folder_kind(folder) if folder is not None else None) or "chat"
