"""How much memory a model may take here, without MLX: the library and the download check use
the same headroom as the engine's memory plan (`engine.memory.plan.plan_memory`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from engine.types import MemoryPlan

GiB = 1 << 30
# On the CPU backend the engine runs small quantized models in float32 (engine.library.load).
CPU_DEQUANTIZE_LIMIT = 2 * GiB


def headroom_bytes(device_bytes: int, metal: bool) -> int:
    """What is kept free of `device_bytes`: activations and other apps on a Mac's GPU
    working set, the OS and other programs elsewhere."""
    return max(GiB // 2, device_bytes // 10) if metal else max(2 * GiB, device_bytes // 4)


def gb(n: int) -> str:
    """Bytes as people read them: GB from 1 GB, else MB."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


@dataclass(frozen=True)
class MemoryBudget:
    """The memory a model may use on this machine."""

    metal: bool
    device_bytes: int

    @classmethod
    def from_plan(cls, plan: MemoryPlan) -> MemoryBudget:
        """The budget behind a loaded model's plan (what the GUI has from the engine)."""
        return cls(plan.metal, plan.device_budget_bytes)

    @classmethod
    def estimate(cls) -> MemoryBudget:
        """Before the engine has measured the device: the machine's memory, and on a Mac
        three quarters of it as the GPU working set (what Metal typically recommends)."""
        try:
            memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            memory = 8 * GiB
        if sys.platform == "darwin":
            return cls(True, memory * 3 // 4)
        return cls(False, memory)

    @property
    def available_bytes(self) -> int:
        return self.device_bytes - headroom_bytes(self.device_bytes, self.metal)

    def runtime_bytes(self, stored_bytes: int, parameters: int | None, quantized: bool) -> int:
        """What a model of `stored_bytes` takes once loaded: off Metal, a small quantized
        model is dequantized to float32."""
        if not self.metal and quantized and parameters and parameters * 4 <= CPU_DEQUANTIZE_LIMIT:
            return parameters * 4
        return stored_bytes

    def fits(self, model_bytes: int) -> bool:
        return model_bytes < self.available_bytes

    def describe(self) -> str:
        where = "this Mac's GPU budget" if self.metal else "this machine's budget"
        return f"{where} is {gb(self.available_bytes)}"
