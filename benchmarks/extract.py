"""The `extract` bench section: a folder of generated documents through an extraction job,
and the same chat completions through the Batch API and online.

- `extract_docs_per_min`: documents over minutes for a job of `DOCS` mixed documents
  (PDF, DOCX, HTML, Markdown, text) decoded `ROWS` at a time, reading included.
- `extract_batch_speedup`: the wall time of the same job run one document at a time over
  its time run `ROWS` at a time (the prompt cache emptied before each run; goal >= 2.5);
  `extract_batch_speedup_8` the same at 8 rows (every document at once).
- `extract_valid_rate`: rows the model wrote to the end that validate against the schema,
  over all rows (goal 1.0); rows Corral filled to fit are never counted here.
- `extract_filled_rate`: rows Corral's closing policy ended to fit (their last values
  Corral's, not the document's), over all rows (goal 0). Both with the reply budget a job
  gets by default (`engine.extract.budget`'s estimate), as a user's job would.
- `extract_resume_overhead_s`: the time `--resume` spends on a job with nothing left to do
  (every file digested again, the store read, no row submitted).
- `batch_api_tps_ratio`: generated tokens per second of `DOCS` constrained chat completions
  sent as one batch through `/v1/batches` (upload to results) over the same requests sent
  online at once, through the same server (goal >= 0.95): the median of alternating rounds,
  with `batch_api_tps_ratio_spread`.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.documents import INVOICE_SCHEMA, mixed_folder
from engine.engine import Engine
from engine.extract.document import file_digest
from engine.extract.runner import ExtractRunner
from engine.extract.store import JobSettings, JobStore

DOCS = 8
ROWS = 4
ROUNDS = 3  # alternating rounds of the Batch API against the same requests online


def _job(engine: Engine, store: JobStore, paths: list[Path], rows: int, tokens: int | None) -> Any:
    """Run a job over `paths`, `rows` at a time, `tokens` per reply (None: the estimate)."""
    engine.run(lambda _: engine.prompt_cache.clear()).result()
    job = store.create_job(INVOICE_SCHEMA, settings=JobSettings(max_tokens=tokens))
    store.add_documents(job.id, [(str(p), file_digest(p)) for p in paths])
    started = time.perf_counter()
    progress = ExtractRunner(engine, store, job.id, limit=lambda: rows).run()
    return job.id, time.perf_counter() - started, progress


def _batch_api_ratio(engine: Engine, tokens: int, rounds: int = ROUNDS) -> dict[str, Any]:
    """`batch_api_tps_ratio` (the median of `rounds` alternating rounds, the Batch API run
    first in even rounds and the online one first in odd ones) and its spread."""
    import openai

    from benchmarks.rounds import alternate, paired_figures
    from engine.server import HTTPServer, ServerConfig

    info = engine.snapshot.model
    assert info is not None
    bodies = [
        {
            "model": info.name,
            "messages": [{"role": "user", "content": f"Invoice {i}: who sent it, what total?"}],
            "max_tokens": tokens,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "invoice", "schema": INVOICE_SCHEMA},
            },
        }
        for i in range(DOCS)
    ]
    server = HTTPServer(engine, ServerConfig(port=0))
    server.start()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)

    def online() -> float:
        done: list[int] = []

        def send(body: dict[str, Any]) -> None:
            reply = client.chat.completions.create(**body)
            assert reply.usage is not None
            done.append(reply.usage.completion_tokens)

        engine.run(lambda _: engine.prompt_cache.clear()).result()
        started = time.perf_counter()
        threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(done) / (time.perf_counter() - started)

    def batched() -> float:
        engine.run(lambda _: engine.prompt_cache.clear()).result()
        lines = "".join(
            json.dumps({"custom_id": str(i), "method": "POST", "url": "/v1/chat/completions",
                        "body": b}) + "\n"
            for i, b in enumerate(bodies)
        )  # fmt: skip
        started = time.perf_counter()
        upload = client.files.create(file=("in.jsonl", io.BytesIO(lines.encode())), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while batch.status not in ("completed", "failed", "cancelled"):
            time.sleep(0.02)
            batch = client.batches.retrieve(batch.id)
        if batch.output_file_id is None:
            raise RuntimeError(f"the batch ended {batch.status}")
        out = client.files.content(batch.output_file_id).text.splitlines()
        made = sum(
            int(json.loads(x)["response"]["body"]["usage"]["completion_tokens"]) for x in out
        )
        return made / (time.perf_counter() - started)

    pairs: list[tuple[float, float]] = []
    try:
        for i in range(rounds):
            first_batched, _ = alternate(i)
            if first_batched:
                b_tps = batched()
                o_tps = online()
            else:
                o_tps = online()
                b_tps = batched()
            pairs.append((b_tps, o_tps))
    finally:
        client.close()
        server.stop()
    return paired_figures("batch_api_tps_ratio", pairs)


def run_extract_bench(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """The figures above; the Batch API's requests with `args.tokens` reply tokens."""
    with tempfile.TemporaryDirectory(prefix="corral-extract-bench-") as tmp:
        folder = Path(tmp)
        paths = mixed_folder(folder / "docs", DOCS)
        store = JobStore(folder / "jobs.sqlite3")
        _job(engine, store, paths[:2], ROWS, 8)  # warm-up: kernels, the schema compiled
        _, one_s, _ = _job(engine, store, paths, 1, None)
        job, batched_s, progress = _job(engine, store, paths, ROWS, None)
        _, eight_s, _ = _job(engine, store, paths, 8, None)
        started = time.perf_counter()
        store.add_documents(job, [(str(p), file_digest(p)) for p in paths])
        ExtractRunner(engine, store, job).run()
        resume_s = time.perf_counter() - started
        store.close()
    return {
        "extract_docs_per_min": round(DOCS * 60 / batched_s, 2),
        "extract_batch_speedup": round(one_s / batched_s, 3),
        "extract_batch_speedup_8": round(one_s / eight_s, 3),
        "extract_valid_rate": round(progress.counts["valid"] / max(1, progress.total), 3),
        "extract_filled_rate": round(progress.counts["filled"] / max(1, progress.total), 3),
        "extract_resume_overhead_s": round(resume_s, 3),
        **_batch_api_ratio(engine, args.tokens),
    }
