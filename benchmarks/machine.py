"""The machine's state while the bench measures: how much of the CPUs other processes took.

A figure measured while other programs compete for the cores says more about them than
about Corral (the same commit read `decode_ratio_vs_mlx_lm` 1.26 and 0.99 under load, 1.10
alone). So every bench run records, for each section, the share of all CPUs' time that
processes other than the bench used while the section ran, and says so (`load_warning`
and a line on stderr) when that share is above a threshold.

How the share is read, best source first:

- Linux: `/proc/stat`'s first line (every CPU's busy and idle ticks since boot) sampled
  before and after, less this process's own CPU time (`os.times()`, children included):
  what is left of the busy time is other processes'. Children's CPU time counts as the
  bench's own once they have ended and been waited for (the `distributed` section's ranks
  are, when its group closes); while they run it counts as other processes'.
- elsewhere (macOS) with psutil installed: the same from `psutil.cpu_times()`.
- otherwise: an estimate from the load average after the section (`os.getloadavg()`: the
  runnable processes over the last minute) less this process's own CPU rate, over the CPU
  count. Coarser (a minute's average, and it counts waiting, not running), but it flags
  the same busy machine.

The arithmetic takes samples as plain values (`CpuSample`), so tests feed it synthetic
ones; reading the machine is kept apart (`read_sample`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Above this share of all CPUs' time taken by other processes, a section's figures are
# flagged: on 2 cores one busy process elsewhere is already 0.5.
DEFAULT_MAX_OTHERS_SHARE = 0.1
PROC_STAT = Path("/proc/stat")
# /proc/stat's `cpu` columns that count as busy: user nice system (idle iowait) irq softirq
# steal; guest time is already inside user.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)
_IDLE_COLUMNS = (3, 4)


@dataclass(frozen=True)
class CpuSample:
    """The machine at one instant.

    `busy_s` and `total_s` are every CPU's busy and total time since some fixed origin, in
    CPU-seconds (None where the system does not say: then the load average stands in);
    `own_s` this process's CPU time (children that ended included); `wall_s` a monotonic
    clock; `loadavg` the 1-, 5- and 15-minute load averages (None where unknown)."""

    wall_s: float
    own_s: float
    busy_s: float | None
    total_s: float | None
    loadavg: tuple[float, float, float] | None
    method: str


def parse_proc_stat(text: str, ticks_per_s: float) -> tuple[float, float]:
    """(busy, total) CPU-seconds of all CPUs from /proc/stat's text."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            values += [0] * (8 - len(values))  # old kernels print fewer columns
            busy = sum(values[i] for i in _BUSY_COLUMNS)
            idle = sum(values[i] for i in _IDLE_COLUMNS)
            return busy / ticks_per_s, (busy + idle) / ticks_per_s
    raise ValueError("/proc/stat has no aggregate `cpu` line")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _loadavg() -> tuple[float, float, float] | None:
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):  # Windows, or a system that will not say
        return None
    return (one, five, fifteen)


def read_sample() -> CpuSample:
    """This machine now (see the module's note for the sources)."""
    wall, own, load = time.monotonic(), _own_cpu_s(), _loadavg()
    try:
        busy, total = parse_proc_stat(PROC_STAT.read_text(), os.sysconf("SC_CLK_TCK"))
        return CpuSample(wall, own, busy, total, load, "proc_stat")
    except (OSError, ValueError, AttributeError):
        pass
    if "psutil" in sys.modules or _importable("psutil"):
        import psutil  # type: ignore[import-untyped]

        times = psutil.cpu_times()
        idle = times.idle + getattr(times, "iowait", 0.0)
        total = sum(times)
        return CpuSample(wall, own, total - idle, total, load, "psutil")
    return CpuSample(wall, own, None, None, load, "loadavg")


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def others_share(before: CpuSample, after: CpuSample, cpus: int) -> float | None:
    """The share (0 to 1) of all CPUs' time between two samples that other processes used:
    busy time less this process's own, over the total. From the load average where the
    system gives no busy time; None where it gives neither."""
    own = max(0.0, after.own_s - before.own_s)
    if (
        before.busy_s is not None
        and after.busy_s is not None
        and before.total_s is not None
        and after.total_s is not None
    ):
        total = after.total_s - before.total_s
        if total <= 0:
            return 0.0
        others = (after.busy_s - before.busy_s) - own
        return min(1.0, max(0.0, others / total))
    if after.loadavg is None:
        return None
    wall = max(1e-9, after.wall_s - before.wall_s)
    # runnable processes beside this one: the 1-minute average less this process's rate
    others = after.loadavg[0] - own / wall
    return min(1.0, max(0.0, others / max(1, cpus)))


