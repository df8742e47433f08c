"""The coverage bench section on a handful of real schemas (the tiny model): every key it
promises, with rates that are rates."""

from __future__ import annotations

import shutil

from bench_keys import STABLE_KEYS
from shared_datasets import dataset

from benchmarks.coverage import SAMPLE_SUBSETS, run_coverage_bench


def test_coverage_section_reports_its_keys(tiny_engine, tmp_path, monkeypatch):
    bench = dataset("jsonschemabench")
    for subset in SAMPLE_SUBSETS:
        (tmp_path / "jsonschemabench" / subset).mkdir(parents=True)
        for path in sorted((bench / subset).glob("*.json"))[:2]:
            shutil.copy(path, tmp_path / "jsonschemabench" / subset / path.name)
    monkeypatch.setenv("CORRAL_DATASETS", str(tmp_path))
    figures = run_coverage_bench(tiny_engine, max_tokens=40)
    assert STABLE_KEYS["coverage"] <= set(figures), figures
    assert figures["coverage_schemas"] == 6
    for key in ("schema_compile_rate", "schema_compile_rate_strict", "closed_to_fit_rate"):
        assert 0 <= figures[key] <= 1
    assert figures["schema_compile_rate"] >= figures["schema_compile_rate_strict"]
    assert figures["first_mask_p50_ms"] <= figures["first_mask_p99_ms"]
    # the tiny model rambles: some replies are closed to fit, which counts as complete
    assert figures["closed_to_fit_rate"] > 0
    assert figures["constrained_complete_rate"] >= figures["closed_to_fit_rate"] / 2


def test_a_reply_is_checked_against_the_schema_corral_enforced() -> None:
    from benchmarks.coverage import enforced_schema

    schema = {
        "type": "object",
        "properties": {"not": {"not": {"const": 1}}, "b": {"oneOf": [{}, {"type": "string"}]}},
    }
    assert enforced_schema(schema, []) is schema
    relaxed = enforced_schema(
        schema,
        [
            'JSON schema keywords not enforced (ignored): "not"',
            "oneOf not fully supported, falling back to anyOf.",
        ],
    )
    # the keyword goes, a property that happens to be called "not" stays
    assert relaxed == {
        "type": "object",
        "properties": {"not": {}, "b": {"anyOf": [{}, {"type": "string"}]}},
    }
