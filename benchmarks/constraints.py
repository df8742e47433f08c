"""Constrained vs free decoding, measured side by side (the `constraints` bench section).

Every comparison runs the same model, prompt and greedy sampling, and the same number of
tokens: a warm-up constrained run fixes the count and the free runs stop there (ignoring
end tokens). Runs alternate between loops; tokens/s are medians over the rounds and ratios
the median of each round's ratio (runs side by side see the same machine load).
Configurations: the loaded model with a JSON schema (overlapped and serial mask), the same
on the tiny 2-layer model with the real vocabulary (a forward pass of a few ms, as on a
fast Mac), the same on a tiny model with Gemma 3's 262,144-token vocabulary
(`vocab262k_stress_` keys: what masks cost where the vocabulary is five times larger), and
a key-heavy schema whose forced tokens are fed in one pass. Tokens/s count
from the first sampled token: forced tokens before it come with the first token's latency.

Forced tokens count as output, so `constrained_ratio` can hide what masks cost; the
`_unforced` figures compare the same loops under a schema whose only field is a free
string of at least 2,000 characters: after its opening (`{"text` forced, `":"` sampled)
the grammar forces nothing, and `unforced_forced_tokens` counts what it forced after the
first sampled token (0 is the point: checked, not assumed). `forced_token_speedup` is the
same-grammar comparison: the key-heavy schema with its forced tokens fed, over the same
schema with every token sampled from its own forward pass (`forced_unfed_tps`);
`forced_free_tps` is free decoding on that prompt (a different reply, for reference).
Also the path of a dropped grammar file to the first mask of a reply: checked and compiled
once for the model's tokenizer and reused, against compiling it again for each request.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.limits import measure_depth_check
from benchmarks.rounds import ratio_figures, round_ratios
from engine.constraints.row import RowConstraint
from engine.constraints.sources import constraint_from_file, json_schema_constraint
from engine.constraints.tokenizer import ll_tokenizer
from engine.constraints.validate import validate_constraint
from engine.prompt.chat import encode_chat
from engine.runtime.batch import decode_alone
from engine.runtime.prefill import prefill
from engine.runtime.sampling import RowSampler, build_processors, end_token_ids
from engine.types import ConstraintSpec, GenerationStats, SamplingSettings

# The example a new user drops first (resources/grammars/recipe.json).
DROPPED_GRAMMAR = Path(__file__).resolve().parents[1] / "resources" / "grammars" / "recipe.json"
ANSWER_PROMPT = "Describe the city of Paris. Reply in JSON with a title and a long summary."
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "summary": {"type": "string"}},
    "required": ["title", "summary"],
    "additionalProperties": False,
}
RECORD_PROMPT = "Create a JSON record for a fictional library member."
RECORD_SCHEMA = {
    "type": "object",
    "properties": {
        "member_first_name": {"type": "string", "maxLength": 12},
        "member_last_name": {"type": "string", "maxLength": 12},
        "member_age_in_years": {"type": "integer", "minimum": 0, "maximum": 120},
        "is_active_library_member": {"type": "boolean"},
        "membership_level": {"enum": ["bronze", "silver", "gold"]},
        "home_branch_location": {"type": "string", "maxLength": 16},
        "number_of_books_borrowed": {"type": "integer", "minimum": 0, "maximum": 999},
        "has_overdue_books": {"type": "boolean"},
        "preferred_reading_genre": {"enum": ["fiction", "history", "science", "poetry"]},
    },
    "required": [
        "member_first_name",
        "member_last_name",
        "member_age_in_years",
        "is_active_library_member",
        "membership_level",
        "home_branch_location",
        "number_of_books_borrowed",
        "has_overdue_books",
        "preferred_reading_genre",
    ],
    "additionalProperties": False,
}
# A grammar that forces no token after its opening: one free string, long enough that it
# never closes within the bench's tokens (the tight rewrite leaves a declared minLength).
UNFORCED_PROMPT = "Describe the city of Paris in detail. Reply in JSON with one field, text."
UNFORCED_LOOPS = ("free", "overlapped")
UNFORCED_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 2000}},
    "required": ["text"],
    "additionalProperties": False,
}
GREEDY = SamplingSettings(temperature=0.0)
# The stress model with Gemma 3's 262,144-token vocabulary (benchmarks/bench_models.py).
VOCAB262K_STRESS = "vocab262k_stress_"


@dataclass
class _Run:
    tokens: int
    tps: float
    stats: GenerationStats | None
    lead: int = 0  # tokens forced before the first sampled one (not timed)


def run_constraint_bench(engine: Any, args: Any = None, **options: Any) -> dict[str, Any]:
    """The constraint figures for the model loaded in `engine` (an engine.engine.Engine).

    `args` may carry `tokens` and `repeats` (the bench command's options); keyword options
    override them (see `measure_constraints`). Runs on the engine thread.
    """
    for name in ("tokens", "repeats"):
        if args is not None and getattr(args, name, None) and name not in options:
            options[name] = getattr(args, name)

    def measure(loaded: Any) -> dict[str, Any]:
        folder = Path(loaded.info.path)
        if (folder / "tokenizer.json").is_file():  # the stress model reads this vocabulary
            options.setdefault("stress_tokenizer", folder)
        return measure_constraints(loaded.model, loaded.tokenizer, **options)

    figures: dict[str, Any] = engine.run(measure).result()
    return figures


def measure_constraints(
    model: Any,
    tokenizer: Any,
    *,
    tokens: int = 48,
    repeats: int = 3,
    stress: bool = True,
    stress_tokens: int = 160,
    stress_repeats: int = 7,
    vocab262k: bool = True,
    stress_tokenizer: Path | None = None,
) -> dict[str, Any]:
    """All constraint figures, on the calling thread (which must own `model`). `stress`:
    the stress model's (`stress_` keys), with the tokenizer in `stress_tokenizer` (the
    loaded model's folder; the default model's if None); `vocab262k`: the one with Gemma
    3's 262k vocabulary (`vocab262k_stress_` keys), unless the stress model had it."""
    answer = json_schema_constraint(ANSWER_SCHEMA, "answer schema")
    record = json_schema_constraint(RECORD_SCHEMA, "key-heavy record schema")
    unforced = json_schema_constraint(UNFORCED_SCHEMA, "free-string schema")
    out: dict[str, Any] = {}

    main = compare_loops(model, tokenizer, answer, ANSWER_PROMPT, tokens, repeats)
    out.update(_ratios("", main))
    free_text = compare_loops(
        model, tokenizer, unforced, UNFORCED_PROMPT, tokens, repeats, loops=UNFORCED_LOOPS
    )
    out.update(_unforced_ratios("", free_text))
    forced = compare_loops(
        model,
        tokenizer,
        record,
        RECORD_PROMPT,
        tokens,
        repeats,
        loops=("free", "overlapped", "unfed"),
    )
    out["forced_free_tps"] = _median_tps(forced["free"])
    out["forced_tps"] = _median_tps(forced["overlapped"])
    out["forced_unfed_tps"] = _median_tps(forced["unfed"])
    out.update(_paired("forced_token_speedup", forced["overlapped"], forced["unfed"]))
    fstats = _typical_stats(forced["overlapped"])
    out["forced_tokens"] = f"{fstats.forced_tokens} of {forced['overlapped'][0].tokens}"
    out["forced_forward_passes"] = fstats.forward_passes
    out["forced_unfed_forward_passes"] = _typical_stats(forced["unfed"]).forward_passes
    out.update(measure_drop_to_first_mask(tokenizer, repeats=max(3, repeats)))
    out.update(measure_depth_check(tokenizer, repeats=max(3, repeats)))

    vocab = stress_tokenizer or "49k"
    if stress:
        out.update(stress_model_figures(vocab, "stress_", stress_tokens, stress_repeats))
    if vocab262k and stress and _is_262k(vocab):
        out[f"{VOCAB262K_STRESS}skipped"] = "the loaded model's vocabulary is 262k: see stress_"
    elif vocab262k:
        out.update(stress_model_figures("262k", VOCAB262K_STRESS, stress_tokens, stress_repeats))
    return out


