"""The prefix-cache benchmark runs on the tiny model and reports the figures it names."""

from bench_keys import STABLE_KEYS

from benchmarks.trie import format_trie_bench, run_trie_bench


def test_trie_bench_runs_on_the_tiny_model(tiny_model):
    model, tok = tiny_model
    d = run_trie_bench(model, tok, turns=4, history_tokens=240, lookup_tokens=(2000, 8000), reps=1)
    assert STABLE_KEYS["trie"] <= set(d), sorted(STABLE_KEYS["trie"] - set(d))
    for key in (
        "trie_ttft_over_new_prefill",
        "trie_ttft_over_uncached_last_turn",
        "trie_hit_rate",
        "trie_lookup_ms_2k",
        "trie_lookup_ms_8k",
        "mlx_lm_lookup_ms_2k",
        "mlx_lm_lookup_ms_8k",
    ):
        assert d[key] > 0, key
    assert d["trie_hit_rate"] >= 0.95 and d["trie_hit_rate"] <= 1
    assert len(d["trie_turn_ttft_s"]) == 4 and None not in d["trie_turn_uncached_ttft_s"]
    cached = d["trie_turn_cached_tokens"]
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])
    assert d["trie_regenerate_cached_tokens"] == d["trie_regenerate_prompt_tokens"] - 1
    assert 0 < d["trie_edit_cached_tokens"] < d["trie_edit_prompt_tokens"]
    # regenerate and edit branch off stored prompts: served by sharing, not copying
    assert d["trie_stats"]["shared_branches"] >= 2 and d["trie_stats"]["copies"] == 0
    text = format_trie_bench(d)
    assert "hit rate" in text and "8k" in text
