"""A batch's input file checked line by line, as OpenAI's Batch API checks it: each line a
JSON object with a unique `custom_id`, `method` POST, the batch's `url`, and a `body`.
Problems are reported with their line numbers (the batch then fails, running nothing)."""

from __future__ import annotations

import json
from typing import Any

# The endpoints a batch may run, and the limits of one batch (stated in the README).
ENDPOINTS = ("/v1/chat/completions", "/v1/responses")
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_LINES = 50_000
MAX_CUSTOM_ID = 512
MAX_REPORTED = 20  # problems listed in a failed batch's `errors`


def parse_lines(
    data: bytes, endpoint: str
) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """(custom_id, body) of every line, and the problems found (empty when all are fine)."""
    lines: list[tuple[str, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()

    def problem(number: int, message: str, param: str | None = None) -> None:
        if len(errors) < MAX_REPORTED:
            errors.append(
                {"code": "invalid_request", "message": message, "param": param, "line": number}
            )

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [_file_error("invalid_file", f"not UTF-8 text (byte {exc.start})")]
    rows = text.splitlines()
    if sum(1 for r in rows if r.strip()) > MAX_LINES:
        return [], [_file_error("too_many_lines", f"more than {MAX_LINES:,} lines")]
    for number, raw in enumerate(rows, start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            problem(number, f"not valid JSON ({exc})")
            continue
        if not isinstance(item, dict):
            problem(number, "a line must be a JSON object")
            continue
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not 0 < len(custom_id) <= MAX_CUSTOM_ID:
            problem(number, f"custom_id: a string of 1 to {MAX_CUSTOM_ID} chars", "custom_id")
            continue
        if custom_id in seen:
            problem(number, f"custom_id {custom_id!r} is used by an earlier line", "custom_id")
            continue
        seen.add(custom_id)
        if item.get("method") != "POST":
            problem(number, "method must be POST", "method")
        elif item.get("url") != endpoint:
            problem(number, f"url must be the batch's endpoint {endpoint}", "url")
        elif not isinstance(item.get("body"), dict):
            problem(number, "body must be a JSON object", "body")
        else:
            lines.append((custom_id, item["body"]))
    if not lines and not errors:
        errors.append(_file_error("empty_file", "the input file has no lines"))
    return lines, errors


def _file_error(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": None}
