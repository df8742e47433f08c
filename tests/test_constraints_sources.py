"""Constraint files and pasted text: recognised by extension and content, bad files rejected
with a message naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.constraints import ConstraintError
from engine.constraints.sources import (
    MAX_SOURCE_BYTES,
    any_json_constraint,
    constraint_from_file,
    constraint_from_text,
    json_schema_constraint,
    regex_constraint,
    sniff_kind,
)
from engine.constraints.validate import validate_constraint

GRAMMARS = Path(__file__).resolve().parents[1] / "resources" / "grammars"
LARK = 'start: "yes" | "no"\n'
GBNF = 'root ::= "yes" | "no"\n'


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("person.json", '{"type": "object"}', "json_schema"),
        ("answer.lark", LARK, "lark"),
        ("answer.gbnf", GBNF, "gbnf"),
        ("date.regex", "[0-9]{4}-[0-9]{2}\n", "regex"),
        ("date.re", "[0-9]{4}", "regex"),
        # content wins over a misleading grammar extension
        ("misnamed.lark", GBNF, "gbnf"),
        ("misnamed.gbnf", LARK, "lark"),
        # other extensions are sniffed
        ("schema.txt", '{"type": "string"}', "json_schema"),
        ("grammar.txt", GBNF, "gbnf"),
        ("grammar", LARK, "lark"),
    ],
)
def test_file_kind_from_extension_and_content(tmp_path, name, content, kind):
    spec = constraint_from_file(write(tmp_path, name, content))
    assert spec.kind == kind
    assert spec.name == name


def test_regex_file_drops_only_the_trailing_newline(tmp_path):
    spec = constraint_from_file(write(tmp_path, "a.regex", "a b+\r\n"))
    assert spec.source == "a b+"


def test_utf8_bom_is_ignored(tmp_path):
    spec = constraint_from_file(write(tmp_path, "s.json", b'\xef\xbb\xbf{"type": "integer"}'))
    assert json.loads(spec.source) == {"type": "integer"}


def test_kind_can_be_forced(tmp_path):
    spec = constraint_from_file(
        write(tmp_path, "schema.txt", '{"type": "integer"}'), kind="json_schema"
    )
    assert spec.kind == "json_schema"
    with pytest.raises(ConstraintError, match="not valid JSON"):
        constraint_from_file(write(tmp_path, "g.lark", LARK), kind="json_schema")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("binary.json", bytes(range(256)) * 4, "not a text file"),
        ("latin1.lark", 'start: "caf\xe9"'.encode("latin-1"), "not a UTF-8 text file"),
        ("empty.gbnf", "", "the file is empty"),
        ("blank.regex", "  \n\n", "the file is empty"),
        ("notes.txt", "just some prose, not a grammar", "not a recognised grammar file"),
        ("bad.json", '{"type": "object",\n  "properties": }', "line 2, column 17: not valid JSON"),
        ("list.json", "[1, 2]", "must be an object, not an array"),
    ],
)
def test_bad_files_are_rejected_naming_the_file(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(ConstraintError, match=message) as caught:
        constraint_from_file(path)
    assert name in str(caught.value)


def test_huge_file_is_rejected_without_reading_it(tmp_path):
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.truncate(10 * 1024 * 1024)  # 10 MB
    with pytest.raises(ConstraintError, match="too large") as caught:
        constraint_from_file(path)
    assert "huge.json" in str(caught.value) and f"{MAX_SOURCE_BYTES:,}" in str(caught.value)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(ConstraintError, match="no such file"):
        constraint_from_file(tmp_path / "nope.lark")
    with pytest.raises(ConstraintError, match="is a folder"):
        constraint_from_file(tmp_path)


def test_text_sources():
    assert constraint_from_text(LARK, "lark").kind == "lark"
    assert json_schema_constraint({"type": "integer"}).source == '{"type": "integer"}'
    assert regex_constraint("[a-z]+").source == "[a-z]+"
    assert any_json_constraint().kind == "any_json"
    with pytest.raises(ConstraintError, match="empty"):
        constraint_from_text("   ", "gbnf")
    with pytest.raises(ConstraintError, match="empty"):
        regex_constraint("")
    with pytest.raises(ConstraintError, match="too large"):
        constraint_from_text("a" * (MAX_SOURCE_BYTES + 1), "regex")
    with pytest.raises(ConstraintError, match="unknown constraint kind"):
        constraint_from_text(LARK, "yaml")  # type: ignore[arg-type]
    with pytest.raises(ConstraintError, match="line 1, column 2"):
        constraint_from_text("{oops}", "json_schema", "pasted")


def test_sniffing_does_not_guess_wildly():
    assert sniff_kind("hello world") is None
    assert sniff_kind("[1, 2, 3]") is None
    assert sniff_kind("%import common.NUMBER\nstart: NUMBER") == "lark"


def test_example_grammars_load_and_validate():
    kinds = {}
    for path in sorted(GRAMMARS.iterdir()):
        spec = constraint_from_file(path)
        report = validate_constraint(spec)
        assert report.ok, (path.name, report.errors)
        assert not report.warnings, (path.name, report.warnings)
        kinds[spec.kind] = path.name
    assert set(kinds) == {"json_schema", "lark", "gbnf", "regex"}
    assert "%json" in (GRAMMARS / kinds["lark"]).read_text()
