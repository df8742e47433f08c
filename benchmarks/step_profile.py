"""Where a decode step's time goes outside the forward pass (`python -m benchmarks.step_profile`).

Runs real requests through an Engine (scheduler, replies, events: the path users see) and
times, on the engine thread, every part of `DecodeBatch.step` (`engine.runtime.batch`)
exclusively (a part called inside another counts once, for itself), and counts the
host-device synchronisations a step performs (`mx.eval`, and the reads `.item()` /
`.tolist()`, which wait for the device; `mx.async_eval` starts work and is counted apart).
The forward pass alone is the step of the barest loop over the same model and rows
(`forward_ms`: build the pass, argmax, `mx.eval`, nothing else); `overhead_ms` is a step's
median wall time minus it. Only steps with every row decoding count (not the first few,
nor those where a row joins or prefills).

Configurations: the stress models (benchmarks/bench_models.py: a forward pass of a few ms,
as on a fast Mac; `stress` with SmolLM2's 49k vocabulary, `stress262k` with Gemma 3's) and
real models (`default`, `gemma3-270m`), 1 and 4 rows, free and constrained (a JSON schema
whose reply is one long free string), speculation off and on (prompt lookup).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx

from benchmarks.constraints import UNFORCED_PROMPT, UNFORCED_SCHEMA
from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.runtime import batch as batch_module
from engine.types import ChatRequest, SamplingSettings

# The parts of a step, timed exclusively (DecodeBatch methods).
PARTS = (
    "_merge_joining",
    "_forward",
    "_read",
    "_hand_over",
    "_take_mask_step",
    "_sample",
    "_hold",
    "_draft_rows",
    "_verify_drafts",
    "_leave",
    "_time_step",
)
TOPICS = ("a lighthouse", "a mountain village", "a night train", "an old library")


@dataclass
class StepLog:
    """What one step did: its wall time, each part's exclusive time, its syncs."""

    wall: float = 0.0
    rows: int = 0
    parts: dict[str, float] = field(default_factory=dict)
    syncs: int = 0  # mx.eval, .item(), .tolist(): the thread waits for the device
    sync_wait: float = 0.0  # time spent inside them
    async_evals: int = 0


