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
fast through the server, keep-alives holding a client through a long prefill, and the model
pool: a swap's time to first token, and whether the pool kept under its memory limit
serving three models in turn).
Each returns a flat dict of figures; `--json` prints them merged into one object whose keys
stay stable (new figures add keys).

Every run also records the machine's state (`benchmarks/machine.py`): the load average
before and after, the CPU count, and the share of the CPUs other processes took while each
section ran (`load_*` keys). A section measured while that share was above
`--max-load-share` is named in `load_warning` and on stderr; `--wait-quiet [SECONDS]`
waits (at most that long) for a quiet machine before each section. Ratios come with their
spread over alternating rounds (`<ratio>_spread`, `benchmarks/rounds.py`).
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
from benchmarks.rounds import alternate, spread
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
    for r in range(args.repeats):
        for engine_side in alternate(r):  # the engine first in even rounds, mlx-lm in odd
            if engine_side:
                tps, n = _engine_decode_tps(engine, args.tokens)
                ours.append(tps)
            else:
                tps, n = engine.run(lambda lm: _mlx_lm_decode_tps(lm, args.tokens)).result()
                theirs.append(tps)
            counts.append(n)
    decode, reference = statistics.median(ours), statistics.median(theirs)
    rounds = [a / b for a, b in zip(ours, theirs, strict=True) if b]
    return {
        "decode_tps": round(decode, 2),
        "mlx_lm_decode_tps": round(reference, 2),
        "decode_ratio_vs_mlx_lm": round(decode / reference, 3) if reference else None,
        # the median of the rounds' own ratios may differ a little from the medians' ratio
        "decode_ratio_vs_mlx_lm_spread": spread(rounds),
        "decode_tokens": min(counts),
        "decode_runs": args.repeats,
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
    parser.add_argument("--tokens", type=int, default=64, help="tokens to decode per run")
    parser.add_argument("--repeats", type=int, default=3)
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


def run_bench(args: argparse.Namespace) -> int:
    """Run the chosen sections and print their figures (or one JSON object)."""
    chosen = args.only or list(SECTIONS)
    # Speculation off: each section measures what its keys always measured (the decode loop
    # itself); the `speculative` section turns it on for its own runs.
    engine = Engine(speculative=False)
    figures: dict[str, Any] = {}
    load = LoadRecord(getattr(args, "max_load_share", DEFAULT_MAX_OTHERS_SHARE))
    try:
        args.model = resolve_bench_model(args.model)  # sections that load it again read this
        info = engine.load_model(args.model).result()
        figures["model"] = info.name
        for name in chosen:
            if not args.json:
                print(f"== {name}", file=sys.stderr, flush=True)
            _wait_quiet(load, getattr(args, "wait_quiet", None))
            load.begin(name)
            section = SECTIONS[name](engine, args)
            taken = load.end(name)
            if load.loaded(taken):
                print(
                    f"warning: {name} was measured while other processes took "
                    f"{taken.share:.0%} of the {load.cpus} CPUs (over {load.max_share:.0%}): "
                    "its figures are not comparable; run it again alone",
                    file=sys.stderr,
                    flush=True,
                )
            figures.update(section)
            if not args.json:
                for key, value in section.items():
                    print(f"{key:40s} {value}")
    finally:
        engine.close()
    figures.update(load.figures())
    if not args.json:
        for key, value in load.figures().items():
            print(f"{key:40s} {value}")
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0
