"""Which models the picker's menu lists, and in what order: the ones used lately first,
then the built-in default, then the rest of the library that runs here, a handful in all
(the Model Library window has every one). Pure functions over the library's last scan and
the recent-models setting, so the menu is built without touching the disk."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.views.common.format import format_bytes

DEFAULT_SPEC = "default"
DEFAULT_NAME = "SmolLM2-135M-Instruct"
MENU_LIMIT = 6  # models in the menu; the Model Library lists them all
RECENT_LIMIT = 8  # remembered in the store
SOURCE_NAMES = {
    "corral": "Corral",
    "huggingface": "Hugging Face",
    "lmstudio": "LM Studio",
    "ollama": "Ollama",
}


@dataclass(frozen=True)
class MenuEntry:
    """One model in the picker's menu."""

    name: str
    spec: str  # what loading it takes
    size_bytes: int | None  # on disk; None when not known yet (the default before import)
    detail: str  # the tooltip: where it is and what it is
    paths: frozenset[str] = field(default_factory=frozenset)  # the files it loads from
    loaded: bool = False

    @property
    def label(self) -> str:
        """'SmolLM2-135M-Instruct · 98 MB', as the picker and its menu show it."""
        return model_label(self.name, self.size_bytes)


def model_label(name: str, size_bytes: int | None) -> str:
    """A model's name with its size on disk, when known."""
    return f"{name} · {format_bytes(size_bytes)}" if size_bytes else name


def _same(a: str, b: str) -> bool:
    return a == b or Path(a) == Path(b)


def _describe(m: Any) -> str:
    facts = [SOURCE_NAMES.get(m.source, m.source)]
    facts += [f for f in (m.architecture, m.quantization) if f]
    return f"{', '.join(facts)}\n{m.path}"


def menu_entries(
    models: list[Any],
    recents: list[dict[str, Any]],
    *,
    loaded_path: str | None,
    default_origin: str | None,
    present: set[str] | frozenset[str] = frozenset(),
    resolved: dict[str, str] | None = None,
    limit: int = MENU_LIMIT,
) -> list[MenuEntry]:
    """The models the picker offers, most recently used first.

    Args:
        models: the library's last scan (`LibraryModel`s); those that cannot run here are
            left to the Model Library window, which says why.
        recents: the recent-models setting, newest first (`spec`, `path`, `name`, `size`).
        loaded_path: the loaded model's folder, to tick its entry.
        default_origin: the built-in model's GGUF, so its import in Corral's cache is shown
            as the default model rather than as a second copy.
        present: recent models' paths outside the library that were found on disk in the
            last scan (a folder opened with "Open MLX model folder…").
        resolved: the scanned paths with their links resolved (an import records the file
            a Hugging Face cache link points to), so an import is matched to its original.
        limit: how many entries at most.
    """
    real = resolved or {}
    runnable = [m for m in models if m.can_run]
    originals = {real.get(m.path, m.path): m.path for m in runnable if m.source != "corral"}
    default_paths = {str(r.get("path")) for r in recents if r.get("spec") == DEFAULT_SPEC}
    default_imports = [
        m
        for m in runnable
        if (m.origin and default_origin and _same(m.origin, default_origin))
        or (m.source == "corral" and m.path in default_paths)
    ]
    default_size = max((m.size_bytes for m in default_imports), default=0) or None
    pool: list[MenuEntry] = [
        MenuEntry(
            DEFAULT_NAME,
            DEFAULT_SPEC,
            default_size,
            "Built into Corral" + ("" if default_size else " (prepared on first use)"),
            frozenset(m.path for m in default_imports),
        )
    ]
    imports_of: dict[str, list[str]] = {}  # an original's path -> its imports' folders
    for m in runnable:
        if m.source == "corral" and m.origin and m.origin in originals:
            imports_of.setdefault(originals[m.origin], []).append(m.path)
    by_name: dict[str, int] = {}
    for m in runnable:
        if m in default_imports or (m.source == "corral" and m.origin in originals):
            continue
        paths = frozenset([m.path, *imports_of.get(m.path, [])])
        if m.name in by_name:  # one repo in Corral's downloads and the Hugging Face cache
            i = by_name[m.name]
            pool[i] = replace(pool[i], paths=pool[i].paths | paths)
            continue
        by_name[m.name] = len(pool)
        pool.append(MenuEntry(m.name, m.spec, m.size_bytes or None, _describe(m), paths))

    chosen: list[MenuEntry] = []
    for recent in recents:
        spec, path = str(recent.get("spec", "")), str(recent.get("path", ""))
        match = next(
            (e for e in pool if e.spec == spec or (path and any(_same(path, p) for p in e.paths))),
            None,
        )
        if match is not None:
            pool.remove(match)
            chosen.append(match)
        elif spec and path in present and not any(e.spec == spec for e in chosen):
            size = recent.get("size")
            name = str(recent.get("name") or Path(path).name)
            known = size if isinstance(size, int) else None
            chosen.append(MenuEntry(name, spec, known, path, frozenset([path])))
    entries = (chosen + pool)[:limit]
    if loaded_path is None:
        return entries
    return [
        replace(e, loaded=True) if any(_same(loaded_path, p) for p in e.paths) else e
        for e in entries
    ]


def remember(
    recents: list[dict[str, Any]], spec: str, path: str, name: str, size: int | None = None
) -> list[dict[str, Any]]:
    """`recents` with this model first (an earlier entry for it dropped), at most
    RECENT_LIMIT long; a size already known for it is kept until a new one is given."""
    old = next((r for r in recents if r.get("spec") == spec or r.get("path") == path), None)
    if size is None and old is not None and old.get("path") == path:
        size = old.get("size")
    entry = {"spec": spec, "path": path, "name": name, "size": size}
    rest = [r for r in recents if r is not old and isinstance(r, dict)]
    return [entry, *rest][:RECENT_LIMIT]
