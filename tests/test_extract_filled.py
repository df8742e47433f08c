"""Rows Corral had to fill are `filled`, never `valid` (issue 44). Generated PDFs whose reply
cannot fit its tokens (the tiny model rambles inside free strings until Corral closes
them): through the runner, which decodes such a row once more with twice the tokens before
it keeps it as filled; through `python -m engine extract` (its summary, exit status, JSONL,
CSV and XLSX); and an older database's rows it once called valid."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from engine.extract.document import file_digest
from engine.extract.runner import ExtractRunner
from engine.extract.store import JobSettings, JobStore
from tests.conftest import REPO
from tests.extract_support import invoice_text, make_pdf

# Free strings the tiny model never ends by itself: every reply is closed by Corral.
RAMBLING = {
    "type": "object",
    "properties": {"vendor": {"type": "string"}, "note": {"type": "string"}},
    "required": ["vendor", "note"],
}


def _pdfs(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [make_pdf(folder / f"invoice{i}.pdf", [invoice_text(i)]) for i in range(n)]


class CountingEngine:
    """The real engine, with the reply budget of each request it is given written down."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.budgets: list[int] = []

    def submit(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.budgets.append(request.sampling.max_tokens)
        return self._engine.submit(request, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def test_a_filled_row_is_retried_with_twice_the_tokens_then_kept_filled(
    tiny_engine, tmp_path: Path
) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3")
    job = store.create_job(RAMBLING, settings=JobSettings(max_tokens=24))
    paths = _pdfs(tmp_path / "docs", 2)
    store.add_documents(job.id, [(str(p), file_digest(p)) for p in paths])
    engine = CountingEngine(tiny_engine)
    progress = ExtractRunner(engine, store, job.id).run()  # type: ignore[arg-type]
    assert sorted(engine.budgets) == [24, 24, 48, 48]  # each row once more, twice the tokens
    assert progress.counts["valid"] == 0 and progress.counts["filled"] == 2
    for row in store.rows(job.id):
        assert row.status == "filled" and row.completions == 1
        jsonschema.validate(row.result, RAMBLING)  # closing still gives valid JSON
        assert row.filled and set(row.filled_fields) <= {"vendor", "note"}
        assert row.status_text == f"filled: {', '.join(row.filled_fields)}"
        assert "Corral finished this reply" in (row.error or "")
        assert "(also with twice the tokens)" in (row.error or "")


def test_the_cli_counts_filled_rows_apart_and_every_export_names_them(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    _pdfs(tmp_path / "docs", 2)
    schema = tmp_path / "rambling.schema.json"
    schema.write_text(json.dumps(RAMBLING))
    out, table, sheet = tmp_path / "rows.jsonl", tmp_path / "rows.csv", tmp_path / "rows.xlsx"
    command = [
        sys.executable, "-m", "engine", "extract", "--model", str(tiny_model_dir),
        "--schema", str(schema), "--out", str(out), "--csv", str(table), "--xlsx", str(sheet),
        "--max-tokens", "24", str(tmp_path / "docs"),
    ]  # fmt: skip
    env = {**os.environ, "CORRAL_EXTRACT_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 1, done.stderr  # not every row is the model's own
    assert "2 rows: 0 valid, 2 filled, 0 incomplete, 0 unreadable, 0 failed" in done.stderr
    assert done.stderr.count("  filled: ") == 2  # each listed with its filled fields
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["filled", "filled"]
    for row in rows:
        assert row["filled_paths"] and all(p in ("/vendor", "/note") for p in row["filled_paths"])
        jsonschema.validate(row["data"], RAMBLING)
    with table.open() as f:
        header, *body = list(csv.reader(f))
    assert header[:5] == ["file", "pages", "status", "filled", "error"]
    for line, row in zip(body, rows, strict=True):
        assert line[2] == "filled"
        assert line[3] == ", ".join(p.lstrip("/") for p in row["filled_paths"])
    from openpyxl import load_workbook

    values = [[c.value for c in r] for r in load_workbook(sheet).active.iter_rows()]  # type: ignore[union-attr]
    assert values[0][3] == "filled" and all(v[2] == "filled" and v[3] for v in values[1:])


def test_an_older_database_calls_its_closed_to_fit_rows_filled(tmp_path: Path) -> None:
    """Before issue 44 a row closed to fit was stored `valid`, its note saying so: opened
    now, it is `filled` (which values is no longer known), and a truly valid one stays."""
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE jobs (id TEXT PRIMARY KEY, created REAL NOT NULL, name TEXT NOT NULL,
            schema TEXT NOT NULL, instruction TEXT NOT NULL, settings TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'ready');
        CREATE TABLE rows (id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL
            REFERENCES jobs(id) ON DELETE CASCADE, path TEXT NOT NULL, digest TEXT NOT NULL,
            first_page INTEGER, last_page INTEGER, status TEXT NOT NULL DEFAULT 'pending',
            result TEXT, error TEXT, tokens INTEGER NOT NULL DEFAULT 0,
            completions INTEGER NOT NULL DEFAULT 0, finished REAL);
        INSERT INTO jobs VALUES ('job_1', 0, 'x', '{}', '', '{"max_tokens": 512}', 'done');
        INSERT INTO rows (job, path, digest, status, result, error) VALUES
            ('job_1', '/a.pdf', 'd1', 'valid', '{}', 'closed to fit the reply''s token limit'),
            ('job_1', '/b.pdf', 'd2', 'valid', '{}', NULL);
        """
    )
    db.close()
    store = JobStore(path)
    assert [(r.path, r.status) for r in store.rows("job_1")] == [
        ("/a.pdf", "filled"),
        ("/b.pdf", "valid"),
    ]
    assert store.counts("job_1")["filled"] == 1
    assert store.job("job_1").settings.max_tokens == 512  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_max_tokens_must_be_positive(tiny_model_dir: Path, tmp_path: Path, bad: str) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(RAMBLING))
    done = subprocess.run(
        [sys.executable, "-m", "engine", "extract", "--schema", str(schema), "--out",
         str(tmp_path / "o.jsonl"), "--max-tokens", bad, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2 and "--max-tokens" in done.stderr
