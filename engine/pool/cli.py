"""`python -m engine serve`'s model pool: `--model` (repeatable), `--embedding-model` and
`--rerank-model` (repeatable), `--alias NAME=SPEC`, `--pin NAME`, `--idle-unload MINUTES`,
`--max-model-memory GB`, `--models-config FILE` and `--load-wait S`, turned into a
ModelPool that serves chat, embedding and rerank models."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.errors import CorralError, ModelNotFoundError
from engine.memory.budget import GiB
from engine.pool.embedding import EMBEDDING_LOADERS
from engine.pool.pool import DEFAULT_LOAD_WAIT_S, ModelPool
from engine.pool.settings import default_settings_path
from engine.types import ModelKind


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The pool's options of `serve`."""
    parser.add_argument(
        "--model",
        action="append",
        metavar="MODEL",
        help="a model to serve: 'default', an MLX folder, a .gguf file or a Hugging Face "
        "repo id; repeatable (the first answers requests that name no model); each loads "
        "on its first request (the first at start)",
    )
    parser.add_argument(
        "--embedding-model",
        action="append",
        metavar="SPEC",
        help="also serve this embedding model at /v1/embeddings (a folder or a Hugging Face "
        "repo id; repeatable; requests pick one by `model`, the first by default); it "
        "loads at start and counts against --max-model-memory like any model of the pool",
    )
    parser.add_argument(
        "--rerank-model",
        action="append",
        metavar="SPEC",
        help="also serve this cross-encoder reranker at /v1/rerank (repeatable; as "
        "--embedding-model)",
    )
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="let requests name MODEL as NAME (serving MODEL if no --model gave it); repeatable",
    )
    parser.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME",
        help="keep this model loaded, never unloaded to make room for another (repeatable)",
    )
    parser.add_argument(
        "--idle-unload",
        type=_positive,
        metavar="MINUTES",
        help="unload a model after this many minutes without a request (default: never; a "
        "model's own idle_unload_minutes in --models-config wins)",
    )
    parser.add_argument(
        "--max-model-memory",
        type=_positive,
        metavar="GB",
        help="what the loaded models may hold together (weights and prompt caches); the "
        "least recently used idle model is unloaded to make room (default: what this "
        "machine's memory budget leaves, less a margin for the system)",
    )
    parser.add_argument(
        "--models-config",
        type=Path,
        metavar="FILE",
        help="per-model settings (TOML: sampling defaults, chat-template switches such as "
        "enable_thinking, context limit, idle unload, pin, aliases); read again when it "
        f"changes (default: {default_settings_path()}, if it exists)",
    )
    parser.add_argument(
        "--load-wait",
        type=_positive,
        default=DEFAULT_LOAD_WAIT_S,
        metavar="S",
        help="how long a request waits for its model's memory while other models are "
        f"answering requests, before a 503 with Retry-After (default {DEFAULT_LOAD_WAIT_S:g})",
    )


def pool_flags(args: argparse.Namespace) -> list[str]:
    """The pool's flags the arguments use beyond one --model (for a refusal where only
    one model can be served: --distributed)."""
    used = ["--model"] * (len(args.model or []) > 1)
    for flag, value in (
        ("--embedding-model", args.embedding_model),
        ("--rerank-model", args.rerank_model),
        ("--alias", args.alias),
        ("--pin", args.pin),
        ("--idle-unload", args.idle_unload),
        ("--max-model-memory", args.max_model_memory),
        ("--models-config", args.models_config),
    ):
        if value:
            used.append(flag)
    return used


def make_pool(args: argparse.Namespace, engine_options: dict[str, Any]) -> ModelPool:
    """A ModelPool listing the arguments' models (none loaded yet); CorralError naming the
    flag or file that is wrong."""
    gb = args.max_model_memory
    pool = ModelPool(
        memory_limit_bytes=int(gb * GiB) if gb else None,
        idle_unload_s=args.idle_unload * 60 if args.idle_unload else None,
        load_wait_s=args.load_wait,
        engine_options=engine_options,
        loaders=EMBEDDING_LOADERS,
    )
    try:
        specs = args.model or ([] if args.models_config or args.alias else ["default"])
        for spec in specs:
            pool.add_model(spec)
        flagged: list[tuple[ModelKind, str, list[str] | None]] = [
            ("embedding", "--embedding-model", args.embedding_model),
            ("rerank", "--rerank-model", args.rerank_model),
        ]
        for kind, flag, given in flagged:
            for spec in given or []:
                try:
                    pool.add_model(spec, kind=kind)
                except ValueError as exc:
                    raise CorralError(f"{flag} {spec}: {exc}") from None
        for item in args.alias:
            name, sep, spec = item.partition("=")
            if not sep or not name.strip() or not spec.strip():
                raise CorralError(f"--alias {item}: write it as NAME=MODEL")
            try:
                pool.add_model(spec.strip(), alias=name.strip())
            except ValueError as exc:
                raise CorralError(f"--alias {item}: {exc}") from None
        if args.models_config is not None:
            pool.read_settings(args.models_config)
        elif default_settings_path().is_file():  # the app's, shared
            pool.read_settings(default_settings_path())
        for name in args.pin:
            try:
                pool.pin_model(name)
            except ModelNotFoundError as exc:
                raise CorralError(f"--pin {name}: {exc}") from None
    except BaseException:
        pool.close()
        raise
    return pool


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value
