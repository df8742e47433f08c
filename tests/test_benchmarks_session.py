"""The engine-level prefix-cache session: every reusable token is reused."""

from bench_keys import STABLE_KEYS

from benchmarks.session import run_session_hit_rate


def test_scripted_session_reuses_what_a_perfect_cache_would(tiny_engine) -> None:
    figures = run_session_hit_rate(tiny_engine, max_tokens=6)
    assert STABLE_KEYS["session"] <= set(figures)
    assert figures["engine_session_reusable_tokens"] > 100
    assert figures["engine_session_hit_rate"] >= 0.95
    steps = {s["step"]: s for s in figures["engine_session_steps"]}
    # A regenerate reuses the whole prompt but its last token.
    regen = steps["regenerate turn 3"]
    assert regen["cached"] == regen["prompt"] - 1
    # The second conversation reuses the shared system prompt.
    assert steps["second conversation"]["cached"] >= 20
