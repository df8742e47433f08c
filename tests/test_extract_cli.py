"""`python -m engine extract` as a user runs it: a folder of 20 mixed documents into JSONL and
CSV with every row valid; a job killed mid-run (SIGKILL, a real process kill) and resumed
with `--resume`, no row done twice; a non-zero exit when a document is unreadable."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import jsonschema

from tests.conftest import REPO
from tests.extract_support import INVOICE_SCHEMA, mixed_folder


def _command(model: Path, schema: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "engine", "extract", "--model", str(model), "--schema", str(schema),
        "--out", str(out), "--max-tokens", "40", *extra,
    ]  # fmt: skip


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, "CORRAL_EXTRACT_DIR": str(data), "PYTHONPATH": str(REPO)}


def _schema(tmp_path: Path) -> Path:
    path = tmp_path / "invoice.schema.json"
    path.write_text(json.dumps(INVOICE_SCHEMA))
    return path


def test_folder_of_twenty_documents_to_jsonl_and_csv(tiny_model_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    mixed_folder(docs, 20)
    out, table = tmp_path / "rows.jsonl", tmp_path / "rows.csv"
    done = subprocess.run(
        [*_command(tiny_model_dir, _schema(tmp_path), out, "--csv", str(table)), str(docs)],
        env=_env(tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "20 rows: 20 valid, 0 filled, 0 incomplete, 0 unreadable, 0 failed" in done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20 and {Path(r["file"]).name for r in rows} == {
        p.name for p in docs.iterdir()
    }
    for row in rows:
        assert row["status"] == "valid"
        jsonschema.validate(row["data"], INVOICE_SCHEMA)
    with table.open() as f:
        lines = list(csv.reader(f))
    assert lines[0] == ["file", "pages", "status", "filled", "error", "vendor", "total", "paid"]
    assert len(lines) == 21


def test_unreadable_document_makes_the_exit_status_non_zero(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    mixed_folder(docs, 2)
    (docs / "broken.docx").write_bytes(b"not a zip at all")
    done = subprocess.run(
        [*_command(tiny_model_dir, _schema(tmp_path), tmp_path / "o.jsonl"), str(docs)],
        env=_env(tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 1
    assert "3 rows: 2 valid, 0 filled, 0 incomplete, 1 unreadable, 0 failed" in done.stderr
    assert "broken.docx: named as a Word document (.docx), but the file is text" in done.stderr


def _rows(db: Path) -> dict[int, tuple[str, int, float | None]]:
    """Each row's status, completions and finish time; none while the job is being made."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = conn.execute("SELECT id, status, completions, finished FROM rows").fetchall()
    except sqlite3.OperationalError:  # the tables are not there yet
        found = []
    finally:
        conn.close()
    return {r[0]: (r[1], r[2], r[3]) for r in found}


def test_killed_job_resumes_with_no_row_done_twice(tiny_model_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    mixed_folder(docs, 30)
    data = tmp_path / "data"
    schema, out = _schema(tmp_path), tmp_path / "rows.jsonl"
    # One row at a time and long replies: the kill lands while rows are still pending.
    command = [*_command(tiny_model_dir, schema, out, "--max-rows", "1"), str(docs)]
    command[command.index("40")] = "200"
    process = subprocess.Popen(
        command, env=_env(data), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    db = data / "extract.sqlite3"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if db.exists():
                rows = _rows(db)
                if sum(s != "pending" for s, _, _ in rows.values()) >= 3:
                    break
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL
    before = _rows(db)
    finished_before = {i: r for i, r in before.items() if r[0] != "pending"}
    assert 3 <= len(finished_before) < 30  # killed mid-run
    resumed = subprocess.run(
        [*command, "--resume"], env=_env(data), cwd=REPO, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    after = _rows(db)
    assert len(after) == 30
    assert all(status == "valid" and completions == 1 for status, completions, _ in after.values())
    for row_id, row in finished_before.items():
        assert after[row_id] == row  # untouched: neither read nor decoded again
    assert len(out.read_text().splitlines()) == 30


def test_progress_bar_on_a_terminal_only(capsys) -> None:
    from engine.extract.cli import _Bar
    from engine.extract.runner import Progress

    progress = Progress({"pending": 6, "valid": 3, "incomplete": 0, "unreadable": 1, "failed": 0})
    progress.finished_this_run = 4
    bar = _Bar()
    bar.tty = True  # as on a terminal
    bar.show(None, progress)  # type: ignore[arg-type]
    shown = capsys.readouterr().err
    assert shown.startswith("\r[############") and "4/10 rows" in shown and "/min" in shown
    bar.tty = False  # piped: the summary only
    bar.show(None, progress)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""
