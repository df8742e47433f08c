"""`python -m engine extract --schema S.json --out results.jsonl FILES_OR_FOLDERS…`.

Every document in the files and folders given (folders walked, in name order) becomes a
row of a job kept in Corral's data folder; the rows are decoded side by side under the
schema, each written as it finishes, and the job's rows are exported at the end (JSONL,
and CSV or XLSX if asked). `--resume` continues the last job with the same schema,
instruction and settings: rows done stay done, a changed file is read again. Exit status:
0 when every row is valid (written by the model to the end, and valid), 1 when any is
filled (Corral wrote some of its values), incomplete, unreadable or failed, 2 on an error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.errors import CorralError
from engine.extract.document import document_keys, documents_in
from engine.extract.export import write_csv, write_jsonl, write_xlsx
from engine.extract.pages import parse_pages
from engine.extract.runner import ExtractRunner, Progress
from engine.extract.store import JobSettings, JobStore, Row
from engine.files import read_text_limited

MAX_SCHEMA_BYTES = 1 << 20


def add_command(sub: Any) -> None:
    """The `extract` subcommand on the CLI's subparsers."""
    from engine.memory.settings import add_cache_arguments

    cmd = sub.add_parser(
        "extract", help="a JSON schema over a folder of documents: one valid row per document"
    )
    cmd.add_argument("paths", nargs="+", metavar="FILES_OR_FOLDERS")
    cmd.add_argument("--schema", required=True, metavar="FILE", help="the JSON schema of a row")
    cmd.add_argument("--out", required=True, metavar="FILE", help="the rows as JSON lines")
    cmd.add_argument("--csv", metavar="FILE", help="also write the rows as CSV")
    cmd.add_argument("--xlsx", metavar="FILE", help="also write the rows as an Excel sheet")
    cmd.add_argument("--instruction", default="", help="what to do with each document")
    cmd.add_argument(
        "--pages", metavar="FIRST-LAST", help="read only these pages of each PDF (e.g. 1-3)"
    )
    cmd.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="reply tokens per row (default: estimated from the schema and each document)",
    )
    cmd.add_argument("--model", default="default", help="'default', an MLX folder, a .gguf…")
    cmd.add_argument("--max-rows", type=int, default=None, help="rows decoded side by side")
    cmd.add_argument(
        "--resume",
        action="store_true",
        help="continue the last job with this schema, instruction and settings",
    )
    add_cache_arguments(cmd)
    cmd.set_defaults(func=cmd_extract)


def collect(paths: list[str]) -> list[Path]:
    """The documents named: files as given, folders walked (known formats, name order)."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += documents_in(path)
        elif path.exists():
            found.append(path)
        else:
            raise CorralError(f"{path}: no such file or folder")
    unique: dict[Path, None] = {p.resolve(): None for p in found}
    return list(unique)


def _pages(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        return parse_pages(text)
    except ValueError as exc:
        raise CorralError(f"--pages: {exc}") from None


def _schema(path: str) -> dict[str, Any]:
    try:
        schema = json.loads(read_text_limited(path, MAX_SCHEMA_BYTES, "JSON schema"))
    except json.JSONDecodeError as exc:
        raise CorralError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(schema, dict):
        raise CorralError(f"{path}: a JSON schema for a row must be an object")
    return schema


class _Bar:
    """One progress line on a terminal (nothing elsewhere)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def show(self, row: Row, progress: Progress) -> None:
        if not self.tty:
            return
        width = 30
        filled = int(width * progress.done / max(1, progress.total))
        left = progress.seconds_left
        eta = f", {time.strftime('%M:%S', time.gmtime(left))} left" if left is not None else ""
        print(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {progress.done}/{progress.total} rows, "
            f"{progress.per_minute:.1f}/min{eta}   ",
            end="",
            file=sys.stderr,
            flush=True,
        )


def cmd_extract(args: argparse.Namespace) -> int:
    from engine.engine import Engine
    from engine.memory.settings import engine_cache_options

    schema = _schema(args.schema)
    if (args.max_tokens is not None and args.max_tokens < 1) or (
        args.max_rows is not None and args.max_rows < 1
    ):
        raise CorralError("--max-tokens and --max-rows must be at least 1")
    settings = JobSettings(max_tokens=args.max_tokens, pages=_pages(args.pages))
    files = collect(args.paths)
    if not files:
        raise CorralError("no documents found in the files and folders given")
    documents = document_keys(files)
    wanted = {path for path, _ in documents}  # not another run's files in the same job
    store = JobStore()
    job = store.find_job(schema, args.instruction, settings) if args.resume else None
    if job is None:
        job = store.create_job(
            schema, name=Path(args.schema).stem, instruction=args.instruction, settings=settings
        )
    store.add_documents(job.id, documents)
    print(f"job {job.id}: {len(documents)} documents", file=sys.stderr)
    engine = Engine(**engine_cache_options(args))
    bar = _Bar()
    try:
        if args.max_rows:
            engine.set_max_rows(args.max_rows)
        engine.load_model(args.model).result()
        runner = ExtractRunner(engine, store, job.id, on_row=bar.show, paths=wanted)
        try:
            runner.run()
        except KeyboardInterrupt:
            runner.cancel()
            print("\ninterrupted: run the same command with --resume to go on", file=sys.stderr)
            return 1
    finally:
        engine.close()
    if bar.tty:
        print(file=sys.stderr)
    rows = [r for r in store.rows(job.id) if r.path in wanted]
    write_jsonl(args.out, rows)
    if args.csv:
        write_csv(args.csv, schema, rows)
    if args.xlsx:
        write_xlsx(args.xlsx, schema, rows)
    kinds = ("valid", "filled", "incomplete", "unreadable")
    counts = {s: sum(r.status == s for r in rows) for s in kinds}
    counts["failed"] = sum(r.status in ("failed", "pending") for r in rows)
    print(
        f"{len(rows)} rows: {counts['valid']} valid, {counts['filled']} filled, "
        f"{counts['incomplete']} incomplete, {counts['unreadable']} unreadable, "
        f"{counts['failed']} failed",
        file=sys.stderr,
    )
    for row in rows:
        if row.status != "valid":
            where = f" (pages {row.pages})" if row.pages else ""
            print(f"  {row.status_text}: {row.path}{where}: {row.error}", file=sys.stderr)
    return 0 if counts["valid"] == len(rows) else 1
