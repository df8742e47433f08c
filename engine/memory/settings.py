"""The prompt cache's settings as the command line and the app give them: KV precision,
the disk tier's folder and budget. No MLX here: front ends import it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import platformdirs

DEFAULT_DISK_BUDGET = 4 << 30


def prompt_cache_dir() -> Path:
    """The disk tier's folder: `prompt-cache` in Corral's cache folder (CORRAL_CACHE_DIR
    overrides the latter, as it does for imported models; CORRAL_PROMPT_CACHE_DIR the
    disk tier's folder alone)."""
    own = os.environ.get("CORRAL_PROMPT_CACHE_DIR")
    if own:
        return Path(own)
    override = os.environ.get("CORRAL_CACHE_DIR")
    base = Path(override) if override else Path(platformdirs.user_cache_dir("Corral", "Corral"))
    return base / "prompt-cache"


def _disk_gb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of GB, not {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 (off) or a positive number of GB, not {text}")
    return value


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """`--kv-bits` and `--disk-cache-gb` on a subcommand."""
    parser.add_argument(
        "--kv-bits",
        type=int,
        choices=(8, 4),
        help="quantize the KV cache to 8 or 4 bits (default: the model's own precision)",
    )
    parser.add_argument(
        "--disk-cache-gb",
        type=_disk_gb,
        default=DEFAULT_DISK_BUDGET / (1 << 30),
        metavar="GB",
        help="keep prompt prefixes the memory lets go of on disk, up to GB (default "
        f"{DEFAULT_DISK_BUDGET >> 30}, at most a quarter of the free disk; 0: off), in "
        f"{prompt_cache_dir()}",
    )


def engine_cache_options(args: argparse.Namespace) -> dict[str, Any]:
    """Engine keyword arguments from `add_cache_arguments`' options."""
    gb = getattr(args, "disk_cache_gb", 0.0) or 0.0
    return {
        "kv_bits": getattr(args, "kv_bits", None),
        "disk_cache_dir": prompt_cache_dir() if gb > 0 else None,
        "disk_budget_bytes": int(gb * (1 << 30)) if gb > 0 else None,
    }