@dataclass(frozen=True)
class SectionLoad:
    """What the machine did while one section ran."""

    name: str
    share: float | None  # other processes' share of the CPUs (None: unknown)
    seconds: float


class LoadRecord:
    """The run's machine state: load averages before and after, the CPU count, and each
    section's share of the CPUs taken by other processes; `figures()` puts it in the
    bench's JSON. `sample` reads the machine (tests feed synthetic samples)."""

    def __init__(
        self,
        max_share: float = DEFAULT_MAX_OTHERS_SHARE,
        sample: Callable[[], CpuSample] = read_sample,
        cpus: int | None = None,
    ) -> None:
        self.max_share = max_share
        self.sample = sample
        self.cpus = cpus if cpus is not None else cpu_count()
        self.first = sample()
        self.sections: list[SectionLoad] = []
        self.waited_s = 0.0
        self._start: CpuSample | None = None
        self._last = self.first

    def begin(self, name: str) -> None:
        """A section starts now."""
        self._start = self.sample()

    def end(self, name: str) -> SectionLoad:
        """The section started by `begin` ended: its load, recorded."""
        assert self._start is not None, "end() without begin()"
        after = self.sample()
        load = SectionLoad(
            name, others_share(self._start, after, self.cpus), after.wall_s - self._start.wall_s
        )
        self.sections.append(load)
        self._last, self._start = after, None
        return load

    def loaded(self, load: SectionLoad) -> bool:
        """Whether other processes took more than the threshold while it ran."""
        return load.share is not None and load.share > self.max_share

    def warning(self) -> str | None:
        """A sentence naming the sections measured under load, None if there were none."""
        busy = [s for s in self.sections if self.loaded(s)]
        if not busy:
            return None
        named = ", ".join(f"{s.name} ({s.share:.0%})" for s in busy if s.share is not None)
        return (
            f"measured while other processes took more than {self.max_share:.0%} of the "
            f"{self.cpus} CPUs: {named}; these figures are not comparable, run again alone"
        )

    def figures(self) -> dict[str, Any]:
        """The record as flat bench keys."""
        shares = [s.share for s in self.sections if s.share is not None]
        whole = others_share(self.first, self._last, self.cpus) if self.sections else None
        return {
            "load_cpus": self.cpus,
            "load_method": self.first.method,
            "load_avg_before": _rounded(self.first.loadavg),
            "load_avg_after": _rounded(self._last.loadavg),
            "load_others_share": None if whole is None else round(whole, 3),
            "load_others_share_max": round(max(shares), 3) if shares else None,
            "load_sections": {
                s.name: None if s.share is None else round(s.share, 3) for s in self.sections
            },
            "load_max_share": self.max_share,
            "load_waited_s": round(self.waited_s, 1),
            "load_warning": self.warning(),
        }

    def wait_quiet(
        self,
        limit_s: float,
        *,
        interval_s: float = 2.0,
        quiet_samples: int = 2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> bool:
        """Wait until other processes took at most the threshold over `quiet_samples`
        intervals in a row, or `limit_s` passed: True if the machine went quiet."""
        waited, quiet = 0.0, 0
        previous = self.sample()
        while True:
            sleep(interval_s)
            now = self.sample()
            share = others_share(previous, now, self.cpus)
            waited += now.wall_s - previous.wall_s
            previous = now
            quiet = quiet + 1 if share is not None and share <= self.max_share else 0
            if share is None or quiet >= quiet_samples:
                self.waited_s += waited
                return share is not None
            if waited >= limit_s:
                self.waited_s += waited
                return False


def _rounded(values: tuple[float, ...] | None) -> list[float] | None:
    return None if values is None else [round(v, 2) for v in values]
