"""The bench's record of the machine (benchmarks/machine.py) and its ratios' spreads
(benchmarks/rounds.py), on synthetic /proc/stat samples: no clock, no load of this machine."""

from __future__ import annotations

import pytest

from benchmarks.machine import CpuSample, LoadRecord, others_share, parse_proc_stat
from benchmarks.rounds import alternate, paired_figures, ratio_figures

HZ = 100.0


def proc_stat(user: int, system: int, idle: int, *, iowait: int = 0, steal: int = 0) -> str:
    """/proc/stat's text with these ticks in its aggregate line (and one per-CPU line)."""
    cpu = f"{user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0"
    return f"cpu  {cpu}\ncpu0 {cpu}\nintr 12345\nctxt 999\n"


def sample(text: str, own_s: float, wall_s: float, load: float = 0.5) -> CpuSample:
    busy, total = parse_proc_stat(text, HZ)
    return CpuSample(wall_s, own_s, busy, total, (load, load, load), "proc_stat")


def test_proc_stat_counts_busy_and_idle_columns() -> None:
    # busy: user nice system irq softirq steal; idle: idle and iowait
    busy, total = parse_proc_stat(proc_stat(300, 100, 500, iowait=50, steal=50), HZ)
    assert busy == pytest.approx(4.5) and total == pytest.approx(10.0)
    with pytest.raises(ValueError, match="cpu"):
        parse_proc_stat("intr 1\n", HZ)


def test_others_share_is_busy_time_less_this_process_over_all_cpus() -> None:
    # 2 CPUs for 10 s = 2000 ticks: 1200 busy, of which this process took 6 s (600 ticks)
    before = sample(proc_stat(1000, 0, 1000), own_s=1.0, wall_s=0.0)
    after = sample(proc_stat(2200, 0, 1800), own_s=7.0, wall_s=10.0)
    assert others_share(before, after, cpus=2) == pytest.approx(600 / 2000)
    # a quiet machine: all busy time is this process's own
    quiet = sample(proc_stat(1600, 0, 2400), own_s=7.0, wall_s=10.0)
    assert others_share(before, quiet, cpus=2) == pytest.approx(0.0)
    # own time counted with some rounding beyond the ticks never makes the share negative
    over = sample(proc_stat(1600, 0, 2400), own_s=9.0, wall_s=10.0)
    assert others_share(before, over, cpus=2) == 0.0


def test_without_cpu_times_the_load_average_stands_in() -> None:
    before = CpuSample(0.0, 0.0, None, None, (0.0, 0.0, 0.0), "loadavg")
    # 10 s in which this process ran 10 CPU-seconds (rate 1) and the load average read 3:
    # two other runnable processes on 4 CPUs
    after = CpuSample(10.0, 10.0, None, None, (3.0, 2.0, 1.0), "loadavg")
    assert others_share(before, after, cpus=4) == pytest.approx(0.5)
    blind = CpuSample(10.0, 10.0, None, None, None, "loadavg")
    assert others_share(before, blind, cpus=4) is None


class Samples:
    """Hands out prepared samples one by one (what the machine would have read)."""

    def __init__(self, samples: list[CpuSample]) -> None:
        self.samples = list(samples)

    def __call__(self) -> CpuSample:
        return self.samples.pop(0)


def test_a_section_measured_under_load_is_named_in_the_warning() -> None:
    ticks = [
        (proc_stat(0, 0, 0), 0.0, 0.0, 0.2),  # the record's first sample
        (proc_stat(0, 0, 0), 0.0, 0.0, 0.2),  # decode begins
        (proc_stat(500, 0, 1500), 5.0, 10.0, 0.6),  # decode ends: others 0 of 2000
        (proc_stat(500, 0, 1500), 5.0, 10.0, 0.6),  # batch begins
        (proc_stat(2000, 0, 2000), 10.0, 20.0, 4.5),  # batch ends: others 1000 of 2000
    ]
    record = LoadRecord(
        0.1, Samples([sample(t, own, wall, load) for t, own, wall, load in ticks]), 2
    )
    for name in ("decode", "batch"):
        record.begin(name)
        load = record.end(name)
        assert record.loaded(load) == (name == "batch")
    figures = record.figures()
    assert figures["load_sections"] == {"decode": 0.0, "batch": 0.5}
    assert figures["load_others_share_max"] == 0.5
    assert figures["load_others_share"] == pytest.approx(1000 / 4000, abs=1e-3)
    assert figures["load_avg_before"] == [0.2, 0.2, 0.2]
    assert figures["load_avg_after"] == [4.5, 4.5, 4.5]
    assert figures["load_cpus"] == 2 and figures["load_method"] == "proc_stat"
    warning = figures["load_warning"]
    assert warning is not None and "batch (50%)" in warning and "decode" not in warning


def test_a_quiet_run_has_no_warning() -> None:
    quiet = [sample(proc_stat(100 * i, 0, 100 * i), 0.0 + i, float(i)) for i in range(3)]
    record = LoadRecord(0.1, Samples(quiet), 2)
    record.begin("decode")
    record.end("decode")
    assert record.figures()["load_warning"] is None


def test_wait_quiet_waits_until_two_quiet_intervals_in_a_row() -> None:
    # others take 50% of 2 CPUs for two intervals, then nothing for two
    stats = [
        proc_stat(0, 0, 0),
        proc_stat(200, 0, 200),
        proc_stat(400, 0, 400),
        proc_stat(400, 0, 800),
        proc_stat(400, 0, 1200),
    ]
    samples = [sample(t, 0.0, 2.0 * i) for i, t in enumerate(stats)]
    slept: list[float] = []
    record = LoadRecord(0.1, Samples([samples[0], *samples]), 2)
    assert record.wait_quiet(60, interval_s=2.0, sleep=slept.append)
    assert slept == [2.0] * 4 and record.figures()["load_waited_s"] == 8.0


def test_wait_quiet_gives_up_at_its_limit() -> None:
    busy = [sample(proc_stat(400 * i, 0, 0), 0.0, 2.0 * i) for i in range(10)]
    record = LoadRecord(0.1, Samples([busy[0], *busy]), 2)
    assert not record.wait_quiet(5, interval_s=2.0, sleep=lambda _: None)
    assert record.waited_s == 6.0  # three intervals: the first past the limit stops it


def test_ratios_come_with_their_spread_over_rounds() -> None:
    figures = paired_figures("x_ratio", [(2.0, 2.0), (3.0, 2.0), (1.0, 2.0), (5.0, 0.0)])
    # rounds: 1.0, 1.5, 0.5 (a round whose base is 0 is left out): median 1.0, spread 1.0
    assert figures == {"x_ratio": 1.0, "x_ratio_spread": 1.0}
    assert ratio_figures("y", []) == {"y": None, "y_spread": None}
    assert [alternate(r) for r in range(3)] == [(True, False), (False, True), (True, False)]
