"""The `serving` bench section: embeddings and rerank through the server equal the
library's own, the speed ratio is measured, and keep-alives hold clients through a slow
prefill."""

from __future__ import annotations

from bench_keys import STABLE_KEYS

from benchmarks.serving import index_chunks, serving_figures


def test_serving_section_reports_every_figure(tiny_model_dir, tmp_path) -> None:
    from engine.engine import Engine

    engine = Engine(learn_pass_cost=False, speculative=False)  # as the bench's own
    engine.load_model(str(tiny_model_dir)).result()
    try:
        figures = serving_figures(engine, rounds=1, inputs=4, families=("xlm_roberta",))
    finally:
        engine.close()
    assert STABLE_KEYS["serving"] <= set(figures), sorted(STABLE_KEYS["serving"] - set(figures))
    # every family is checked by tests/test_embeddings.py; one is enough here
    assert figures["embeddings_identical"] == 1.0 and figures["embeddings_families"] == 1
    assert figures["embeddings_max_abs_diff"] <= 1e-5
    assert figures["rerank_identical"] == 1.0
    # how fast each side runs depends on the machine: measured, not banded
    assert figures["embeddings_tps_ratio"] > 0 and figures["embeddings_tps_ratio_spread"] == 0
    assert figures["embeddings_inputs"] == 4 and figures["embeddings_tokens"] > 4
    assert figures["keepalive_ok"] == 1.0, figures["keepalive_failures"]
    assert figures["keepalive_runs"] == 6


def test_the_index_is_cut_into_chunks_of_the_repositorys_source() -> None:
    chunks = index_chunks(5)
    assert len(chunks) == 5 and all(0 < len(c) <= 400 for c in chunks)
