"""What Corral shows about a distributed group: plain data, no MLX (the app imports it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.types import MemoryPlan


@dataclass(frozen=True)
class RankPlan:
    """One rank's share of the model and of the prompt cache, and its machine's plan."""

    rank: int
    host: str
    weights_bytes: int
    kv_budget_bytes: int
    plan: MemoryPlan


@dataclass(frozen=True)
class GroupInfo:
    """The group serving the loaded model: backend, how the model is split, every rank."""

    backend: str
    mode: str  # "tensor" or "pipeline"
    ranks: tuple[RankPlan, ...] = field(default_factory=tuple)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def summary(self) -> str:
        """One line for a status bar: ranks, split, and each rank's share."""
        shares = ", ".join(
            f"rank {r.rank} ({r.host}) {r.weights_bytes / 1e9:.2f} GB" for r in self.ranks
        )
        return f"{self.size} ranks over {self.backend}, {self.mode} parallel: {shares}"
