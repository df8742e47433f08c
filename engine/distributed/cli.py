"""`--distributed HOSTFILE` for `python -m engine chat` and `serve`: the same commands, with the
model sharded across the hostfile's machines."""

from __future__ import annotations

import argparse

from engine.api import EngineAPI
from engine.distributed.client import DistributedConfig, DistributedEngine
from engine.engine import Engine

SHARD_CHOICES = ("auto", "tensor", "pipeline")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The distributed options of `chat` and `serve`."""
    parser.add_argument(
        "--distributed",
        metavar="HOSTFILE",
        help="shard the model across the machines of an mlx.launch hostfile (JSON)",
    )
    parser.add_argument(
        "--shard",
        choices=SHARD_CHOICES,
        default="auto",
        help="with --distributed: tensor parallel, pipeline, or auto (tensor where it fits)",
    )
    parser.add_argument(
        "--dist-timeout",
        type=_positive,
        default=60.0,
        metavar="S",
        help="with --distributed: end a reply that makes no progress for S seconds (60)",
    )


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def make_engine(args: argparse.Namespace) -> EngineAPI:
    """A DistributedEngine when `--distributed` was given, else the ordinary Engine."""
    if not getattr(args, "distributed", None):
        from engine.memory.settings import engine_cache_options

        return Engine(**engine_cache_options(args))
    config = DistributedConfig(args.distributed, shard=args.shard, timeout_s=args.dist_timeout)
    return DistributedEngine(config)
