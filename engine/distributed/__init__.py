"""One chat over a model sharded across several machines with MLX's distributed backend.

Corral's process (`DistributedEngine`, an EngineAPI) starts the ranks with `mlx.launch`
(`launch`); rank 0 (`leader`) runs the engine itself against a stand-in for the sharded model
(`mirror`) whose every call is broadcast (`channel`) to the other ranks (`follower`), which
only run their share (`shard`, `loading`). Memory is planned per rank (`plan`); the cost of
communication per token is measured by replaying one step's collectives (`comm`).

Importing this package loads no MLX: the app and `serve` run no collectives themselves.
"""

from engine.distributed.client import DistributedConfig, DistributedEngine
from engine.distributed.hostfile import Hostfile, HostfileError, loopback_hostfile, read_hostfile
from engine.distributed.info import GroupInfo, RankPlan
from engine.distributed.protocol import DistributedError

__all__ = [
    "DistributedConfig",
    "DistributedEngine",
    "DistributedError",
    "GroupInfo",
    "Hostfile",
    "HostfileError",
    "RankPlan",
    "loopback_hostfile",
    "read_hostfile",
]