def _is_262k(vocab: str | Path) -> bool:
    from benchmarks.bench_models import GEMMA_VOCAB, tokenizer_vocab

    return isinstance(vocab, Path) and tokenizer_vocab(vocab) == GEMMA_VOCAB


def stress_model_figures(
    vocab: str | Path, prefix: str, tokens: int, repeats: int
) -> dict[str, Any]:
    """The constrained-vs-free figures on the stress model with the tokenizer of `vocab`
    ("49k", "262k" or a model folder: `benchmarks.bench_models.build_stress_model`), built
    and loaded here (on the calling thread, which then owns it), keys prefixed by
    `prefix`; without Gemma's package, for "262k", only `<prefix>skipped` saying why."""
    import mlx_lm

    from benchmarks.bench_models import BenchModelMissing, build_stress_model

    try:
        with tempfile.TemporaryDirectory(prefix="corral-tiny-") as folder:
            build_stress_model(folder, vocab)
            tiny, tiny_tok = mlx_lm.load(folder)[:2]
    except BenchModelMissing as exc:
        return {f"{prefix}skipped": str(exc)}
    return stress_figures(tiny, tiny_tok, prefix, tokens, repeats)


def stress_figures(
    model: Any, tokenizer: Any, prefix: str, tokens: int, repeats: int
) -> dict[str, Any]:
    """The answer schema's and the free-string schema's constrained-vs-free figures on a
    model (the calling thread owns it), keys prefixed by `prefix`."""
    answer = json_schema_constraint(ANSWER_SCHEMA, "answer schema")
    unforced = json_schema_constraint(UNFORCED_SCHEMA, "free-string schema")
    runs = compare_loops(model, tokenizer, answer, ANSWER_PROMPT, tokens, repeats)
    out = _ratios(prefix, runs)
    free_text = compare_loops(
        model, tokenizer, unforced, UNFORCED_PROMPT, tokens, repeats, loops=UNFORCED_LOOPS
    )
    out.update(_unforced_ratios(prefix, free_text))
    return out


