"""`python -m engine bench --json` runs the benchmarks package and keeps every key it had."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.cli import main as engine_main

# Every key `python -m engine bench --json` printed when the benchmarks moved out of engine/.
# New figures add keys; none of these may go or change its name.
STABLE_KEYS = {
    "model",
    # decode
    "decode_tps",
    "mlx_lm_decode_tps",
    "decode_ratio_vs_mlx_lm",
    "decode_tokens",
    "decode_runs",
    # constraints
    "free_tps",
    "constrained_tps",
    "constrained_serial_tps",
    "constrained_ratio",
    "constrained_ratio_serial",
    "constrained_tokens",
    "grammar_compile_ms",
    "mask_mean_ms",
    "mask_p99_ms",
    "mask_overhead_ms",
    "forced_free_tps",
    "forced_tps",
    "forced_token_speedup",
    "forced_tokens",
    "forced_forward_passes",
    "stress_free_tps",
    "stress_constrained_tps",
    "stress_constrained_serial_tps",
    "stress_constrained_ratio",
    "stress_constrained_ratio_serial",
    "stress_constrained_tokens",
    "stress_grammar_compile_ms",
    "stress_mask_mean_ms",
    "stress_mask_p99_ms",
    "stress_mask_overhead_ms",
    # trie
    "trie_turns",
    "trie_history_tokens",
    "trie_hit_rate",
    "trie_stats",
    "trie_session_requests",
    "trie_session_cached_tokens",
    "trie_session_perfect_tokens",
    "trie_ttft_over_new_prefill",
    "trie_ttft_over_uncached_last_turn",
    "trie_turn_prompt_tokens",
    "trie_turn_cached_tokens",
    "trie_turn_ttft_s",
    "trie_turn_uncached_ttft_s",
    "trie_turn_new_prefill_s",
    "trie_turn_ttft_over_new_prefill",
    "trie_regenerate_prompt_tokens",
    "trie_regenerate_cached_tokens",
    "trie_regenerate_ttft_s",
    "trie_regenerate_uncached_ttft_s",
    "trie_edit_prompt_tokens",
    "trie_edit_cached_tokens",
    "trie_edit_ttft_s",
    "trie_edit_uncached_ttft_s",
    "trie_switch_back_prompt_tokens",
    "trie_switch_back_cached_tokens",
    "trie_reasoning_dropped_prompt_tokens",
    "trie_reasoning_dropped_cached_tokens",
    "trie_lookup_ms_2k",
    "trie_lookup_ms_8k",
    "trie_branch_lookup_ms_2k",
    "trie_branch_lookup_ms_8k",
    "mlx_lm_lookup_ms_2k",
    "mlx_lm_lookup_ms_8k",
    "mlx_lm_branch_lookup_ms_2k",
    "mlx_lm_branch_lookup_ms_8k",
    # session
    "engine_session_cached_tokens",
    "engine_session_reusable_tokens",
    "engine_session_hit_rate",
}


def test_engine_bench_json_prints_every_stable_key(tiny_model_dir):
    run = subprocess.run(
        [sys.executable, "-m", "engine", "bench", "--json", "--model", str(tiny_model_dir)]
        + ["--tokens", "4", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout)
    assert STABLE_KEYS <= set(figures), sorted(STABLE_KEYS - set(figures))
    assert figures["model"] == tiny_model_dir.name
    assert figures["decode_tokens"] == 4 and figures["decode_tps"] > 0


def test_engine_bench_help_lists_the_benchmark_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        engine_main(["bench", "--help"])
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    assert "python -m engine bench" in usage and "--only" in usage and "session" in usage


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
