"""A batch input file checked line by line, with the line numbers of its problems."""

from __future__ import annotations

import json

from engine.server.batches.lines import MAX_LINES, parse_lines

URL = "/v1/chat/completions"


def _line(cid: str, **changes: object) -> bytes:
    line = {"custom_id": cid, "method": "POST", "url": URL, "body": {"messages": []}, **changes}
    return json.dumps(line).encode() + b"\n"


def test_good_lines_in_order_blank_lines_skipped() -> None:
    lines, errors = parse_lines(_line("a") + b"\n" + _line("b"), URL)
    assert errors == [] and [cid for cid, _ in lines] == ["a", "b"]


def test_each_problem_names_its_line() -> None:
    data = (
        _line("a") + b"not json\n" + _line("a") + _line("c", method="GET")
        + _line("d", url="/v1/responses") + _line("e", body=[1]) + b"[1]\n" + _line("")
    )  # fmt: skip
    _, errors = parse_lines(data, URL)
    assert [(e["line"], e["param"]) for e in errors] == [
        (2, None), (3, "custom_id"), (4, "method"), (5, "url"), (6, "body"), (7, None),
        (8, "custom_id"),
    ]  # fmt: skip


def test_file_level_problems() -> None:
    assert parse_lines(b"\xff\xfe", URL)[1][0]["code"] == "invalid_file"
    assert parse_lines(b"\n\n", URL)[1][0]["code"] == "empty_file"
    many = _line("x") * (MAX_LINES + 1)
    assert parse_lines(many, URL)[1][0]["code"] == "too_many_lines"
