"""Where an extraction job's time goes (`python -m benchmarks.extract_profile`).

Runs the `extract` bench section's job (8 generated documents, the invoice schema) at each
number of rows asked, on one engine, and logs every scheduler turn: each decode step's
(rows, width) shape and time, the positions it fed (rows × width: padding included),
and each prompt's prefill (its tokens, the tokens the prompt cache served, the time). The
counts do not depend on the machine's load; the times do.

    python -m benchmarks.extract_profile --rows 1,4,8 --tokens 64
"""

from __future__ import annotations

import argparse
import collections
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.documents import mixed_folder
from benchmarks.extract import DOCS, _job
from engine.engine import Engine
from engine.extract.store import JobStore
from engine.runtime import scheduler as scheduler_module


class TurnLog:
    """Wraps the scheduler's decode step and prefill while active (engine thread)."""

    def __init__(self) -> None:
        self.steps: list[tuple[tuple[int, int], float]] = []  # ((rows, width), seconds)
        self.prefills: list[tuple[int, int, float]] = []  # (prompt tokens, cached, seconds)

    def install(self) -> None:
        cls: Any = scheduler_module.Scheduler
        decode, chunk = cls._decode_step, cls._prefill_chunk
        log = self

        def decode_step(sched: Any) -> None:
            started = time.perf_counter()
            decode(sched)
            shape = sched.batch._last_step[1] if sched.batch._last_step else (0, 0)
            log.steps.append((shape, time.perf_counter() - started))

        def prefill_chunk(sched: Any, prompt: Any, budget: int) -> int:
            first = not prompt.started
            started = time.perf_counter()
            fed = int(chunk(sched, prompt, budget))
            took = time.perf_counter() - started
            if first:
                reply = prompt.reply
                log.prefills.append((len(reply.prompt_tokens), reply.n_cached, took))
            elif log.prefills:
                tokens, cached, before = log.prefills[-1]
                log.prefills[-1] = (tokens, cached, before + took)
            return fed

        cls._decode_step, cls._prefill_chunk = decode_step, prefill_chunk

    def report(self, rows: int, seconds: float) -> str:
        by_shape: dict[tuple[int, int], list[float]] = collections.defaultdict(list)
        for shape, took in self.steps:
            by_shape[shape].append(took)
        positions = sum(r * w for (r, w), _ in self.steps)
        lines = [
            f"rows={rows}: job {seconds:.1f} s; {len(self.steps)} decode steps "
            f"({sum(t for _, t in self.steps):.1f} s), {positions} positions fed; "
            f"{len(self.prefills)} prompts prefilled "
            f"({sum(t for *_, t in self.prefills):.1f} s, "
            f"{sum(n - c for n, c, _ in self.prefills)} tokens computed)",
        ]
        for (r, w), times in sorted(by_shape.items()):
            lines.append(
                f"    {r} rows x {w} wide: {len(times)} steps, median "
                f"{1000 * statistics.median(times):.0f} ms"
            )
        for n, cached, took in self.prefills:
            lines.append(f"    prompt {n} tokens, {cached} cached: {took:.2f} s")
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--rows", default="1,4,8", help="rows at a time, comma separated")
    parser.add_argument("--tokens", type=int, default=64, help="reply tokens per row at most")
    args = parser.parse_args(argv)
    log = TurnLog()
    log.install()
    engine = Engine()
    try:
        engine.load_model(args.model).result()
        with tempfile.TemporaryDirectory(prefix="corral-extract-profile-") as tmp:
            paths = mixed_folder(Path(tmp) / "docs", DOCS)
            store = JobStore(Path(tmp) / "jobs.sqlite3")
            _job(engine, store, paths[:2], 4, 8)  # warm-up, as the bench does
            for rows in (int(r) for r in args.rows.split(",")):
                log.steps.clear()
                log.prefills.clear()
                _, seconds, _ = _job(engine, store, paths, rows, args.tokens)
                print(log.report(rows, seconds), flush=True)
            store.close()
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
