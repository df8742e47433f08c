"""`python -m engine models` (list, delete) and `python -m engine download REPO`."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from engine.library.discovery import DialectOf, LibraryModel
from engine.memory.budget import gb

_COLUMNS = ("Name", "Arch", "Params", "Quant", "Size", "Context", "Tool calls", "Source", "Runs")


def _count(n: int | None) -> str:
    if not n:
        return "?"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}".replace(".0", "")
    return str(n)


def _row(m: LibraryModel) -> tuple[str, ...]:
    runs = "yes" if m.can_run else f"no: {m.reason}"
    return (
        m.name,
        m.architecture or "?",
        _count(m.parameters),
        m.quantization or "?",
        gb(m.size_bytes),
        _count(m.context_length),
        _tools(m.tool_syntax),
        m.source + (" (Corral's copy)" if m.deletable else ""),
        runs,
    )


def _tools(syntax: str | None) -> str:
    """A dialect in a table cell: its name, "in prompt" for the described fallback."""
    if not syntax:
        return "?"
    return "in prompt" if syntax.startswith("described") else syntax


def print_table(models: list[LibraryModel]) -> None:
    rows = [_COLUMNS, *(_row(m) for m in models)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS) - 1)]
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        print("  ".join(cells).rstrip())


def cmd_models(args: argparse.Namespace) -> int:
    from engine.library.discovery import LibraryRoots, scan_library
    from engine.library.load import cache_dir
    from engine.library.paths import delete_own_copy
    from engine.memory.plan import memory_budget

    root = cache_dir()
    if args.delete:
        freed = delete_own_copy(args.delete, root)
        print(f"Deleted {args.delete} ({gb(freed)} freed)")
        return 0
    models = scan_library(LibraryRoots.default(root), memory_budget(), args.dialect_of)
    if args.json:
        print(json.dumps([m.to_dict() for m in models], indent=2))
    elif not models:
        print("No models found (Corral's cache, Hugging Face cache, LM Studio, Ollama).")
    else:
        print_table(models)
        print(f"\nLoad one with: python -m engine chat --model SPEC  (SPEC: {models[0].spec})")
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    from engine.library.downloads import DownloadProgress, download, plan_download
    from engine.library.load import cache_dir
    from engine.memory.plan import memory_budget

    plan = plan_download(args.repo, cache_dir(), memory_budget())
    print(plan.describe(), file=sys.stderr)
    if not plan.fits_disk:
        return 2
    if not plan.fits_memory and not args.anyway:
        print("Add --anyway to download it all the same.", file=sys.stderr)
        return 2
    last = [0.0, -1.0]  # time and bytes of the last line

    def show(p: DownloadProgress) -> None:
        now = time.monotonic()
        finished = p.done_bytes == p.total_bytes
        if (now - last[0] >= 1 or finished) and p.done_bytes != last[1]:
            last[:] = [now, p.done_bytes]
            print(f"[{p.fraction:4.0%}] {p.describe()}", file=sys.stderr, flush=True)

    cancel = threading.Event()
    try:
        folder = download(plan, show, cancel)
    except KeyboardInterrupt:
        print("Stopped; run the same command again to resume.", file=sys.stderr)
        return 130
    print(folder)
    return 0


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], dialect_of: DialectOf | None = None
) -> None:
    """Register `models` and `download` on the engine's command line.

    Args:
        sub: the engine command line's subcommands.
        dialect_of: reads a chat template's dialect, for the models list to show it.
    """
    models = sub.add_parser(
        "models", help="list the models on this computer (Corral, Hugging Face, LM Studio, Ollama)"
    )
    models.add_argument("--json", action="store_true", help="print a JSON list")
    models.add_argument(
        "--delete", metavar="PATH", help="delete one of Corral's own copies (never other apps')"
    )
    models.set_defaults(func=cmd_models, dialect_of=dialect_of)
    dl = sub.add_parser("download", help="download a Hugging Face model (progress, resume)")
    dl.add_argument("repo", help="repo id, e.g. mlx-community/Qwen2.5-0.5B-Instruct-4bit")
    dl.add_argument("--anyway", action="store_true", help="even if it does not fit in memory")
    dl.set_defaults(func=cmd_download)
