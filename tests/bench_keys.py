"""Every key `python -m engine bench --json` printed when the benchmarks moved out of engine/,
by section. New figures add keys; none of these may go or change its name."""

from __future__ import annotations

# the vision families the `vision` section builds (benchmarks/tiny_vision_families.py)
VISION_FAMILIES = (
    "gemma3",
    "gemma4",
    "mistral3",
    "phi3_v",
    "qwen2_5_vl",
    "qwen2_vl",
    "qwen3_vl",
    "smolvlm",
)

# the ratios of the `constraints` section, each with a spread and a verdict
CONSTRAINT_RATIOS = (
    "constrained_ratio",
    "constrained_ratio_serial",
    "constrained_ratio_unforced",
    "stress_constrained_ratio",
    "stress_constrained_ratio_serial",
    "stress_constrained_ratio_unforced",
    "forced_token_speedup",
)

STABLE_KEYS: dict[str, set[str]] = {
    "model": {
        "model",
    },
    # added with issue 46: every run's time, each section's (`<section>_section_s`), whether
    # it was a smoke run, and every figure whose spread cannot tell, with why
    "run": {
        "bench_s",
        "bench_quick",
        "cannot_tell",
    },
    # added with issue 37: every run records the machine's state (benchmarks/machine.py)
    "load": {
        "load_cpus",
        "load_method",
        "load_avg_before",
        "load_avg_after",
        "load_others_share",
        "load_others_share_max",
        "load_sections",
        "load_max_share",
        "load_waited_s",
        "load_warning",
    },
    "decode": {
        "decode_tps",
        "mlx_lm_decode_tps",
        "decode_ratio_vs_mlx_lm",
        "decode_tokens",
        "decode_runs",
        # added with issue 37: each ratio's spread over its rounds
        "decode_ratio_vs_mlx_lm_spread",
        # added with issue 46: whether each spread can tell
        "decode_ratio_vs_mlx_lm_can_tell",
        "decode_ratio_vs_mlx_lm_cannot_tell",
    },
    "constraints": {
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
        # added with issue 25: the ratio under a grammar that forces nothing after its
        # opening, and forced tokens compared on the same grammar
        "constrained_ratio_unforced",
        "unforced_free_tps",
        "unforced_constrained_tps",
        "unforced_constrained_tokens",
        "unforced_forced_tokens",
        "unforced_mask_overhead_ms",
        "stress_constrained_ratio_unforced",
        "stress_unforced_free_tps",
        "stress_unforced_constrained_tps",
        "stress_unforced_constrained_tokens",
        "stress_unforced_forced_tokens",
        "stress_unforced_mask_overhead_ms",
        "forced_unfed_tps",
        "forced_unfed_forward_passes",
        # added with issue 37: each ratio's spread over its rounds
        "constrained_ratio_spread",
        "constrained_ratio_serial_spread",
        "constrained_ratio_unforced_spread",
        "stress_constrained_ratio_spread",
        "stress_constrained_ratio_serial_spread",
        "stress_constrained_ratio_unforced_spread",
        "forced_token_speedup_spread",
        # added with issue 46: whether each spread can tell
        *(
            f"{ratio}{suffix}"
            for ratio in CONSTRAINT_RATIOS
            for suffix in ("_can_tell", "_cannot_tell")
        ),
    },
    "trie": {
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
    },
    "session": {
        "engine_session_cached_tokens",
        "engine_session_reusable_tokens",
        "engine_session_hit_rate",
    },
    "server": {
        "server_tps_ratio",
        "server_ttft_overhead_ms",
        "messages_tps_ratio",
        "messages_ttft_overhead_ms",
        "responses_tps_ratio",
        "responses_ttft_overhead_ms",
        # added with issue 35: recorded agent conversations that pass, over all of them
        "agent_replay_ok",
        # added with issue 37: each ratio's spread over its rounds
        "server_tps_ratio_spread",
        "server_ttft_overhead_spread_ms",
        "messages_tps_ratio_spread",
        "messages_ttft_overhead_spread_ms",
        "responses_tps_ratio_spread",
        "responses_ttft_overhead_spread_ms",
        # added with issue 46: whether each spread can tell
        "server_tps_ratio_can_tell",
        "server_tps_ratio_cannot_tell",
        "server_ttft_overhead_ms_can_tell",
        "server_ttft_overhead_ms_cannot_tell",
        "messages_tps_ratio_can_tell",
        "messages_tps_ratio_cannot_tell",
        "messages_ttft_overhead_ms_can_tell",
        "messages_ttft_overhead_ms_cannot_tell",
        "responses_tps_ratio_can_tell",
        "responses_tps_ratio_cannot_tell",
        "responses_ttft_overhead_ms_can_tell",
        "responses_ttft_overhead_ms_cannot_tell",
    },
    "coverage": {
        "coverage_schemas",
        "schema_compile_rate",
        "schema_compile_rate_strict",
        "first_mask_p50_ms",
        "first_mask_p99_ms",
        "coverage_sample",
        "coverage_max_tokens",
        "constrained_complete_rate",
        "constrained_valid_enforced_rate",
        "closed_to_fit_rate",
        "as_written_agreement",
        "as_written_p50_ms",
        "as_written_max_ms",
        # added with issue 38: replies flagged invalid as written, over the sample
        "flagged_invalid_rate",
        # added with issue 44: valid replies the model wrote to the end (no closing), and
        # replies steered toward their end
        "model_complete_rate",
        "steered_rate",
    },
    "library": {
        "import_baseline_peak_mb",
        "import_default_file_mb",
        "import_default_s",
        "import_default_peak_mb",
        "import_large_file_mb",
        "import_large_s",
        "import_large_peak_mb",
        "import_large_output_mb",
        *(
            f"requant_{t}_{k}"
            for t in (
                "q2_k",
                "q3_k",
                "q4_k",
                "q5_k",
                "q6_k",
                "q4_0",
                "q4_1",
                "q5_0",
                "q5_1",
                "q8_0",
            )
            for k in ("bits", "method", "max_err_steps", "rel_rms")
        ),
    },
    "distributed": {
        "dist_tps_ratio",
        "dist_comm_ms_per_token",
        # added with issue 37: each ratio's spread over its rounds
        "dist_tps_ratio_spread",
    },
    "batch": {
        "batch_speedup_4",
        "batch_speedup_8",
        "batch_constrained_ratio",
        "batch_vs_mlx_lm",
        "batch_tps_4",
        "batch_sequential_tps_4",
        "batch_tps_8",
        "batch_sequential_tps_8",
        "batch_constrained_tps_4",
        "batch_free_tps_4",
        "batch_mlx_lm_tps_4",
        "batch_forced_token_speedup",
        "batch_forced_steps",
        "batch_unforced_steps",
        "batch_tokens_per_reply",
        "batch_runs",
        # added with issue 37: each ratio's spread over its rounds
        "batch_speedup_4_spread",
        "batch_speedup_8_spread",
        "batch_constrained_ratio_spread",
        "batch_vs_mlx_lm_spread",
        "batch_forced_token_speedup_spread",
        # added with issue 46: whether each spread can tell
        *(
            f"batch_{ratio}{suffix}"
            for ratio in (
                "speedup_4",
                "speedup_8",
                "constrained_ratio",
                "vs_mlx_lm",
                "forced_token_speedup",
            )
            for suffix in ("_can_tell", "_cannot_tell")
        ),
    },
    "inspector": {
        "inspector_tps_ratio",
        "inspector_plain_tps",
        "inspector_recorded_tps",
        "inspector_constrained_tps_ratio",
        "inspector_constrained_plain_tps",
        "inspector_constrained_recorded_tps",
        "inspector_top_logprobs",
        "inspector_runs",
        # added with issue 37: each ratio's spread over its rounds
        "inspector_tps_ratio_spread",
        "inspector_constrained_tps_ratio_spread",
        # added with issue 46: whether each spread can tell
        "inspector_tps_ratio_can_tell",
        "inspector_tps_ratio_cannot_tell",
        "inspector_constrained_tps_ratio_can_tell",
        "inspector_constrained_tps_ratio_cannot_tell",
    },
    "speculative": {
        "spec_grounded_speedup",
        "spec_open_ratio",
        "spec_grounded_tps",
        "spec_grounded_plain_tps",
        "spec_open_tps",
        "spec_open_plain_tps",
        "spec_acceptance_rate_grounded",
        "spec_acceptance_rate_open",
        "spec_acceptance_rate_json_rewrite",
        "spec_acceptance_rate_extract",
        "spec_acceptance_rate_code_rename",
        "spec_acceptance_rate_chat_joke",
        "spec_acceptance_rate_chat_cook",
        "spec_acceptance_rate_chat_autumn",
        "spec_drafted_json_rewrite",
        "spec_drafted_extract",
        "spec_drafted_code_rename",
        "spec_drafted_chat_joke",
        "spec_drafted_chat_cook",
        "spec_drafted_chat_autumn",
        "spec_identical",
        "spec_tokens_per_reply",
        "spec_section_s",
        # added with issue 37: each ratio's spread over its rounds
        "spec_grounded_speedup_spread",
        "spec_open_ratio_spread",
        # added with issue 46: whether each spread can tell
        "spec_grounded_speedup_can_tell",
        "spec_grounded_speedup_cannot_tell",
        "spec_open_ratio_can_tell",
        "spec_open_ratio_cannot_tell",
        # and the rounds each group ran
        "spec_grounded_rounds",
        "spec_open_rounds",
    },
    "vision": {
        "vision_constrained_ratio",
        "vision_followup_ttft_over_first",
        "image_encode_ms",
        # added with issue 37: each ratio's spread over its rounds
        "vision_constrained_ratio_spread",
        # added with issue 39: each vision family on its tiny model, against mlx-vlm
        "vision_families_built",
        "vision_families_identical",
        *(
            f"vision_{family}_{figure}"
            for family in ("gemma3", "mistral3", "qwen2_5_vl", "qwen2_vl", "qwen3_vl", "smolvlm")
            for figure in ("constrained_ratio", "followup_ttft_over_first", "identical")
        ),
        # added with issue 39's second part: Phi-3.5-vision and Gemma 4
        *(
            f"vision_{family}_{figure}"
            for family in ("gemma4", "phi3_v")
            for figure in ("constrained_ratio", "followup_ttft_over_first", "identical")
        ),
        # added with issue 46: each ratio's spread, and whether it can tell
        "vision_followup_ttft_over_first_spread",
        "vision_side_s",
        *(
            f"vision_{figure}{suffix}"
            for figure in ("constrained_ratio", "followup_ttft_over_first")
            for suffix in ("_can_tell", "_cannot_tell")
        ),
        *(
            f"vision_{family}_{figure}{suffix}"
            for family in VISION_FAMILIES
            for figure in ("constrained_ratio", "followup_ttft_over_first")
            for suffix in ("_spread", "_can_tell", "_cannot_tell")
        ),
    },
    # added with issue 32: a step's time beyond its forward pass, Corral's beside mlx-lm's
    "overhead": {
        "forward_ms",
        "forward_4_ms",
        "step_overhead_ms",
        "step_overhead_4_ms",
        "step_overhead_constrained_ms",
        "step_overhead_4_constrained_ms",
        "mlx_lm_step_overhead_ms",
        "mlx_lm_step_overhead_4_ms",
        "step_overhead_spread_ms",
        "step_overhead_4_spread_ms",
        "step_overhead_constrained_spread_ms",
        "step_overhead_4_constrained_spread_ms",
        "mlx_lm_step_overhead_spread_ms",
        "mlx_lm_step_overhead_4_spread_ms",
        "overhead_runs",
        "overhead_tokens",
        # added with issue 46: whether each spread can tell
        "step_overhead_ms_can_tell",
        "step_overhead_ms_cannot_tell",
        "step_overhead_4_ms_can_tell",
        "step_overhead_4_ms_cannot_tell",
        "step_overhead_constrained_ms_can_tell",
        "step_overhead_constrained_ms_cannot_tell",
        "step_overhead_4_constrained_ms_can_tell",
        "step_overhead_4_constrained_ms_cannot_tell",
        "mlx_lm_step_overhead_ms_can_tell",
        "mlx_lm_step_overhead_ms_cannot_tell",
        "mlx_lm_step_overhead_4_ms_can_tell",
        "mlx_lm_step_overhead_4_ms_cannot_tell",
    },
    "reasoning": {
        "reasoning_constrained_valid_rate",
        "reasoning_constrained_runs",
        "thinking_budget_overrun_tokens",
        "reasoning_constrained_tps_ratio",
        "reasoning_constrained_answer_tps",
        "reasoning_free_answer_tps",
        "reasoning_tps_rounds",
        # added with issue 37: each ratio's spread over its rounds
        "reasoning_constrained_tps_ratio_spread",
        # added with issue 46: whether each spread can tell
        "reasoning_constrained_tps_ratio_can_tell",
        "reasoning_constrained_tps_ratio_cannot_tell",
        # and how long an answer and the shortest side of a round ran
        "reasoning_answer_tokens",
        "reasoning_side_s",
    },
    "agent": {
        "agent_prompt_tokens",
        "agent_turn9_prompt_tokens",
        "agent_turn_ttft_over_uncached",
        "agent_turn_ttft_s",
        "agent_uncached_ttft_s",
        "restart_load_s",
        "disk_restore_tokens",
        "disk_restore_over_prefill",
        "restart_ttft_over_warm",
        "restart_turn10_ttft_s",
        "agent_disk_hits",
        "agent_ttft_vs_mlx_lm",
        "kv8_memory_ratio",
        "kv4_memory_ratio",
        "kv8_tps_ratio",
        "kv8_greedy_agreement",
        "kv8_token_agreement",  # added with issue 46
        "kv8_first_difference_gap",
        "kv_prompts",
        # added with issue 37: each ratio's spread over its rounds
        "agent_turn_ttft_over_uncached_spread",
        "agent_ttft_vs_mlx_lm_spread",
        "kv8_tps_ratio_spread",
        # added with issue 37: a turn's time beyond prefilling its new tokens, beside mlx-lm's
        "agent_reuse_overhead_ms",
        "agent_reuse_overhead_spread_ms",
        "mlx_lm_agent_reuse_overhead_ms",
        "mlx_lm_agent_reuse_overhead_spread_ms",
        "agent_new_tokens_per_turn",
        "agent_prefill_tps",
        # added with issue 46: whether each spread can tell
        "agent_turn_ttft_over_uncached_can_tell",
        "agent_turn_ttft_over_uncached_cannot_tell",
        "agent_ttft_vs_mlx_lm_can_tell",
        "agent_ttft_vs_mlx_lm_cannot_tell",
        "kv8_tps_ratio_can_tell",
        "kv8_tps_ratio_cannot_tell",
        "agent_reuse_overhead_ms_can_tell",
        "agent_reuse_overhead_ms_cannot_tell",
        "mlx_lm_agent_reuse_overhead_ms_can_tell",
        "mlx_lm_agent_reuse_overhead_ms_cannot_tell",
        # a turn's overhead against an exact cache measured beside it
        "agent_reuse_overhead_exact_ms",
        "agent_reuse_overhead_exact_spread_ms",
        "mlx_lm_agent_reuse_overhead_exact_ms",
        "mlx_lm_agent_reuse_overhead_exact_spread_ms",
        "agent_exact_ttft_s",
        "agent_reuse_overhead_exact_ms_can_tell",
        "agent_reuse_overhead_exact_ms_cannot_tell",
        "mlx_lm_agent_reuse_overhead_exact_ms_can_tell",
        "mlx_lm_agent_reuse_overhead_exact_ms_cannot_tell",
    },
    # added with issue 41: extraction jobs and the Batch API
    "extract": {
        "extract_docs_per_min",
        "extract_batch_speedup",
        "extract_batch_speedup_8",  # added with issue 46
        "extract_valid_rate",
        "extract_resume_overhead_s",
        "batch_api_tps_ratio",
        "batch_api_tps_ratio_spread",
        # added with issue 46: whether its spread can tell
        "batch_api_tps_ratio_can_tell",
        "batch_api_tps_ratio_cannot_tell",
        # added with issue 44: rows Corral filled to fit, counted apart from valid ones
        "extract_filled_rate",
    },
    # added with issue 36: every chat template of the dataset in its family's dialect
    "families": {
        "families_templates",
        "families_native_rate",
        "families_native_misses",
        "families_valid_rate",
        "families_valid_misses",
        "families_roundtrip_rate",
        "families_roundtrip_misses",
        "families_thinking_rate",
        "families_thinking_misses",
        "families_render_rate",
        "families_render_misses",
    },
    # added with issue 45: embeddings, rerank and keep-alives through the server, and the
    # model pool (`model_swap_s`, `pool_cap_held`: benchmarks/serving_pool.py)
    "serving": {
        "embeddings_identical",
        "embeddings_families",
        "embeddings_max_abs_diff",
        "rerank_identical",
        "embeddings_tps_ratio",
        "embeddings_tps_ratio_spread",
        "embeddings_server_tps",
        "embeddings_library_tps",
        "embeddings_tokens",
        "embeddings_inputs",
        "embeddings_rounds",
        "keepalive_ok",
        "keepalive_runs",
        "keepalive_failures",
        "model_swap_s",
        "model_swap_s_spread",
        "model_swap_runs",
        "model_load_alone_s",
        "pool_cap_held",
        "pool_held_max_share",
        "pool_requests",
        "pool_swaps",
    },
}
