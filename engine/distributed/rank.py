"""`python -m engine.distributed.rank --control SOCKET`: one rank, as `mlx.launch` starts it.

Corral starts every rank this way; rank 0 connects back to Corral's process and runs the
engine (`leader`), the others run their share of the model (`follower`). A rank that fails
prints why on stderr and exits non-zero, which `mlx.launch` reports and Corral names.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import traceback

import engine  # noqa: F401  (preloads OpenBLAS before MLX)


def main(argv: list[str] | None = None) -> int:
    """Join the group, then lead or follow; the exit status."""
    import mlx.core as mx
    import numpy as np

    parser = argparse.ArgumentParser(prog="python -m engine.distributed.rank")
    parser.add_argument("--control", required=True, help="rank 0: Corral's Unix socket")
    parser.add_argument("--backend", default="ring", choices=("ring", "jaccl"))
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints where a rank is stuck
    group = mx.distributed.init(strict=True, backend=args.backend)
    rank = group.rank()
    # Every rank evaluates every collective it builds, in the same order: an unevaluated one
    # would pair with the next collective of the other ranks.
    pids = mx.distributed.all_gather(mx.array([os.getpid()], mx.int32), group=group, stream=mx.cpu)
    mx.eval(pids)
    if rank == 0:
        from engine.distributed.leader import run_leader

        listed = [int(p) for p in np.array(pids)]
        return run_leader(group, args.control, args.backend, listed)
    from engine.distributed.follower import Follower

    Follower(group).run()
    return 0


def run() -> None:
    """Run `main` and leave at once: after a lost peer, MLX's backend threads may never
    join, and no rank should outlive its group."""
    try:
        code = main()
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
