"""How much memory a pool's models may hold together, what one model will take before it
loads, the KV budget each gets, and which models make room for another.

A chat model holds its weights plus its KV budget (the prompt cache and the replies
decoding are kept within it); an embedding or rerank model its weights plus the working
budget of its forward passes (engine.embeddings.sizing). The pool's limit defaults to
what this machine's budget leaves (engine.memory.budget: Metal's recommended working
set, or the machine's memory, less the headroom kept for activations, the OS and other
programs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.memory.budget import MemoryBudget
from engine.types import ModelKind

MiB = 1 << 20
# A model of the pool gets at least this much prompt cache, however tight its share.
MIN_KV_BUDGET = 64 * MiB


def device_budget() -> MemoryBudget:
    """This machine's budget as the engine's memory plan sees it."""
    from engine.memory.plan import memory_budget

    return memory_budget()


def default_limit(budget: MemoryBudget) -> int:
    """The pool's limit when the user sets none: what the device budget leaves after the
    headroom kept for the OS and other programs."""
    return max(MIN_KV_BUDGET, budget.available_bytes)


@dataclass(frozen=True)
class Estimate:
    """What a model will take before it has loaded, from its files (None: unknown), or
    what it took when it last loaded. `working_bytes`: what it holds beside its weights
    that is no KV budget (an embedding model's working budget)."""

    weights_bytes: int | None = None
    context_length: int | None = None
    working_bytes: int = 0


def estimate(spec: str, budget: MemoryBudget, kind: ModelKind = "chat") -> Estimate:
    """Its weights as they will sit in memory, and its context, read from its files
    without loading it (a GGUF's header, a folder's config and safetensors headers);
    unknown for a repo not downloaded yet."""
    from engine.errors import ModelLoadError

    if kind != "chat":
        return _embedding_estimate(spec)
    from engine.library.discovery import describe_gguf, describe_mlx_folder
    from engine.library.gguf_file import is_gguf_file
    from engine.library.load import DEFAULT_MODEL, default_gguf_path

    try:
        if spec == DEFAULT_MODEL:
            path = default_gguf_path()
        else:
            path = Path(spec).expanduser()
        if path.is_dir() and (path / "config.json").is_file():
            found = describe_mlx_folder(path, budget, source="pool")
            quantized = _quantized(path)
            weights = sum(p.stat().st_size for p in path.glob("*.safetensors"))
        elif path.is_file() and (spec == DEFAULT_MODEL or is_gguf_file(path)):
            found = describe_gguf(path, budget, source="pool")
            quantized, weights = True, path.stat().st_size
        else:
            return Estimate()
    except (OSError, ValueError, ModelLoadError):
        return Estimate()
    runtime = budget.runtime_bytes(weights, found.parameters, quantized) if weights else None
    return Estimate(runtime, found.context_length)


def _embedding_estimate(spec: str) -> Estimate:
    """An embedding or rerank model's weights, working budget and tokens per input, read
    from its folder (unknown for a repo not downloaded yet)."""
    from engine.embeddings.sizing import estimate as embedding_estimate
    from engine.library.load import local_folder

    folder = local_folder(spec)
    found = embedding_estimate(folder) if folder is not None else None
    if found is None:
        return Estimate()
    weights, working, tokens = found
    return Estimate(weights, tokens, working)


def _quantized(folder: Path) -> bool:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get("quantization"), dict)


def kv_share(limit: int, weights: int, listed: int, device_half: int) -> int:
    """The automatic KV budget of a model of `weights` bytes in a pool listing `listed`
    models under `limit`: its equal share of the limit less its weights, at most half
    the device (what one engine alone would take) and at least MIN_KV_BUDGET. With one
    model listed this is the engine's own automatic budget."""
    share = limit // max(1, listed) - weights
    return max(MIN_KV_BUDGET, min(share, device_half))


@dataclass(frozen=True)
class Holder:
    """A loaded model as the choice of what to unload sees it."""

    id: str
    memory_bytes: int
    last_used: float
    busy: bool  # requests in flight: it must stay
    pinned: bool


def make_room(
    holders: Sequence[Holder], need: int, limit: int
) -> tuple[list[str], bool, list[str]]:
    """Which models to unload so that a model of `need` bytes fits under `limit`: the
    least recently used idle, unpinned ones first. Returns (to unload, whether that makes
    room, the busy models whose requests must finish for it to fit). When nothing else
    is left (no pinned or busy model holds memory), a model larger than the limit loads
    alone: it is refused only where pinned models leave it no room at all."""
    held = sum(h.memory_bytes for h in holders)
    if held + need <= limit:
        return [], True, []
    victims: list[str] = []
    for holder in sorted(holders, key=lambda h: h.last_used):
        if holder.busy or holder.pinned:
            continue
        victims.append(holder.id)
        held -= holder.memory_bytes
        if held + need <= limit:
            return victims, True, []
    staying = [h for h in holders if h.id not in victims]
    busy = [h.id for h in staying if h.busy and not h.pinned]
    if not staying:  # alone, it loads even past the limit (with a warning)
        return victims, True, []
    return victims, False, busy


def never_fits(holders: Sequence[Holder], need: int, limit: int) -> bool:
    """Whether pinned models leave a model of `need` bytes no room however long it waits."""
    pinned = sum(h.memory_bytes for h in holders if h.pinned)
    return pinned > 0 and pinned + need > limit
