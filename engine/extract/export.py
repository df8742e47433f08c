"""A job's rows out: JSONL (one object a row, as stored, with the JSON pointers of the
values Corral filled), CSV and XLSX (one column per top-level property of the schema,
nested values as JSON text, beside the file, its pages, the row's status, the fields Corral
filled rather than the document, and why it is not valid)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.extract.store import Row

FIXED_COLUMNS = ("file", "pages", "status", "filled", "error")
# What makes a spreadsheet read a cell as a formula (OWASP's list for CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def schema_columns(schema: dict[str, Any], rows: Sequence[Row] = ()) -> list[str]:
    """The schema's top-level property names, then keys replies have beyond them."""
    columns = list(schema.get("properties", {}) or {})
    for row in rows:
        if isinstance(row.result, dict):
            columns += [k for k in row.result if k not in columns]
    return columns


def cell(value: Any) -> str | int | float | bool | None:
    """A value as a spreadsheet cell: scalars as they are, the rest as JSON text; text a
    spreadsheet would run as a formula ("=...", "+...", "-...", "@...", or one of those
    behind a tab or carriage return) gets a leading quote, as documents are data, never
    code."""
    if value is None or isinstance(value, int | float | bool):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def table(schema: dict[str, Any], rows: Sequence[Row]) -> tuple[list[str], list[list[Any]]]:
    """The header and the cells of every row."""
    columns = schema_columns(schema, rows)
    body = []
    for row in rows:
        data = row.result if isinstance(row.result, dict) else {}
        filled = ", ".join(row.filled_fields)
        fixed = [cell(row.path), row.pages or "", row.status, cell(filled), cell(row.error or "")]
        body.append(fixed + [cell(data.get(c)) for c in columns])
    return [*FIXED_COLUMNS, *columns], body


def write_jsonl(path: str | os.PathLike[str], rows: Sequence[Row]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row.to_dict(), ensure_ascii=False) + "\n")


def write_csv(path: str | os.PathLike[str], schema: dict[str, Any], rows: Sequence[Row]) -> None:
    header, body = table(schema, rows)
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(["" if v is None else v for v in line] for line in body)


def write_xlsx(path: str | os.PathLike[str], schema: dict[str, Any], rows: Sequence[Row]) -> None:
    from openpyxl import Workbook

    header, body = table(schema, rows)
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Extraction"
    sheet.append(header)
    for line in body:
        sheet.append(line)
    book.save(Path(path))
