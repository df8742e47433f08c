"""Ratios over alternating rounds, each with its spread, and whether that spread can tell.

A ratio of two loops is only worth reading next to how much it moved: every section runs
its two sides in rounds whose order alternates (A B, then B A, ...), takes each round's
ratio (both runs saw about the same machine), and reports the median of those ratios with
its spread (`<key>_spread`: the highest round's ratio minus the lowest).

A spread as large as the gap a figure is meant to show says the run cannot tell. The goals
are a few percent apart (0.95, 0.97, 1.0), so a ratio can tell when its spread is at most
`SPREAD_TOLERANCE` (0.05); `verdict` says so next to it (`<key>_can_tell`) or why not
(`<key>_cannot_tell`: one round, too few rounds, sides too short to time, or a spread wider
than the tolerance). A side that runs a fraction of a second measures the scheduler more
than the loop (one late wake-up is a few percent of it), so `run_for` repeats a side until
it has run at least a set time and counts the round as all its runs together.

How a section adopts it (see `paired_rounds` for two sides that each return a `Timed`):

    pairs = paired_rounds(lambda: timed_a(), lambda: timed_b(),
                          rounds_for(args, 5), min_side_s(args))
    figures.update(pairs.figures("x_ratio"))  # x_ratio, _spread, _can_tell, _cannot_tell

The bench's options decide the lengths: `--min-side-s` (each side's least time a round),
`--repeats` (rounds; a section asks `rounds_for` for its own need when it is not given),
`--quick` (one short round everywhere: a smoke run whose ratios say they cannot tell).
Namespaces without those options (the tests') get one run a side and the rounds they ask.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# A ratio tells when its rounds agree within this (the goals are a few percent apart).
SPREAD_TOLERANCE = 0.05
# Each side's least time a round in a full bench run (--min-side-s), and the rounds a
# spread needs before it means much; below the first a side is timed repeatedly.
MIN_SIDE_S = 1.5
MIN_ROUNDS = 5
# How often `run_for` may repeat one side to reach its time (a side whose runs take no
# time at all must still end).
MAX_RUNS_PER_SIDE = 64


@dataclass(frozen=True)
class Timed:
    """Work done (tokens, usually) over the seconds it took, over `runs` runs."""

    work: float
    seconds: float
    runs: int = 1

    @property
    def rate(self) -> float:
        """Work per second (0 when no time was taken)."""
        return self.work / self.seconds if self.seconds > 0 else 0.0

    def __add__(self, other: Timed) -> Timed:
        return Timed(self.work + other.work, self.seconds + other.seconds, self.runs + other.runs)

    @classmethod
    def from_rate(cls, work: float, rate: float) -> Timed:
        """`work` done at `rate` per second (a reply's tokens and its tokens/s)."""
        return cls(work, work / rate if rate > 0 else 0.0)


def run_for(side: Callable[[], Timed], min_s: float, max_runs: int | None = None) -> Timed:
    """`side` run once, then again until its runs add up to at least `min_s` seconds (at
    most `max_runs` runs, `MAX_RUNS_PER_SIDE` by default): one rate over all of them, so a
    round is never one short run."""
    limit = MAX_RUNS_PER_SIDE if max_runs is None else max_runs
    total = side()
    while total.seconds < min_s and total.runs < limit:
        total = total + side()
    return total


def round_ratios(pairs: Iterable[tuple[float, float]]) -> list[float]:
    """Each round's A over B (rounds where B is 0 left out)."""
    return [a / b for a, b in pairs if b]


def spread(values: list[float], digits: int = 3) -> float | None:
    """Highest minus lowest (None without values)."""
    return round(max(values) - min(values), digits) if values else None


def verdict(
    key: str,
    spread_: float | None,
    rounds: int | None,
    *,
    tolerance: float = SPREAD_TOLERANCE,
    side_s: float | None = None,
    unit: str = "",
    over: str = "rounds",
) -> dict[str, Any]:
    """Whether `key`'s spread over `rounds` can tell: `key_can_tell` (True or False) and
    `key_cannot_tell` (None, or why not: what a reader must know before comparing it).

    `side_s`: the shortest time one side of a round ran, when known; `unit`: the spread's
    unit in the reason ("ms" for a figure in milliseconds; a ratio has none); `over`: what
    the spread is over, in the reason ("turns", "prompts"; rounds by default)."""
    reason = cannot_tell_reason(
        spread_, rounds, tolerance=tolerance, side_s=side_s, unit=unit, over=over
    )
    return {f"{key}_can_tell": reason is None, f"{key}_cannot_tell": reason}


def cannot_tell_reason(
    spread_: float | None,
    rounds: int | None,
    *,
    tolerance: float = SPREAD_TOLERANCE,
    side_s: float | None = None,
    unit: str = "",
    over: str = "rounds",
) -> str | None:
    """Why a figure with this spread cannot tell (None when it can). `rounds` None: not
    known (the reason then names the spread only)."""
    if spread_ is None or (rounds is not None and rounds < 1):
        return "nothing was measured"
    if rounds == 1:
        return f"one of its {over} only: no spread to judge it by (run more)"
    if spread_ <= tolerance:
        return None
    sep = " " if unit else ""
    its = f"its {over}" if rounds is None else f"its {rounds} {over}"
    reason = (
        f"{its} spread {spread_:g}{sep}{unit}, more than the "
        f"{tolerance:.3g}{sep}{unit} it must be read to"
    )
    if side_s is not None and side_s < MIN_SIDE_S:
        reason += (
            f"; a side ran only {side_s:.2f} s a round (under {MIN_SIDE_S:g} s a short run "
            "times the machine's scheduling more than the loop: --min-side-s)"
        )
    elif rounds is not None and rounds < MIN_ROUNDS:
        reason += f"; fewer than {MIN_ROUNDS} {over}"
    elif rounds is not None:
        reason += (
            f"; the machine was busy (see load_sections: run it alone), or the figure "
            f"differs from one of its {over} to the next"
        )
    return reason


def ratio_figures(key: str, ratios: list[float], digits: int = 3) -> dict[str, float | None]:
    """`key`: the median of the rounds' ratios; `key_spread`: their spread."""
    return {
        key: round(statistics.median(ratios), digits) if ratios else None,
        f"{key}_spread": spread(ratios, digits),
    }


def paired_figures(
    key: str, pairs: Iterable[tuple[float, float]], digits: int = 3
) -> dict[str, float | None]:
    """`ratio_figures` of each round's A over B."""
    return ratio_figures(key, round_ratios(pairs), digits)


def told_figures(
    key: str, ratios: list[float], *, side_s: float | None = None, digits: int = 3
) -> dict[str, Any]:
    """`ratio_figures` and their `verdict` (`side_s`: a side's shortest time a round)."""
    figures: dict[str, Any] = dict(ratio_figures(key, ratios, digits))
    figures.update(verdict(key, figures[f"{key}_spread"], len(ratios), side_s=side_s))
    return figures


def alternate(round_index: int) -> tuple[bool, bool]:
    """The order of a round's two runs, as (first is A, second is A): A B in even rounds,
    B A in odd ones."""
    return (True, False) if round_index % 2 == 0 else (False, True)


@dataclass
class PairedRounds:
    """Two sides' `Timed` results, one of each a round."""

    a: list[Timed] = field(default_factory=list)
    b: list[Timed] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        """Each round's A rate over B rate (rounds where B took no time left out)."""
        return round_ratios(zip((t.rate for t in self.a), (t.rate for t in self.b), strict=True))

    @property
    def side_s(self) -> float | None:
        """The shortest time one side of a round ran (None before any round)."""
        times = [t.seconds for t in (*self.a, *self.b)]
        return min(times) if times else None

    def rates(self, side: str) -> list[float]:
        """Side "a"'s or "b"'s rate in each round."""
        return [t.rate for t in (self.a if side == "a" else self.b)]

    def figures(self, key: str, digits: int = 3) -> dict[str, Any]:
        """`key` (median of the rounds' ratios), `_spread`, `_can_tell`, `_cannot_tell`."""
        return told_figures(key, self.ratios, side_s=self.side_s, digits=digits)


def paired_rounds(
    side_a: Callable[[], Timed],
    side_b: Callable[[], Timed],
    rounds: int,
    min_s: float = 0.0,
    *,
    a_first: bool = True,
) -> PairedRounds:
    """`rounds` rounds of A and B in alternating order (A B, then B A; B A first when not
    `a_first`), each side run for at least `min_s` seconds a round (`run_for`)."""
    out = PairedRounds()
    for r in range(rounds):
        for is_a in alternate(r if a_first else r + 1):
            if is_a:
                out.a.append(run_for(side_a, min_s))
            else:
                out.b.append(run_for(side_b, min_s))
    return out


def min_side_s(args: Any) -> float:
    """Each side's least time a round for this run (`--min-side-s`; 0 for a namespace
    without it, as the tests build: one run a side)."""
    return float(getattr(args, "min_side_s", 0.0) or 0.0)


def rounds_for(args: Any, wanted: int) -> int:
    """The rounds of a comparison: `--repeats` when the caller gave it (a test's namespace
    always does, or has none), one under `--quick`, else `wanted`: what the section needs
    for a spread worth reading."""
    if getattr(args, "quick", False):
        return 1
    repeats = getattr(args, "repeats", None)
    if repeats and getattr(args, "repeats_given", True):
        return max(1, int(repeats))
    return max(1, wanted)


def is_quick(args: Any) -> bool:
    """Whether this is a `--quick` smoke run (fewer rounds and tokens everywhere)."""
    return bool(getattr(args, "quick", False))
