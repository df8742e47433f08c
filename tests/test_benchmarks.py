"""`python -m engine bench --json` runs the benchmarks package and keeps every key it had;
without the package (a packaged app) it says why."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench_keys import STABLE_KEYS

from engine.cli import main as engine_main


def test_engine_bench_json_runs_the_benchmarks_package(tiny_model_dir):
    """The command runs the sections asked for and prints one JSON object with their
    stable keys (the constraints and trie sections' keys are checked where those sections
    are tested: test_benchmarks_constraints.py, test_benchmarks_trie.py). `--quick` makes
    it a smoke run of one round (its `--tokens` as given), whose ratios say they cannot
    tell, in the JSON and on stderr."""
    run = subprocess.run(
        [sys.executable, "-m", "engine", "bench", "--json", "--model", str(tiny_model_dir)]
        + ["--quick", "--tokens", "4", "--only", "decode", "--only", "session"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout)
    expected = (
        STABLE_KEYS["model"]
        | STABLE_KEYS["run"]
        | STABLE_KEYS["decode"]
        | STABLE_KEYS["session"]
        | STABLE_KEYS["load"]
    )
    assert expected <= set(figures), sorted(expected - set(figures))
    assert figures["model"] == tiny_model_dir.name
    assert figures["decode_tokens"] == 4 and figures["decode_tps"] > 0
    assert figures["bench_quick"] is True and figures["decode_runs"] == 1
    # each section's time, within the whole run's
    sections = figures["decode_section_s"] + figures["session_section_s"]
    assert 0 < sections <= figures["bench_s"]
    # one round: the ratio cannot tell, and the run says why
    assert figures["decode_ratio_vs_mlx_lm_spread"] == 0
    assert figures["decode_ratio_vs_mlx_lm_can_tell"] is False
    reason = figures["decode_ratio_vs_mlx_lm_cannot_tell"]
    assert "one of its rounds only" in reason
    assert figures["cannot_tell"] == {"decode_ratio_vs_mlx_lm": reason}
    assert f"cannot tell: decode_ratio_vs_mlx_lm: {reason}" in run.stderr
    # the machine's state: each section's share of the CPUs other processes took (whatever
    # it was, between 0 and 1), and a warning on stderr for each one over the threshold
    assert set(figures["load_sections"]) == {"decode", "session"}
    assert all(0 <= share <= 1 for share in figures["load_sections"].values())
    assert figures["load_cpus"] >= 1 and len(figures["load_avg_after"]) == 3
    for name, share in figures["load_sections"].items():
        flagged = share > figures["load_max_share"]
        assert (f"warning: {name} was measured" in run.stderr) == flagged, run.stderr
        assert (
            figures["load_warning"] is not None and f"{name} (" in figures["load_warning"]
        ) == flagged


def test_engine_bench_help_lists_the_benchmark_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        engine_main(["bench", "--help"])
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    assert "python -m engine bench" in usage and "--only" in usage and "session" in usage
    assert "--wait-quiet" in usage and "--max-load-share" in usage
    assert "--quick" in usage and "--min-side-s" in usage


def test_engine_bench_without_the_benchmarks_package_says_why(monkeypatch, capsys):
    # A packaged app has no `benchmarks` package: None in sys.modules makes the import fail
    # the same way.
    monkeypatch.setitem(sys.modules, "benchmarks", None)
    monkeypatch.delitem(sys.modules, "benchmarks.bench", raising=False)
    assert engine_main(["bench", "--json"]) == 2
    assert "not part of this installation" in capsys.readouterr().err


def test_other_commands_still_reject_unknown_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        engine_main(["import-gguf", "default", "--frobnicate"])
    assert exit_info.value.code == 2
    assert "--frobnicate" in capsys.readouterr().err
