"""`python -m benchmarks` (also `python -m engine bench`): the engine's figures, each
measured side by side in one run.

Sections: `decode` (engine vs mlx-lm's stream_generate), `constraints` (constrained vs free
decoding), `trie` and `session` (the prefix cache), `server` (HTTP streaming with the
`openai` client against the Engine alone), `coverage` (real-world JSON schemas: compile
rates, time to first mask, complete and valid replies within the budget), `library` (GGUF
import time and peak memory, the error each GGUF type's conversion adds), `distributed` (the
model sharded over two loopback ranks against one process), `batch` (replies decoded side by
side against one after another and against mlx-lm's BatchGenerator), `inspector` (decoding with
each token's log-probabilities recorded against without), `speculative` (speculative decoding
against plain decoding on grounded and open-ended tasks), `reasoning` (a model that thinks
first: constrained answers after thinking valid, budgets kept, their speed against free
ones), `overhead` (a step's time beyond its forward pass, Corral's loop beside mlx-lm's),
`extract` (a folder of documents through an extraction job, and the Batch API against the
same requests online), `serving` (embeddings and rerank equal to mlx-embeddings' own and as
fast through the server, keep-alives holding a client through a long prefill).
Each returns a flat dict of figures; `--json` prints them merged into one object whose keys
stay stable (new figures add keys).

Every run also records the machine's state (`benchmarks/machine.py`): the load average
before and after, the CPU count, and the share of the CPUs other processes took while each
section ran (`load_*` keys). A section measured while that share was above
`--max-load-share` is named in `load_warning` and on stderr; `--wait-quiet [SECONDS]`
waits (at most that long) for a quiet machine before each section. Ratios come with their
spread over alternating rounds (`<ratio>_spread`, `benchmarks/rounds.py`) and whether that
spread can tell (`<ratio>_can_tell`, else `<ratio>_cannot_tell` says why; all of those in
`cannot_tell` and on stderr); each side of a round runs at least `--min-side-s` seconds.
Each section's time is `<section>_section_s`, the whole run's `bench_s`. `--quick` is a
smoke run: one round, few tokens, no least time a side.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, cast

from benchmarks.bench_models import resolve_bench_model
from benchmarks.machine import DEFAULT_MAX_OTHERS_SHARE, LoadRecord
from benchmarks.rounds import (
    MIN_SIDE_S,
    Timed,
    cannot_tell_reason,
    is_quick,
    min_side_s,
    paired_rounds,
    rounds_for,
)
from engine.engine import Engine
from engine.types import ChatRequest, SamplingSettings

Section = Callable[[Engine, argparse.Namespace], dict[str, Any]]

BENCH_PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."
DEFAULT_TOKENS = 64
DEFAULT_REPEATS = 3
QUICK_TOKENS = 16


def _engine_decode(engine: Engine, tokens: int) -> Timed:
    """The engine's decode: tokens after the first over the time since the first."""
    request = ChatRequest(
        [{"role": "user", "content": BENCH_PROMPT}],
        SamplingSettings(temperature=0.0, max_tokens=tokens),
    )
    result = engine.chat(request)
    if result.error:
        raise RuntimeError(result.error)
    stats = result.stats
    return Timed.from_rate(max(0, stats.generated_tokens - 1), stats.decode_tps)


def _mlx_lm_decode(loaded: Any, tokens: int) -> Timed:
    """Run mlx-lm's own loop on the same model, prompt and settings (on the engine thread)."""
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    from engine.prompt.chat import encode_chat

    prompt = encode_chat(loaded.tokenizer, [{"role": "user", "content": BENCH_PROMPT}])
    stamps = []
    for _ in stream_generate(
        loaded.model, loaded.tokenizer, prompt, max_tokens=tokens, sampler=make_sampler(temp=0.0)
    ):
        stamps.append(time.perf_counter())
    # Same measure as the engine: tokens after the first over the time since the first.
    # mlx-lm yields the final EOS-free token list; its last response may repeat the end.
    n = len(stamps)
    return Timed(n - 1, stamps[-1] - stamps[0]) if n > 1 else Timed(0, 0.0)


