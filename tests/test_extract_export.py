"""A job's rows out as JSONL, CSV and XLSX: one column per schema property, nested values as
JSON text, and document text that a spreadsheet would run as a formula kept as text."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from engine.extract.export import cell, write_csv, write_jsonl, write_xlsx
from engine.extract.store import JobStore

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"}}}


def _rows(tmp_path: Path):
    store = JobStore(tmp_path / "jobs.sqlite3")
    job = store.create_job(SCHEMA)
    store.add_documents(job.id, [("/docs/a.pdf", "d1"), ("/docs/b.txt", "d2")])
    a, b = store.rows(job.id)
    store.finish(a.id, "valid", result={"name": '=HYPERLINK("x")', "tags": ["t", 1]})
    store.finish(b.id, "unreadable", error="/docs/b.txt: has no text")
    return store.rows(job.id)


def test_jsonl_keeps_each_row_as_stored(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "o.jsonl", _rows(tmp_path))
    lines = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert lines[0] == {
        "file": "/docs/a.pdf", "pages": None, "status": "valid",
        "data": {"name": "=HYPERLINK(\"x\")", "tags": ["t", 1]}, "filled_paths": [],
        "error": None,
    }  # fmt: skip
    assert lines[1]["status"] == "unreadable" and lines[1]["data"] is None


def test_csv_has_a_column_per_property_and_no_formula(tmp_path: Path) -> None:
    write_csv(tmp_path / "o.csv", SCHEMA, _rows(tmp_path))
    with (tmp_path / "o.csv").open() as f:
        header, first, second = list(csv.reader(f))
    assert header == ["file", "pages", "status", "filled", "error", "name", "tags"]
    assert first[5] == '\'=HYPERLINK("x")' and json.loads(first[6]) == ["t", 1]
    assert second[2:5] == ["unreadable", "", "/docs/b.txt: has no text"]


def test_xlsx_opens_with_the_same_table(tmp_path: Path) -> None:
    from openpyxl import load_workbook

    write_xlsx(tmp_path / "o.xlsx", SCHEMA, _rows(tmp_path))
    sheet = load_workbook(tmp_path / "o.xlsx").active
    values = [[c.value for c in row] for row in sheet.iter_rows()]
    assert values[0] == ["file", "pages", "status", "filled", "error", "name", "tags"]
    assert values[1][5] == '\'=HYPERLINK("x")' and sheet.cell(2, 6).data_type == "s"


def test_a_row_is_finished_once_only(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3")
    job = store.create_job(SCHEMA)
    store.add_documents(job.id, [("/docs/a.pdf", "d1")])
    (row,) = store.rows(job.id)
    assert store.finish(row.id, "valid", result={"name": "x"})
    assert not store.finish(row.id, "failed", error="late")
    (row,) = store.rows(job.id)
    assert (row.status, row.completions, row.result) == ("valid", 1, {"name": "x"})


def test_text_a_spreadsheet_would_run_is_quoted_and_the_rest_is_not() -> None:
    for formula in ("-2+3+cmd|' /C calc'!A0", "\t=1+1", "\r=1+1", "+1 555 0100", "@SUM(A1)"):
        assert cell(formula) == "'" + formula
    for data in ("Acme - invoice 12", "a-b", "", "12.50"):
        assert cell(data) == data
    assert cell(-5) == -5 and cell(-2.5) == -2.5  # numbers stay numbers
