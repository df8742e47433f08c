"""How the bench runs a comparison's sides long enough and says whether a spread can tell
(benchmarks/rounds.py), and how the bench's options set the lengths (benchmarks/bench.py):
sides that report made-up work and seconds, no clock and no model."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from benchmarks.bench import build_parser, resolve_options, verdicts_of
from benchmarks.rounds import (
    MIN_SIDE_S,
    SPREAD_TOLERANCE,
    Timed,
    min_side_s,
    paired_rounds,
    rounds_for,
    run_for,
    told_figures,
    verdict,
)


def side(
    seconds: float, work: float = 10.0, log: list[str] | None = None, name: str = ""
) -> Callable[[], Timed]:
    """A side whose every run does `work` in `seconds` (and notes its name in `log`)."""

    def run() -> Timed:
        if log is not None:
            log.append(name)
        return Timed(work, seconds)

    return run


def test_a_short_side_runs_again_until_it_has_taken_its_time() -> None:
    timed = run_for(side(0.3, work=6), min_s=1.0)
    # 0.3 s a run: four runs reach a second; the rate is over all of them
    assert timed == Timed(24, pytest.approx(1.2), 4)
    assert timed.rate == pytest.approx(20.0)
    # a long side runs once; a side that takes no time stops at the bound
    assert run_for(side(2.0), min_s=1.0).runs == 1
    assert run_for(side(0.0), min_s=1.0, max_runs=5).runs == 5
    assert Timed(5, 0.0).rate == 0.0
    assert Timed.from_rate(30, 15.0) == Timed(30, 2.0)


def test_rounds_alternate_which_side_goes_first() -> None:
    log: list[str] = []
    pairs = paired_rounds(side(1.0, 20, log, "a"), side(1.0, 10, log, "b"), rounds=3, min_s=0.5)
    assert log == ["a", "b", "b", "a", "a", "b"]
    assert pairs.ratios == [2.0, 2.0, 2.0] and pairs.side_s == 1.0
    log.clear()
    paired_rounds(side(1.0, log=log, name="a"), side(1.0, log=log, name="b"), 2, a_first=False)
    assert log == ["b", "a", "a", "b"]


def test_a_ratio_says_whether_its_spread_can_tell() -> None:
    told = told_figures("x_ratio", [1.0, 1.02, 0.99, 1.01, 1.0], side_s=2.0)
    assert told == {
        "x_ratio": 1.0,
        "x_ratio_spread": 0.03,
        "x_ratio_can_tell": True,
        "x_ratio_cannot_tell": None,
    }
    wide = told_figures("x_ratio", [1.0, 1.3, 0.9, 1.0, 1.1], side_s=0.2)
    assert wide["x_ratio_can_tell"] is False
    reason = wide["x_ratio_cannot_tell"]
    # what a reader needs: the spread against the tolerance, and why the run was short
    assert "spread 0.4" in reason and f"{SPREAD_TOLERANCE:.3g}" in reason
    assert "0.20 s a round" in reason and "--min-side-s" in reason
    one = told_figures("x_ratio", [1.0])
    assert (
        one["x_ratio_can_tell"] is False and "one of its rounds only" in one["x_ratio_cannot_tell"]
    )
    assert told_figures("x_ratio", [])["x_ratio_cannot_tell"] == "nothing was measured"


def test_few_rounds_and_figures_in_ms_are_named_in_the_reason() -> None:
    few = verdict("y", 0.2, 3, side_s=MIN_SIDE_S)
    assert few["y_can_tell"] is False and "fewer than 5 rounds" in few["y_cannot_tell"]
    ms = verdict("z_ms", 30.0, 7, tolerance=12.5, unit="ms", over="turns")
    assert "its 7 turns spread 30 ms, more than the 12.5 ms" in ms["z_ms_cannot_tell"]
    assert verdict("z_ms", 12.0, 7, tolerance=12.5, unit="ms")["z_ms_can_tell"] is True


def test_sections_read_their_lengths_from_the_options() -> None:
    # a namespace without the bench's options (a test's): one run a side, its rounds
    bare = argparse.Namespace(tokens=8, repeats=2)
    assert min_side_s(bare) == 0.0 and rounds_for(bare, 5) == 2
    assert rounds_for(argparse.Namespace(tokens=8), 5) == 5
    # the bench's own: a section takes the rounds it needs unless --repeats was given
    full = resolve_options(build_parser().parse_args([]))
    assert (full.tokens, full.repeats, full.min_side_s, full.quick) == (64, 3, MIN_SIDE_S, False)
    assert rounds_for(full, 5) == 5 and rounds_for(full, 2) == 2
    given = resolve_options(build_parser().parse_args(["--repeats", "4", "--min-side-s", "0.5"]))
    assert rounds_for(given, 7) == 4 and min_side_s(given) == 0.5
    quick = resolve_options(build_parser().parse_args(["--quick"]))
    assert (quick.tokens, quick.repeats, quick.min_side_s) == (16, 1, 0.0)
    assert rounds_for(quick, 7) == 1
    assert resolve_options(build_parser().parse_args(["--quick", "--tokens", "4"])).tokens == 4


def test_the_bench_adds_a_verdict_where_a_section_gave_only_a_spread() -> None:
    args = resolve_options(build_parser().parse_args([]))
    section = {
        "a_ratio": 0.9,
        "a_ratio_spread": 0.3,
        "b_ratio": 1.0,
        "b_ratio_spread": 0.01,
        "c_ratio": 1.0,  # said already: left as it is
        "c_ratio_spread": 0.5,
        "c_ratio_can_tell": True,
        "c_ratio_cannot_tell": None,
        "d_spread_ms": 4.0,  # no ratio of that name
        "f_ratio": None,  # nothing measured
        "f_ratio_spread": None,
    }
    added = verdicts_of(section, args)
    assert added["a_ratio_can_tell"] is False and "spread 0.3" in added["a_ratio_cannot_tell"]
    assert added["b_ratio_can_tell"] is True and added["b_ratio_cannot_tell"] is None
    assert added["f_ratio_cannot_tell"] == "nothing was measured"
    assert {key.rsplit("_ratio", 1)[0] for key in added} == {"a", "b", "f"}
    # a smoke run's spread of 0 is one round's
    quick = resolve_options(build_parser().parse_args(["--quick"]))
    flat = verdicts_of({"e_ratio": 1.0, "e_ratio_spread": 0.0}, quick)
    assert "one of its rounds only" in flat["e_ratio_cannot_tell"]