class Profiler:
    """Wraps DecodeBatch's parts and MLX's synchronising calls while active (engine thread)."""

    def __init__(self) -> None:
        self.steps: list[StepLog] = []
        self._current: StepLog | None = None
        self._stack: list[list[Any]] = []  # [name, started, child time]
        self._saved: list[tuple[Any, str, Any]] = []

    def _enter(self, name: str) -> None:
        self._stack.append([name, time.perf_counter(), 0.0])

    def _exit(self) -> None:
        name, started, child = self._stack.pop()
        took = time.perf_counter() - started
        if self._current is not None:
            parts = self._current.parts
            parts[name] = parts.get(name, 0.0) + took - child
        if self._stack:
            self._stack[-1][2] += took

    def _wrap_part(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self._enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit()

        return wrapped

    def _wrap_sync(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            log = self._current
            if log is None:
                return fn(*args, **kwargs)
            self._enter("sync:" + name)
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - self._stack[-1][1]
                self._exit()
                log.syncs += 1
                log.sync_wait += took

        return wrapped

    def _wrap_step(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def step(batch: Any) -> Any:
            log = StepLog(rows=len(batch.rows) if not batch._joining else -1)
            self._current = log
            started = time.perf_counter()
            try:
                return fn(batch)
            finally:
                log.wall = time.perf_counter() - started
                self._current = None
                self.steps.append(log)

        return step

    def _wrap_async(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self._current is not None:
                self._current.async_evals += 1
            self._enter("async_eval")
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit()

        return wrapped

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    @contextlib.contextmanager
    def active(self) -> Iterator[Profiler]:
        cls = batch_module.DecodeBatch
        for name in PARTS:
            if hasattr(cls, name):
                self._patch(cls, name, self._wrap_part(name, getattr(cls, name)))
        self._patch(cls, "step", self._wrap_step(cls.step))
        self._patch(mx, "eval", self._wrap_sync("eval", mx.eval))
        self._patch(mx, "async_eval", self._wrap_async(mx.async_eval))
        self._patch(mx.array, "item", self._wrap_sync("item", mx.array.item))
        self._patch(mx.array, "tolist", self._wrap_sync("tolist", mx.array.tolist))
        try:
            yield self
        finally:
            for owner, name, value in reversed(self._saved):
                setattr(owner, name, value)
            self._saved.clear()


def _requests(rows: int, tokens: int, constrained: bool) -> list[ChatRequest]:
    spec = json_schema_constraint(UNFORCED_SCHEMA, "free-string schema") if constrained else None
    prompt = UNFORCED_PROMPT if constrained else "Write a long, detailed story about {}."
    return [
        ChatRequest(
            [{"role": "user", "content": prompt.format(TOPICS[i % len(TOPICS)])}],
            SamplingSettings(temperature=0.0, max_tokens=tokens),
            constraint=spec,
        )
        for i in range(rows)
    ]


def bare_forward_ms(loaded: Any, rows: int, steps: int) -> float:
    """The median step of the barest loop: feed the argmax back, `mx.eval`, nothing else
    (engine thread; a context about as long as the profiled replies')."""
    from mlx_lm.models.cache import make_prompt_cache

    model = loaded.model
    cache = make_prompt_cache(model)
    if rows > 1:
        from mlx_lm.models.cache import BatchKVCache

        cache = [BatchKVCache([0] * rows) for _ in cache]
    y = mx.zeros((rows, 40), dtype=mx.uint32)
    mx.eval(model(y, cache=cache))
    y = mx.zeros((rows,), dtype=mx.uint32)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        y = mx.argmax(model(y[:, None], cache=cache)[:, -1, :], axis=-1)
        mx.eval(y)
        times.append(time.perf_counter() - started)
    return statistics.median(times[2:]) * 1e3


def profile_config(
    engine: Engine, rows: int, constrained: bool, speculative: bool, tokens: int
) -> dict[str, Any]:
    """One configuration's per-step figures (medians over the steps with every row in)."""
    engine.set_speculative(speculative)
    profiler = Profiler()
    with profiler.active():
        results = [h.result() for h in engine.submit_many(_requests(rows, tokens, constrained))]
    for result in results:
        if result.error:
            raise RuntimeError(result.error)
    full = [s for s in profiler.steps if s.rows == rows][3:]
    if not full:
        raise RuntimeError("no step ran with every row decoding")
    names = sorted({name for s in full for name in s.parts})
    parts = {
        name: round(statistics.mean(s.parts.get(name, 0.0) for s in full) * 1e3, 3)
        for name in names
    }
    return {
        "rows": rows,
        "constrained": constrained,
        "speculative": speculative,
        "steps": len(full),
        "tokens": sum(r.stats.generated_tokens for r in results),
        "step_ms": round(statistics.median(s.wall for s in full) * 1e3, 3),
        "syncs_per_step": round(statistics.mean(s.syncs for s in full), 2),
        "sync_wait_ms": round(statistics.median(s.sync_wait for s in full) * 1e3, 3),
        "async_evals_per_step": round(statistics.mean(s.async_evals for s in full), 2),
        "parts_mean_ms": parts,
    }


def profile_model(engine: Engine, tokens: int, label: str) -> list[dict[str, Any]]:
    """Every configuration on the model loaded in `engine`."""
    out = []
    engine.chat(_requests(1, 4, False)[0])  # warm-up
    for rows in (1, 4):

        def forward_of(loaded: Any, n: int = rows) -> float:
            return bare_forward_ms(loaded, n, max(24, tokens))

        forward = engine.run(forward_of).result()
        for constrained in (False, True):
            for speculative in (False, True):
                figures = profile_config(engine, rows, constrained, speculative, tokens)
                figures["model"] = label
                figures["forward_ms"] = round(forward, 3)
                figures["overhead_ms"] = round(figures["step_ms"] - forward, 3)
                out.append(figures)
                print(json.dumps(figures), file=sys.stderr, flush=True)
    return out


def table(results: list[dict[str, Any]]) -> str:
    """The figures as a Markdown table, and the largest parts of each step."""
    lines = [
        "| model | rows | constrained | spec | step ms | forward ms | overhead ms | syncs/step "
        "| async_eval/step | largest parts (mean ms, exclusive) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        parts = sorted(r["parts_mean_ms"].items(), key=lambda kv: -kv[1])[:5]
        text = ", ".join(f"{k.lstrip('_')} {v:.2f}" for k, v in parts)
        lines.append(
            f"| {r['model']} | {r['rows']} | {'yes' if r['constrained'] else 'no'} "
            f"| {'on' if r['speculative'] else 'off'} | {r['step_ms']:.2f} | {r['forward_ms']:.2f} "
            f"| {r['overhead_ms']:.2f} | {r['syncs_per_step']:.2f} "
            f"| {r['async_evals_per_step']:.2f} | {text} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_profile", description=__doc__)
    parser.add_argument(
        "--models",
        default="stress,default",
        help="comma-separated: stress (49k vocabulary), stress262k (Gemma 3's), default, "
        "gemma3-270m, or any model spec",
    )
    parser.add_argument("--tokens", type=int, default=96, help="tokens per reply (stress)")
    parser.add_argument("--default-tokens", type=int, default=24, help="tokens (default model)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    for label in args.models.split(","):
        engine = Engine(reuse_prefixes=False)
        try:
            if label in ("stress", "stress262k"):
                from benchmarks.bench_models import build_stress_model

                with tempfile.TemporaryDirectory(prefix="corral-tiny-") as folder:
                    build_stress_model(folder, "262k" if label == "stress262k" else "49k")
                    engine.load_model(folder).result()
                results += profile_model(engine, args.tokens, label)
            else:
                from benchmarks.bench_models import resolve_bench_model

                engine.load_model(resolve_bench_model(label)).result()
                results += profile_model(engine, args.default_tokens, label)
        finally:
            engine.close()
    print(json.dumps(results, indent=1) if args.json else table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