def _first_mask_ms(tokenizer: Any, spec: ConstraintSpec, ends: set[int]) -> float:
    """ms from a request's constraint being built to its first mask."""
    constraint = RowConstraint(tokenizer, spec, ends)
    assert not constraint.finished  # waits for the compile job: the first mask is ready
    return constraint.compile_ms


def measure_drop_to_first_mask(
    tokenizer: Any, path: Path = DROPPED_GRAMMAR, repeats: int = 3
) -> dict[str, Any]:
    """A grammar file dropped on the window until the first mask of the first reply and of
    a later one, the way Corral does it (checked once with the model's tokenizer, the
    compiled grammar reused) and compiling twice (checked without the model's tokenizer,
    converted and compiled again by each request). Medians over `repeats`, in ms."""
    ends = end_token_ids(tokenizer)
    lltok = ll_tokenizer(tokenizer, ends)  # built once per model, at load
    once: list[float] = []
    twice: list[float] = []
    reuse: list[float] = []
    recompile: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        report = validate_constraint(constraint_from_file(path), lltok)
        checked_ms = (time.perf_counter() - started) * 1e3
        assert report.ok and report.spec.compiled is not None, report.summary()
        once.append(checked_ms + _first_mask_ms(tokenizer, report.spec, ends))
        reuse.append(_first_mask_ms(tokenizer, report.spec, ends))

        started = time.perf_counter()
        bare = validate_constraint(constraint_from_file(path)).spec
        checked_ms = (time.perf_counter() - started) * 1e3
        bare = replace(bare, compiled=None)  # what a request got before: the spec alone
        twice.append(checked_ms + _first_mask_ms(tokenizer, bare, ends))
        recompile.append(_first_mask_ms(tokenizer, bare, ends))
    return {
        "drop_to_first_mask_ms": round(statistics.median(once), 2),
        "drop_to_first_mask_two_compiles_ms": round(statistics.median(twice), 2),
        "first_mask_reused_grammar_ms": round(statistics.median(reuse), 3),
        "first_mask_recompiled_grammar_ms": round(statistics.median(recompile), 2),
    }


def compare_loops(
    model: Any,
    tokenizer: Any,
    constraint: ConstraintSpec,
    prompt: str,
    max_tokens: int,
    repeats: int,
    loops: tuple[str, ...] = ("free", "overlapped", "serial"),
) -> dict[str, list[_Run]]:
    """Each loop's runs, `repeats` rounds of one run per loop (rotating the order), all of
    the length the constrained warm-up run reached. Loops: "free" (no constraint),
    "overlapped" (masks on the pool beside the forward pass), "serial" (masks on the
    loop's thread) and "unfed" (overlapped, forced tokens sampled one pass each)."""
    tokens = encode_chat(tokenizer, [{"role": "user", "content": prompt}])
    warm = _run(model, tokenizer, tokens, "overlapped", constraint, max_tokens)
    count = warm.tokens
    _run(model, tokenizer, tokens, "free", constraint, count)
    results: dict[str, list[_Run]] = {loop: [] for loop in loops}
    for r in range(repeats):
        order = loops[r % len(loops) :] + loops[: r % len(loops)]
        for loop in order:
            results[loop].append(_run(model, tokenizer, tokens, loop, constraint, count))
    return results


