"""How much memory the KV caches may use, and the Metal wired limit that keeps them resident.

On Metal, weights and KV caches share the GPU's working set: the budget is
`mx.device_info()["max_recommended_working_set_size"]` minus the model and some headroom, and
the wired limit is set once for weights plus KV budget when a model loads (restored when it
unloads), never during an async eval. Elsewhere the budget comes from the machine's memory and
the wired limit is left alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any, cast

import mlx.core as mx
from mlx.utils import tree_flatten

from engine.memory.budget import MemoryBudget, headroom_bytes
from engine.types import MemoryPlan

GiB = 1 << 30


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def backend_info() -> dict[str, str | bool]:
    """What MLX runs on here: its version, the default device, whether Metal is there
    (for the app's self-test report, which must not import MLX itself)."""
    return {
        "mlx": str(getattr(mx, "__version__", "unknown")),
        "device": str(mx.default_device()),
        "metal": bool(mx.metal.is_available()),
    }


def machine_memory_bytes() -> int:
    """Physical memory of this machine in bytes; 0 if it cannot be read."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and size > 0:
            return pages * size
    except (ValueError, OSError, AttributeError):
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "hw.memsize"],
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            )
            return int(out.stdout.strip())
        except (OSError, ValueError, subprocess.SubprocessError):
            return 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def model_nbytes(model: Any) -> int:
    """Bytes of a model's parameters (quantized weights count as stored)."""
    # tree_flatten gives (path, leaf) pairs when it has no destination
    leaves = cast(list[tuple[str, Any]], tree_flatten(model.parameters()))
    return sum(v.nbytes for _, v in leaves if isinstance(v, mx.array))


def memory_budget(device_info: dict[str, Any] | None = None) -> MemoryBudget:
    """This machine's budget for a model, as `plan_memory` sees it (for the library and the
    download check, before a model is loaded)."""
    info = mx.device_info() if device_info is None else device_info
    working_set = int(info.get("max_recommended_working_set_size") or 0)
    if working_set > 0:
        return MemoryBudget(True, working_set)
    return MemoryBudget(False, machine_memory_bytes() or 8 * GiB)


def plan_memory(
    model_bytes: int,
    kv_budget_bytes: int | None = None,
    *,
    device_info: dict[str, Any] | None = None,
    machine_bytes: int | None = None,
) -> MemoryPlan:
    """Plan the KV budget (and on Metal the wired limit) for a model of `model_bytes`.

    `kv_budget_bytes` is the user's setting; None picks the default: what is left after the
    model and headroom, at most half the device budget. A setting that does not fit is lowered,
    with a warning. `device_info` and `machine_bytes` default to the real ones (tests inject).
    """
    info = mx.device_info() if device_info is None else device_info
    working_set = int(info.get("max_recommended_working_set_size") or 0)
    metal = working_set > 0
    if metal:
        device = working_set
        headroom = headroom_bytes(device, metal)  # activations of a prefill chunk, other apps
        where = "the GPU working set this Mac recommends"
    else:
        device = machine_memory_bytes() if machine_bytes is None else machine_bytes
        if device <= 0:  # unknown: assume a modest machine rather than refuse to run
            device = 8 * GiB
        headroom = headroom_bytes(device, metal)  # the OS and other programs
        where = "this machine's memory"

    available = device - headroom - model_bytes
    warning = None
    fits = available > 0
    if not fits:
        kv = 0
        warning = (
            f"This model needs {_gb(model_bytes)} but only {_gb(device - headroom)} of "
            f"{where} is available ({_gb(headroom)} is kept free). It may run very slowly or "
            "fail; choose a smaller or more quantized model. Prompt caching is off."
        )
    elif kv_budget_bytes is None:
        kv = min(available, device // 2)
    elif kv_budget_bytes > available:
        kv = available
        warning = (
            f"The prompt cache budget of {_gb(kv_budget_bytes)} does not fit next to the model "
            f"({_gb(model_bytes)}) in {where} ({_gb(device)}); it was lowered to {_gb(kv)}."
        )
    else:
        kv = max(0, int(kv_budget_bytes))
    if fits and warning is None and available < GiB // 4:
        warning = (
            f"The model ({_gb(model_bytes)}) leaves only {_gb(available)} of {where} for the "
            "prompt cache; long chats will be recomputed often. A smaller model would help."
        )
    wired = min(model_bytes + kv, device) if metal else None
    return MemoryPlan(metal, device, model_bytes, kv, wired, fits, warning)


class WiredLimit:
    """Sets the Metal wired limit for a loaded model and puts the previous value back.

    Call `apply` after a model loads and `restore` after it unloads (or at quit), with no async
    eval in flight: both synchronize first. Off Metal both do nothing. `set_wired_limit`,
    `metal` and `synchronize` default to MLX's and exist for tests.
    """

    def __init__(
        self,
        set_wired_limit: Callable[[int], int] | None = None,
        *,
        metal: bool | None = None,
        synchronize: Callable[[], None] | None = None,
    ) -> None:
        self._set = set_wired_limit or mx.set_wired_limit
        self._metal = mx.metal.is_available() if metal is None else metal
        self._sync = synchronize or mx.synchronize
        self._previous: int | None = None
        self.current: int | None = None

    @property
    def active(self) -> bool:
        return self._previous is not None

    def apply(self, plan: MemoryPlan) -> bool:
        """Wire weights plus KV budget; True if the limit was set."""
        if not plan.metal or plan.wired_limit_bytes is None:
            return False
        return self.apply_bytes(plan.wired_limit_bytes)

    def apply_bytes(self, limit: int) -> bool:
        """Wire `limit` bytes (a model pool's limit, for all its models); True if set."""
        if not self._metal:
            return False
        self._sync()
        old = int(self._set(int(limit)))
        if self._previous is None:  # a second apply keeps the value from before the first
            self._previous = old
        self.current = limit
        return True

    def restore(self) -> None:
        """Put back the limit from before `apply`; nothing if it was not applied."""
        if self._previous is None:
            return
        self._sync()
        self._set(self._previous)
        self._previous = None
        self.current = None
