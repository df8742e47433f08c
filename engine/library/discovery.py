"""The model library: every model already on this computer, wherever an app put it.

Four stores are scanned (FACTS.md, "Other apps' model stores"): Corral's own cache (GGUF
imports and downloads), the Hugging Face cache (repos with safetensors, and GGUF files),
LM Studio's models folders (GGUF files and MLX folders) and Ollama's store (manifests naming
GGUF blobs). Each model is described from its headers only (GGUF metadata with arrays
skipped, safetensors headers, config.json), so a scan of many gigabytes takes moments and
never loads MLX. Scanning only reads; nothing outside Corral's cache is ever changed.
"""

from __future__ import annotations

import json
import os
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gguf import LlamaFileType

from engine.errors import ModelLoadError
from engine.files import read_text_limited
from engine.library.architectures import ARCHITECTURES
from engine.library.gguf_file import GGUFHeader, read_header
from engine.library.import_cache import read_marker
from engine.library.quants import CHOICES, SUPPORTED_TYPES
from engine.memory.budget import MemoryBudget, gb

SOURCES = ("corral", "huggingface", "lmstudio", "ollama")
OLLAMA_PREFIX = "ollama:"
_OLLAMA_MODEL = "application/vnd.ollama.image.model"
_OLLAMA_REGISTRY = "registry.ollama.ai"
_MAX_JSON = 1 << 20  # manifests and configs are a few KB
_MAX_SAFETENSORS_HEADER = 1 << 27
# mlx-lm's own renames (mlx_lm.utils.MODEL_REMAPPING) for the common families.
_MLX_REMAP = {"mistral": "llama", "falcon_mamba": "mamba", "phi-msft": "phixtral"}


@dataclass(frozen=True)
class LibraryModel:
    """One model found on disk, as the library lists it."""

    name: str
    spec: str  # what `engine.library.load.load_model` takes
    path: str  # the file or folder
    source: str  # one of SOURCES
    kind: str  # "gguf" or "mlx"
    architecture: str | None = None
    parameters: int | None = None
    quantization: str | None = None
    size_bytes: int = 0
    context_length: int | None = None
    can_run: bool = False
    reason: str | None = None  # why it cannot run
    deletable: bool = False  # Corral's own copy
    repo_id: str | None = None
    origin: str | None = None  # the GGUF a Corral import came from
    tool_syntax: str | None = None  # its dialect, where `scan_library` was told how to read it
    thinking_syntax: str | None = None
    # The chat template's text, read with the headers: what the dialect is read from.
    chat_template: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "chat_template"}


# A chat template's text -> (tool-call syntax, thinking syntax) in words:
# engine.tools.dialect.template_dialect, handed down by the layer that may import it.
DialectOf = Callable[[str], tuple[str, str]]


