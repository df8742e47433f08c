"""Ratios over alternating rounds, each with its spread.

A ratio of two loops is only worth reading next to how much it moved: every section runs
its two sides in rounds whose order alternates (A B, then B A, ...), takes each round's
ratio (both runs saw about the same machine), and reports the median of those ratios with
its spread (`<key>_spread`: the highest round's ratio minus the lowest). A spread as large
as the gap a figure is meant to show says the run cannot tell.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def round_ratios(pairs: Iterable[tuple[float, float]]) -> list[float]:
    """Each round's A over B (rounds where B is 0 left out)."""
    return [a / b for a, b in pairs if b]


def spread(values: list[float], digits: int = 3) -> float | None:
    """Highest minus lowest (None without values)."""
    return round(max(values) - min(values), digits) if values else None


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


def alternate(round_index: int) -> tuple[bool, bool]:
    """The order of a round's two runs, as (first is A, second is A): A B in even rounds,
    B A in odd ones."""
    return (True, False) if round_index % 2 == 0 else (False, True)
