from pathlib import Path

import pytest
from bench_keys import STABLE_KEYS

from benchmarks import library


def test_library_section_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The section's keys and bounds, with a small version of its large fixture and of the
    error measurement (the real ones take a minute)."""
    write, errors = library.write_large_fixture, library.requantization_errors
    monkeypatch.setattr(
        library, "write_large_fixture", lambda path: write(path, hidden=256, layers=1)
    )
    monkeypatch.setattr(library, "requantization_errors", lambda: errors(rows=16, cols=512))
    figures = library.run_library_bench()
    assert STABLE_KEYS["library"] <= set(figures)
    assert figures["import_default_s"] > 0
    assert figures["import_default_peak_mb"] > figures["import_baseline_peak_mb"] > 0
    assert figures["import_large_output_mb"] > 0
    for t in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        assert figures[f"requant_{t}_max_err_steps"] == 0 and figures[f"requant_{t}_rel_rms"] == 0
    for t in ("q2_k", "q3_k", "q6_k"):  # re-quantized: at most half a step (+ float16)
        assert 0 < figures[f"requant_{t}_max_err_steps"] <= 0.51
    for t in ("q4_k", "q5_k"):  # repacked: only the float16 rounding of scales and offsets
        assert figures[f"requant_{t}_max_err_steps"] < 0.25
        assert figures[f"requant_{t}_rel_rms"] < 1e-3