@dataclass(frozen=True)
class LibraryRoots:
    """Where each store lives."""

    corral: Path  # Corral's cache folder: models/ (imports) and downloads/ inside
    huggingface: Path
    lmstudio: tuple[Path, ...]
    ollama: Path

    @classmethod
    def default(cls, corral: Path) -> LibraryRoots:
        """The stores' usual places for the current user (HF_HUB_CACHE, HF_HOME and
        OLLAMA_MODELS are honoured as the apps honour them)."""
        home = Path.home()
        env = os.environ
        if env.get("HF_HUB_CACHE"):
            hub = Path(env["HF_HUB_CACHE"])
        elif env.get("HF_HOME"):
            hub = Path(env["HF_HOME"]) / "hub"
        else:
            hub = home / ".cache" / "huggingface" / "hub"
        lmstudio = (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models")
        ollama = Path(env.get("OLLAMA_MODELS") or home / ".ollama" / "models")
        return cls(corral, hub, lmstudio, ollama)


def _read_json(path: Path) -> Any:
    if path.stat().st_size > _MAX_JSON:
        raise ValueError(f"{path.name} is larger than {_MAX_JSON} bytes")
    return json.loads(path.read_text(encoding="utf-8"))


# ---- describing one model ----


def _gguf_quantization(header: GGUFHeader) -> str | None:
    file_type = header.metadata.get("general.file_type")
    if isinstance(file_type, int):
        try:
            return LlamaFileType(file_type).name.removeprefix("MOSTLY_")
        except ValueError:
            pass
    kinds = Counter(t.type_name for t in header.tensors if len(t.shape) == 2)
    return kinds.most_common(1)[0][0] if kinds else None


def _gguf_runtime_bytes(header: GGUFHeader) -> int:
    """Bytes of the MLX import: chosen bits plus a float16 scale and bias per 32 values."""
    total = 0
    for t in header.tensors:
        choice = CHOICES.get(t.ggml_type)
        if choice is not None and len(t.shape) == 2:
            total += t.n_elements * choice.bits // 8 + t.n_elements // choice.group_size * 4
        else:
            total += t.n_elements * (t.nbytes // max(1, t.n_elements) or 4)
    return total


def describe_gguf(path: Path, budget: MemoryBudget, **fields: Any) -> LibraryModel:
    """A GGUF file's entry; a damaged file is listed with the reason it cannot run."""
    entry = LibraryModel(
        name=fields.pop("name", path.stem),
        spec=fields.pop("spec", str(path)),
        path=str(path),
        kind="gguf",
        size_bytes=path.stat().st_size if path.exists() else 0,
        **fields,
    )
    try:
        header = read_header(path)
    except ModelLoadError as exc:
        return replace(entry, reason=str(exc).removeprefix(f"{path}: "))
    meta = header.metadata
    arch = header.architecture
    context = meta.get(f"{arch}.context_length")
    template = meta.get("tokenizer.chat_template")
    entry = replace(
        entry,
        chat_template=template if isinstance(template, str) else "",
        architecture=arch,
        parameters=sum(t.n_elements for t in header.tensors),
        quantization=_gguf_quantization(header),
        context_length=int(context) if isinstance(context, int) else None,
    )
    reason = None
    unsupported = sorted(
        {t.type_name for t in header.tensors if t.ggml_type not in SUPPORTED_TYPES}
    )
    if arch not in ARCHITECTURES:
        reason = f"architecture not supported yet: {arch}"
    elif int(meta.get("split.count", 1) or 1) > 1:
        reason = "split into several files (not supported yet)"
    elif unsupported:
        reason = f"tensor types not supported yet: {', '.join(unsupported)}"
    else:
        need = budget.runtime_bytes(_gguf_runtime_bytes(header), entry.parameters, True)
        if not budget.fits(need):
            reason = f"needs about {gb(need)}; {budget.describe()}"
    return replace(entry, can_run=reason is None, reason=reason)


_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8"}


def _safetensors_summary(folder: Path, config: dict[str, Any]) -> tuple[int | None, str | None]:
    """Parameters from the safetensors headers (packed quantized weights count as values)
    and the float type most of them are stored in."""
    quant = config.get("quantization") or config.get("quantization_config") or {}
    default_bits = int(quant.get("bits", 4)) if isinstance(quant, dict) else 4
    total = 0
    dtypes: Counter[str] = Counter()
    for file in sorted(folder.glob("*.safetensors")):
        with open(file, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > _MAX_SAFETENSORS_HEADER:
                return None, None
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            shape = info.get("shape") or []
            count = 1
            for d in shape:
                count *= int(d)
            module = name.rsplit(".", 1)[0]
            if name.endswith((".scales", ".biases")) and f"{module}.weight" in header:
                continue
            if info.get("dtype") == "U32" and f"{module}.scales" in header:
                override = quant.get(module) if isinstance(quant, dict) else None
                bits = (
                    override.get("bits", default_bits)
                    if isinstance(override, dict)
                    else default_bits
                )
                count = count * 32 // int(bits)
            else:
                dtypes[_DTYPES.get(str(info.get("dtype")), str(info.get("dtype")))] += count
            total += count
    return total or None, dtypes.most_common(1)[0][0] if dtypes else None


def mlx_lm_supports(model_type: str | None) -> bool:
    """True if mlx-lm has a model class for `model_type` (looked up without importing it)."""
    import importlib.util

    if not model_type:
        return False
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        return False
    module = _MLX_REMAP.get(model_type, model_type)
    return any(
        (Path(p) / "models" / f"{module}.py").exists() for p in spec.submodule_search_locations
    )


def folder_chat_template(folder: Path) -> str:
    """A model folder's chat template: `chat_template.jinja`, else tokenizer_config.json's
    (a named list: its "default"); "" where it has none, it cannot be read or it is larger
    than a config may be."""
    try:
        jinja = folder / "chat_template.jinja"
        if jinja.is_file():  # read within the limit a config has: a scan never reads a huge file
            return read_text_limited(jinja, _MAX_JSON, "chat template")
        config = _read_json(folder / "tokenizer_config.json")
    except (OSError, ValueError):
        return ""
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # named templates: the default one
        template = next(
            (
                t.get("template")
                for t in template
                if isinstance(t, dict) and t.get("name") == "default"
            ),
            None,
        )
    return template if isinstance(template, str) else ""


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def describe_mlx_folder(folder: Path, budget: MemoryBudget, **fields: Any) -> LibraryModel:
    """An MLX (safetensors) folder's entry."""
    entry = LibraryModel(
        name=fields.pop("name", folder.name),
        spec=fields.pop("spec", str(folder)),
        path=str(folder),
        kind="mlx",
        size_bytes=_folder_size(folder),
        **fields,
    )
    try:
        config = _read_json(folder / "config.json")
        if not isinstance(config, dict):
            raise ValueError("config.json is not an object")
        parameters, stored_dtype = _safetensors_summary(folder, config)
    except (OSError, ValueError, struct.error) as exc:
        return replace(entry, reason=f"unreadable model folder: {exc}")
    text = config.get("text_config")
    text = text if isinstance(text, dict) else {}
    context = config.get("max_position_embeddings") or text.get("max_position_embeddings")
    quant = config.get("quantization")
    if isinstance(quant, dict) and "bits" in quant:
        bits = {quant["bits"]} | {
            v["bits"] for v in quant.values() if isinstance(v, dict) and "bits" in v
        }
        label: str | None = "/".join(str(b) for b in sorted(bits)) + "-bit"
    else:
        dtype = config.get("torch_dtype") or config.get("dtype") or stored_dtype
        label = str(dtype) if dtype else None
    model_type = config.get("model_type")
    entry = replace(
        entry,
        chat_template=folder_chat_template(folder),
        architecture=model_type,
        parameters=parameters,
        quantization=label,
        context_length=int(context) if isinstance(context, int) else None,
    )
    reason = None
    if not mlx_lm_supports(model_type):
        reason = f"architecture not supported by mlx-lm: {model_type}"
    elif not any(folder.glob("*.safetensors")):
        reason = "no weights (*.safetensors)"
    else:
        weights = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        need = budget.runtime_bytes(weights, parameters, isinstance(quant, dict))
        if not budget.fits(need):
            reason = f"needs about {gb(need)}; {budget.describe()}"
    return replace(entry, can_run=reason is None, reason=reason)


# ---- the stores ----


def _is_model_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def _ggufs(folder: Path) -> Iterator[Path]:
    """GGUF model files in `folder`, without vision projectors (mmproj-*.gguf)."""
    for p in sorted(folder.glob("*.gguf")):
        if p.is_file() and not p.name.lower().startswith("mmproj"):
            yield p


def _import_origin(folder: Path) -> str | None:
    """Where the GGUF an import in `folder` came from is now, resolved: the newest path its
    marker saw that still exists (the app or its venv may have moved since the import,
    and a moved default model must still be known as the default), else the one recorded."""
    marker = read_marker(folder)
    if marker is None:
        return None
    recorded = marker.get("gguf")
    seen = marker.get("seen")
    places = [s.get("path") for s in seen if isinstance(s, dict)] if isinstance(seen, list) else []
    for path in [*places, recorded]:
        try:
            if isinstance(path, str) and Path(path).is_file():
                return str(Path(path).resolve())
        except OSError:  # a name too long for the file system: not where the GGUF is
            continue
    return recorded if isinstance(recorded, str) else None


def scan_corral(root: Path, budget: MemoryBudget) -> Iterator[LibraryModel]:
    """Corral's GGUF imports (models/) and downloads (downloads/): its own, deletable."""
    for folder in sorted((root / "models").glob("*")):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        origin = _import_origin(folder)
        name = f"{Path(origin).stem} (imported)" if origin else folder.name
        yield describe_mlx_folder(
            folder, budget, name=name, source="corral", deletable=True, origin=origin
        )
    for folder in sorted((root / "downloads").glob("*")):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        marker = folder / "corral_download.json"
        try:
            repo_id = str(_read_json(marker)["repo_id"])
        except (OSError, ValueError, KeyError, TypeError):
            repo_id = None
        if repo_id is None:
            yield LibraryModel(
                name=folder.name.replace("--", "/", 1),
                spec=folder.name.replace("--", "/", 1),
                path=str(folder),
                source="corral",
                kind="mlx",
                size_bytes=_folder_size(folder),
                reason="download not finished: download it again to resume",
                deletable=True,
                repo_id=folder.name.replace("--", "/", 1),
            )
            continue
        yield describe_mlx_folder(
            folder, budget, name=repo_id, source="corral", deletable=True, repo_id=repo_id
        )


def hf_snapshot(repo_id: str, hub: Path) -> Path | None:
    """The Hugging Face cache's snapshot of `repo_id` at `main`, if it holds a model."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    try:
        revision = (repo / "refs" / "main").read_text().strip()
    except OSError:
        return None
    snapshot = repo / "snapshots" / revision
    return snapshot if revision and _is_model_folder(snapshot) else None


def scan_huggingface(hub: Path, budget: MemoryBudget) -> Iterator[LibraryModel]:
    """Model repos in the Hugging Face cache: safetensors folders and GGUF files."""
    if not hub.is_dir():
        return
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(hub)
    except (CacheNotFound, OSError):
        return
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        revision = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
        snapshot = Path(revision.snapshot_path)
        if _is_model_folder(snapshot):
            yield describe_mlx_folder(
                snapshot, budget, name=repo.repo_id, source="huggingface", repo_id=repo.repo_id
            )
        for gguf in _ggufs(snapshot):
            yield describe_gguf(
                gguf,
                budget,
                name=f"{repo.repo_id}/{gguf.name}",
                source="huggingface",
                repo_id=repo.repo_id,
            )


def scan_lmstudio(roots: tuple[Path, ...], budget: MemoryBudget) -> Iterator[LibraryModel]:
    """LM Studio's PUBLISHER/REPO/ folders: GGUF files, and MLX folders on Macs."""
    for root in roots:
        for repo in sorted(root.glob("*/*")):
            if not repo.is_dir():
                continue
            repo_id = f"{repo.parent.name}/{repo.name}"
            if _is_model_folder(repo):
                yield describe_mlx_folder(
                    repo, budget, name=repo_id, source="lmstudio", repo_id=repo_id
                )
            for gguf in _ggufs(repo):
                yield describe_gguf(gguf, budget, source="lmstudio", repo_id=repo_id)


def ollama_models(root: Path) -> Iterator[tuple[str, Path, int]]:
    """(name, blob path, size) of each model in Ollama's store, from its manifests."""
    manifests = root / "manifests"
    if not manifests.is_dir():
        return
    for manifest in sorted(manifests.glob("*/*/*/*")):
        if not manifest.is_file():
            continue
        registry, namespace, model = manifest.parts[-4:-1]
        tag = manifest.name
        name = f"{model}:{tag}"
        if namespace != "library":
            name = f"{namespace}/{name}"
        if registry != _OLLAMA_REGISTRY:
            name = f"{registry}/{name}"
        try:
            layers = _read_json(manifest).get("layers", [])
            layer = next(x for x in layers if x.get("mediaType") == _OLLAMA_MODEL)
            digest = str(layer["digest"])
            size = int(layer.get("size", 0))
        except (OSError, ValueError, AttributeError, StopIteration, KeyError, TypeError):
            yield name, manifest, -1  # a manifest without a model layer
            continue
        yield name, root / "blobs" / digest.replace(":", "-", 1), size


def ollama_blob(name: str, root: Path) -> Path:
    """The GGUF blob of Ollama model `name` ("llama3.2:3b"), or a clear ModelLoadError."""
    if ":" not in name:
        name += ":latest"
    for found, blob, size in ollama_models(root):
        if found != name:
            continue
        if size < 0:
            raise ModelLoadError(f"Ollama model {name}: its manifest names no model layer")
        if not blob.is_file():
            raise ModelLoadError(
                f"Ollama model {name}: its manifest points at {blob.name}, which is missing "
                f"from {blob.parent} (pull it again with `ollama pull {name}`)"
            )
        return blob
    raise ModelLoadError(f"Ollama model {name}: not found in {root / 'manifests'}")


def scan_ollama(root: Path, budget: MemoryBudget) -> Iterator[LibraryModel]:
    for name, blob, size in ollama_models(root):
        fields: dict[str, Any] = {"name": name, "spec": OLLAMA_PREFIX + name, "source": "ollama"}
        if size < 0:
            yield LibraryModel(
                path=str(blob), kind="gguf", reason="its manifest names no model layer", **fields
            )
        elif not blob.is_file():
            yield LibraryModel(
                path=str(blob),
                kind="gguf",
                size_bytes=size,
                reason=f"blob {blob.name} is missing (pull the model again in Ollama)",
                **fields,
            )
        else:
            yield describe_gguf(blob, budget, **fields)


def scan_library(
    roots: LibraryRoots, budget: MemoryBudget, dialect_of: DialectOf | None = None
) -> list[LibraryModel]:
    """Every model in every store, sorted by source then name. Only reads the disk.

    Args:
        roots: where each store lives.
        budget: the memory a model must fit in to run here.
        dialect_of: reads a chat template's tool-call and thinking syntax; with it, each
            model that has a template says which dialect it speaks.
    """
    found: list[LibraryModel] = []
    found += scan_corral(roots.corral, budget)
    found += scan_huggingface(roots.huggingface, budget)
    found += scan_lmstudio(roots.lmstudio, budget)
    found += scan_ollama(roots.ollama, budget)
    if dialect_of is not None:
        found = [_with_dialect(m, dialect_of) for m in found]
    order = {s: i for i, s in enumerate(SOURCES)}
    return sorted(found, key=lambda m: (order[m.source], m.name.lower()))


def _with_dialect(model: LibraryModel, dialect_of: DialectOf) -> LibraryModel:
    if not model.chat_template:
        return model
    try:
        tools, thinking = dialect_of(model.chat_template)
    except Exception:  # noqa: BLE001  (a template no detector reads leaves the row as it was)
        return model
    return replace(model, tool_syntax=tools, thinking_syntax=thinking)


def model_display_name(spec: str, target: Path | str) -> str:
    """What to call a loaded model: Ollama's name, a Hugging Face repo id, or the folder."""
    if spec.startswith(OLLAMA_PREFIX):
        return spec[len(OLLAMA_PREFIX) :]
    parts = Path(str(target)).parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3].removeprefix("models--").replace("--", "/")
    if len(parts) >= 2 and parts[-2] == "downloads":
        marker = Path(str(target)) / "corral_download.json"
        try:
            return str(_read_json(marker)["repo_id"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return Path(str(target)).name