def _run(
    model: Any,
    tokenizer: Any,
    prompt: list[int],
    loop: str,
    constraint: ConstraintSpec,
    max_tokens: int,
) -> _Run:
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    fed: list[int] = []
    prefill(model, cache, prompt[:-1], fed, cancel=threading.Event())
    ends = end_token_ids(tokenizer)
    runtime = None
    if loop != "free":
        # With the closing machinery tracking the reply as requests do, but a budget too far
        # to trigger it (closing tokens come without forward passes and would flatter the
        # figures): what it costs on the steps where it is not close to triggering.
        runtime = RowConstraint(
            tokenizer,
            constraint,
            ends,
            forced_tokens=loop != "unfed",
            on_pool=loop != "serial",
            max_tokens=max_tokens + 1000,
            close_loops=False,
        )
    tokens = decode_alone(
        model,
        cache,
        prompt[-1:],
        fed,
        sampler=RowSampler(GREEDY),
        processors=build_processors(GREEDY),
        constraint=runtime,
        overlap=loop != "serial",
    )
    stamps: list[float] = []
    try:
        for token in tokens:
            stamps.append(time.perf_counter())
            if len(stamps) >= max_tokens or (runtime is not None and token in ends):
                break
    finally:
        tokens.close()
    # forced tokens before the first sampled one arrive before any decoding: skip them
    lead = runtime.forced_at_start if runtime is not None else 0
    stats = None
    if runtime is not None:
        stats = GenerationStats()
        runtime.fill_stats(stats)
    timed = stamps[lead:]
    n = len(timed)
    tps = (n - 1) / (timed[-1] - timed[0]) if n > 1 and timed[-1] > timed[0] else 0.0
    return _Run(len(stamps), tps, stats, lead)


def _median_tps(runs: list[_Run]) -> float:
    return round(statistics.median(run.tps for run in runs), 2)


def _paired(key: str, runs: list[_Run], base: list[_Run]) -> dict[str, float | None]:
    """`key`: the median over rounds of tps / base tps (runs side by side see the same
    machine load); `key_spread`: those ratios' spread."""
    pairs = zip((a.tps for a in runs), (b.tps for b in base), strict=True)
    return ratio_figures(key, round_ratios(pairs))


def _typical_stats(runs: list[_Run]) -> GenerationStats:
    median = statistics.median(run.tps for run in runs)
    stats = min(runs, key=lambda run: abs(run.tps - median)).stats
    assert stats is not None
    return stats


def _ratios(prefix: str, runs: dict[str, list[_Run]]) -> dict[str, Any]:
    free, over, serial = runs["free"], runs["overlapped"], runs["serial"]
    stats = _typical_stats(over)
    return {
        f"{prefix}free_tps": _median_tps(free),
        f"{prefix}constrained_tps": _median_tps(over),
        f"{prefix}constrained_serial_tps": _median_tps(serial),
        **_paired(f"{prefix}constrained_ratio", over, free),
        **_paired(f"{prefix}constrained_ratio_serial", serial, free),
        f"{prefix}constrained_tokens": over[0].tokens,
        f"{prefix}grammar_compile_ms": round(stats.grammar_compile_ms, 2),
        f"{prefix}mask_mean_ms": round(stats.mask_mean_ms, 3),
        f"{prefix}mask_p99_ms": round(stats.mask_p99_ms, 3),
        f"{prefix}mask_overhead_ms": round(stats.mask_overhead_ms, 2),
    }


def _unforced_ratios(prefix: str, runs: dict[str, list[_Run]]) -> dict[str, Any]:
    """The free-string schema's figures: tokens/s constrained over free, with what the
    grammar forced after the first sampled token (the most over the runs: 0 makes the
    ratio a measure of masks alone)."""
    free, over = runs["free"], runs["overlapped"]
    after_start = max((run.stats.forced_tokens - run.lead) for run in over if run.stats is not None)
    stats = _typical_stats(over)
    return {
        f"{prefix}unforced_free_tps": _median_tps(free),
        f"{prefix}unforced_constrained_tps": _median_tps(over),
        **_paired(f"{prefix}constrained_ratio_unforced", over, free),
        f"{prefix}unforced_constrained_tokens": over[0].tokens,
        f"{prefix}unforced_forced_tokens": after_start,
        f"{prefix}unforced_mask_overhead_ms": round(stats.mask_overhead_ms, 2),
    }