def bench_decode(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """Decode tokens/s of the engine and of mlx-lm, alternating runs, medians compared."""
    _engine_decode(engine, 8)  # warm-up: compile kernels, fill allocator caches
    rounds = rounds_for(args, 3)  # runs of seconds each on a real model: 3 rounds tell
    pairs = paired_rounds(
        lambda: _engine_decode(engine, args.tokens),
        lambda: engine.run(lambda lm: _mlx_lm_decode(lm, args.tokens)).result(),
        rounds,
        min_side_s(args),
    )
    ours, theirs = pairs.rates("a"), pairs.rates("b")
    decode, reference = statistics.median(ours), statistics.median(theirs)
    told = pairs.figures("decode_ratio_vs_mlx_lm")
    return {
        "decode_tps": round(decode, 2),
        "mlx_lm_decode_tps": round(reference, 2),
        # the medians' ratio, as always (the median of the rounds' own ratios, which the
        # spread is over, may differ from it a little)
        "decode_ratio_vs_mlx_lm": round(decode / reference, 3) if reference else None,
        **{k: v for k, v in told.items() if k != "decode_ratio_vs_mlx_lm"},
        # the tokens a run decoded, the fewest of any (a side's runs are alike): its timed
        # tokens are all but the first
        "decode_tokens": min(round(t.work / t.runs) for t in (*pairs.a, *pairs.b)) + 1,
        "decode_runs": rounds,
    }


def _wait_quiet(load: LoadRecord, limit_s: float | None) -> None:
    if limit_s is None:
        return
    if not load.wait_quiet(limit_s):
        print(
            f"warning: the machine did not go quiet within {limit_s:.0f} s; measuring anyway",
            file=sys.stderr,
            flush=True,
        )


def _lazy(module: str, function: str) -> Section:
    """A section that takes (engine, args) as they are, its module imported when it runs
    (some import what a run of other sections does not need: uvicorn, mlx.launch, gguf)."""

    def section(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
        run = getattr(importlib.import_module(module), function)
        return cast(dict[str, Any], run(engine, args))

    return section


def _section_trie(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.trie import run_trie_bench

    # One uncached run at the last turn, one repeat: a CPU prefills ~100x slower than a Mac.
    return engine.run(
        lambda lm: run_trie_bench(lm.model, lm.tokenizer, uncached_every_turn=False, reps=1)
    ).result()


def _section_session(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.session import run_session_hit_rate

    figures = run_session_hit_rate(engine)
    figures.pop("engine_session_steps")
    return figures


def _section_coverage(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.coverage import run_coverage_bench

    # a smoke run's replies stop sooner (the full run's 200 tokens let most schemas close)
    return run_coverage_bench(engine, args, max_tokens=48 if is_quick(args) else 200)


SECTIONS: dict[str, Section] = {
    "decode": bench_decode,
    "constraints": _lazy("benchmarks.constraints", "run_constraint_bench"),
    "trie": _section_trie,
    "session": _section_session,
    "server": _lazy("benchmarks.server", "run_server_bench"),
    "coverage": _section_coverage,
    "library": _lazy("benchmarks.library", "run_library_bench"),
    "distributed": _lazy("benchmarks.distributed", "run_distributed_bench"),
    "batch": _lazy("benchmarks.batch", "run_batch_bench"),
    "inspector": _lazy("benchmarks.inspector", "run_inspector_bench"),
    "speculative": _lazy("benchmarks.speculative", "run_speculative_bench"),
    "vision": _lazy("benchmarks.vision", "run_vision_bench"),
    "overhead": _lazy("benchmarks.overhead", "run_overhead_bench"),
    "reasoning": _lazy("benchmarks.reasoning", "run_reasoning_bench"),
    "agent": _lazy("benchmarks.agent", "run_agent_bench"),
    "extract": _lazy("benchmarks.extract", "run_extract_bench"),
    "families": _lazy("benchmarks.families", "run_families_bench"),
    "serving": _lazy("benchmarks.serving", "run_serving_bench"),
}


def build_parser(prog: str = "python -m benchmarks") -> argparse.ArgumentParser:
    """The benchmark's options (shared by `python -m benchmarks` and `python -m engine bench`)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Measure the engine against mlx-lm and itself, side by side."
    )
    parser.add_argument(
        "--model",
        default="default",
        help="model spec (default: the default); gemma3-270m is Gemma 3 270M from the bench "
        "extra's package (262k-token vocabulary), assembled and imported once",
    )
    parser.add_argument(
        "--tokens",
        type=int,
        default=None,
        help=f"tokens to decode per run (default {DEFAULT_TOKENS}; {QUICK_TOKENS} with --quick)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="rounds of every comparison (default: 3, or more where a section's short "
        "sides need them; 1 with --quick)",
    )
    parser.add_argument(
        "--min-side-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run each side of a round again until it has taken at least SECONDS "
        f"(default {MIN_SIDE_S:g}; 0 with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: one round, few tokens, no least time a side (its ratios say "
        "they cannot tell)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(SECTIONS),
        help="run only this section (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--max-load-share",
        type=float,
        default=DEFAULT_MAX_OTHERS_SHARE,
        metavar="SHARE",
        help="flag a section (load_warning) when other processes took more than this share "
        f"of the CPUs while it ran (default {DEFAULT_MAX_OTHERS_SHARE})",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        nargs="?",
        const=300.0,
        default=None,
        metavar="SECONDS",
        help="before each section, wait (at most SECONDS, default 300) until other "
        "processes take no more than --max-load-share of the CPUs",
    )
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks") -> int:
    """Parse `argv` and run the benchmark."""
    return run_bench(build_parser(prog).parse_args(argv))


def resolve_options(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the lengths the user left out: `--quick`'s, or the full run's. Sections read
    `tokens` and `repeats` as numbers; `repeats_given` tells `rounds_for` whether a
    section may take the rounds it needs instead."""
    quick = bool(getattr(args, "quick", False))
    if getattr(args, "tokens", None) is None:
        args.tokens = QUICK_TOKENS if quick else DEFAULT_TOKENS
    args.repeats_given = getattr(args, "repeats", None) is not None
    if not args.repeats_given:
        args.repeats = 1 if quick else DEFAULT_REPEATS
    if getattr(args, "min_side_s", None) is None:
        args.min_side_s = 0.0 if quick else MIN_SIDE_S
    args.quick = quick
    return args


def verdicts_of(section: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The `_can_tell` / `_cannot_tell` keys a section left out, for each ratio it gave a
    spread (`<ratio>_spread`) without saying whether that spread can tell (the rounds it
    ran are its own: the reason names the spread only)."""
    added: dict[str, Any] = {}
    for key, value in section.items():
        base = key.removesuffix("_spread")
        if base == key or base not in section or f"{base}_can_tell" in section:
            continue
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            continue
        one = args.quick or (args.repeats_given and args.repeats == 1)
        rounds = 1 if one and value == 0 else None  # a spread of 0: one round, surely
        reason = cannot_tell_reason(value, rounds)
        added[f"{base}_can_tell"] = reason is None
        added[f"{base}_cannot_tell"] = reason
    return added


def cannot_tell_of(section: dict[str, Any]) -> dict[str, str]:
    """Each figure of a section that cannot tell, with why."""
    return {
        key.removesuffix("_cannot_tell"): value
        for key, value in section.items()
        if key.endswith("_cannot_tell") and value
    }


def run_bench(args: argparse.Namespace) -> int:
    """Run the chosen sections and print their figures (or one JSON object)."""
    args = resolve_options(args)
    chosen = args.only or list(SECTIONS)
    # Speculation off: each section measures what its keys always measured (the decode loop
    # itself); the `speculative` section turns it on for its own runs.
    engine = Engine(speculative=False)
    figures: dict[str, Any] = {}
    cannot_tell: dict[str, str] = {}
    load = LoadRecord(getattr(args, "max_load_share", DEFAULT_MAX_OTHERS_SHARE))
    bench_started = time.perf_counter()
    try:
        args.model = resolve_bench_model(args.model)  # sections that load it again read this
        info = engine.load_model(args.model).result()
        figures["model"] = info.name
        for name in chosen:
            if not args.json:
                print(f"== {name}", file=sys.stderr, flush=True)
            _wait_quiet(load, getattr(args, "wait_quiet", None))
            load.begin(name)
            started = time.perf_counter()
            section = SECTIONS[name](engine, args)
            section[f"{name}_section_s"] = round(time.perf_counter() - started, 1)
            taken = load.end(name)
            if load.loaded(taken):
                print(
                    f"warning: {name} was measured while other processes took "
                    f"{taken.share:.0%} of the {load.cpus} CPUs (over {load.max_share:.0%}): "
                    "its figures are not comparable; run it again alone",
                    file=sys.stderr,
                    flush=True,
                )
            section.update(verdicts_of(section, args))
            for key, reason in cannot_tell_of(section).items():
                if load.loaded(taken):
                    reason += f"; measured while other processes took {taken.share or 0:.0%}"
                    section[f"{key}_cannot_tell"] = reason
                cannot_tell[key] = reason
                print(f"cannot tell: {key}: {reason}", file=sys.stderr, flush=True)
            figures.update(section)
            if not args.json:
                for key, value in section.items():
                    print(f"{key:40s} {value}")
    finally:
        engine.close()
    figures["bench_s"] = round(time.perf_counter() - bench_started, 1)
    figures["bench_quick"] = args.quick
    figures["cannot_tell"] = cannot_tell
    figures.update(load.figures())
    if not args.json:
        for key in ("bench_s", "bench_quick", "cannot_tell"):
            print(f"{key:40s} {figures[key]}")
        for key, value in load.figures().items():
            print(f"{key:40s} {value}")
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0
