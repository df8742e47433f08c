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
ones), `overhead` (a step's time beyond its forward pass, Corral's loop beside mlx-lm's).
Each returns a flat dict of figures; `--json` prints them merged into one object whose keys
stay stable (new figures add keys).
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

from engine.engine import Engine
from engine.types import ChatRequest, SamplingSettings

Section = Callable[[Engine, argparse.Namespace], dict[str, Any]]

BENCH_PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."


def _engine_decode_tps(engine: Engine, tokens: int) -> tuple[float, int]:
    request = ChatRequest(
        [{"role": "user", "content": BENCH_PROMPT}],
        SamplingSettings(temperature=0.0, max_tokens=tokens),
    )
    result = engine.chat(request)
    if result.error:
        raise RuntimeError(result.error)
    return result.stats.decode_tps, result.stats.generated_tokens


def _mlx_lm_decode_tps(loaded: Any, tokens: int) -> tuple[float, int]:
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
    return ((n - 1) / (stamps[-1] - stamps[0]) if n > 1 else 0.0), n


def bench_decode(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """Decode tokens/s of the engine and of mlx-lm, alternating runs, medians compared."""
    ours, theirs, counts = [], [], []
    _engine_decode_tps(engine, 8)  # warm-up: compile kernels, fill allocator caches
    for _ in range(args.repeats):
        tps, n = _engine_decode_tps(engine, args.tokens)
        ours.append(tps)
        counts.append(n)
        tps, n = engine.run(lambda lm: _mlx_lm_decode_tps(lm, args.tokens)).result()
        theirs.append(tps)
        counts.append(n)
    decode, reference = statistics.median(ours), statistics.median(theirs)
    return {
        "decode_tps": round(decode, 2),
        "mlx_lm_decode_tps": round(reference, 2),
        "decode_ratio_vs_mlx_lm": round(decode / reference, 3) if reference else None,
        "decode_tokens": min(counts),
        "decode_runs": args.repeats,
    }


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


SECTIONS: dict[str, Section] = {
    "decode": bench_decode,
    "constraints": _lazy("benchmarks.constraints", "run_constraint_bench"),
    "trie": _section_trie,
    "session": _section_session,
    "server": _lazy("benchmarks.server", "run_server_bench"),
    "coverage": _lazy("benchmarks.coverage", "run_coverage_bench"),
    "library": _lazy("benchmarks.library", "run_library_bench"),
    "distributed": _lazy("benchmarks.distributed", "run_distributed_bench"),
    "batch": _lazy("benchmarks.batch", "run_batch_bench"),
    "inspector": _lazy("benchmarks.inspector", "run_inspector_bench"),
    "speculative": _lazy("benchmarks.speculative", "run_speculative_bench"),
    "vision": _lazy("benchmarks.vision", "run_vision_bench"),
    "overhead": _lazy("benchmarks.overhead", "run_overhead_bench"),
    "reasoning": _lazy("benchmarks.reasoning", "run_reasoning_bench"),
    "agent": _lazy("benchmarks.agent", "run_agent_bench"),
    "families": _lazy("benchmarks.families", "run_families_bench"),
}


def build_parser(prog: str = "python -m benchmarks") -> argparse.ArgumentParser:
    """The benchmark's options (shared by `python -m benchmarks` and `python -m engine bench`)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Measure the engine against mlx-lm and itself, side by side."
    )
    parser.add_argument("--model", default="default", help="model spec (default: the default)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens to decode per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--only",
        action="append",
        choices=list(SECTIONS),
        help="run only this section (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks") -> int:
    """Parse `argv` and run the benchmark."""
    return run_bench(build_parser(prog).parse_args(argv))


def run_bench(args: argparse.Namespace) -> int:
    """Run the chosen sections and print their figures (or one JSON object)."""
    chosen = args.only or list(SECTIONS)
    # Speculation off: each section measures what its keys always measured (the decode loop
    # itself); the `speculative` section turns it on for its own runs.
    engine = Engine(speculative=False)
    figures: dict[str, Any] = {}
    try:
        info = engine.load_model(args.model).result()
        figures["model"] = info.name
        for name in chosen:
            if not args.json:
                print(f"== {name}", file=sys.stderr, flush=True)
            section = SECTIONS[name](engine, args)
            figures.update(section)
            if not args.json:
                for key, value in section.items():
                    print(f"{key:40s} {value}")
    finally:
        engine.close()
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0
