"""Grammars and schemas that would crash llguidance's native compiler are refused first,
and grammar, schema and tool files are read capped, regular files only.

Crashing inputs run in a child process: a regression ends that process with SIGSEGV and
fails the test, instead of taking pytest down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.constraints import ConstraintError
from engine.constraints.limits import MAX_LARK_DEPTH, MAX_SCHEMA_DEPTH, check_lark, check_schema
from engine.constraints.sources import MAX_SOURCE_BYTES, constraint_from_file, constraint_from_text
from engine.constraints.validate import validate_constraint

REPO = Path(__file__).resolve().parents[1]


def lark_chain(rules: int) -> str:
    """`start` refers to r0, r0 to r1, ... : `rules` + 1 rules in one chain."""
    body = "\n".join(f"r{i}: r{i + 1}" for i in range(rules - 1))
    return f'start: r0\n{body}\nr{rules - 1}: "x"\n'


def defs_chain(depth: int, make=None) -> dict:
    """A schema whose `$defs` each refer to the next, `depth` definitions long."""
    make = make or (lambda ref: {"anyOf": [{"$ref": ref}, {"type": "null"}]})
    defs = {f"d{i}": make(f"#/$defs/d{i + 1}") for i in range(depth)}
    defs[f"d{depth}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def run_child(code: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_CHECK_FILE = """
import sys
from engine.constraints.sources import constraint_from_file
from engine.constraints.validate import validate_constraint
report = validate_constraint(constraint_from_file(sys.argv[1]))
print("OK" if report.ok else report.summary())
"""

_CHECK_TOOLS = """
import sys
from engine.tools import ToolDefinitionError, load_tools
try:
    load_tools(sys.argv[1])
    print("OK")
except ToolDefinitionError as exc:
    print(exc)
"""


def test_a_3000_rule_lark_chain_is_refused_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "chain.lark"
    path.write_text(lark_chain(3000))
    run = run_child(_CHECK_FILE, str(path))
    assert run.returncode == 0, f"rc {run.returncode}: {run.stderr[-400:]}"
    assert "refer to one another 3,001 deep (start -> r0 -> r1 -> r2 -> ...)" in run.stdout
    assert f"at most {MAX_LARK_DEPTH}" in run.stdout


def test_a_1500_deep_defs_chain_is_refused_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(defs_chain(1500)))
    run = run_child(_CHECK_FILE, str(path))
    assert run.returncode == 0, f"rc {run.returncode}: {run.stderr[-400:]}"
    assert "nest 3,002 deep" in run.stdout and f"at most {MAX_SCHEMA_DEPTH}" in run.stdout


def test_a_deep_tool_schema_is_refused_not_a_crash(tmp_path: Path) -> None:
    schema = defs_chain(1500)
    schema["type"] = "object"
    tools = [{"type": "function", "function": {"name": "deep", "parameters": schema}}]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    run = run_child(_CHECK_TOOLS, str(path))
    assert run.returncode == 0, f"rc {run.returncode}: {run.stderr[-400:]}"
    assert 'tool 1 ("deep")' in run.stdout and "nest 3,002 deep" in run.stdout


def test_lark_json_embeds_and_gbnf_are_checked_too() -> None:
    deep = json.dumps(defs_chain(500))
    with pytest.raises(ConstraintError, match="%json schema"):
        check_lark(f"start: %json {deep}\n")
    gbnf = "root ::= r0\n" + "".join(f"r{i} ::= r{i + 1}\n" for i in range(700)) + 'r700 ::= "x"\n'
    report = validate_constraint(constraint_from_text(gbnf, "gbnf"))
    assert not report.ok and "refer to one another" in report.summary()


_AT_THE_LIMIT = """
import json, sys
sys.path.insert(0, "tests")
from test_constraints_limits import defs_chain, lark_chain
from engine.constraints.limits import MAX_LARK_DEPTH, MAX_SCHEMA_DEPTH
from engine.constraints.sources import constraint_from_text
from engine.constraints.validate import validate_constraint
# the most stack-hungry chains measured: prefixItems (2 subschemas a level), Lark rules
level = lambda ref: {"type": "array", "prefixItems": [{"$ref": ref}]}
prefix = defs_chain(MAX_SCHEMA_DEPTH // 2 - 1, level)
for kind, text in [("json_schema", json.dumps(prefix)), ("lark", lark_chain(MAX_LARK_DEPTH - 1))]:
    report = validate_constraint(constraint_from_text(text, kind))
    print(kind, report.ok, report.summary())
"""


def test_grammars_just_under_the_limits_compile() -> None:
    """The limits sit well below the crash: chains just under them compile on the main
    thread of a child process (8 MiB of stack, the smallest Corral compiles on)."""
    run = run_child(_AT_THE_LIMIT)
    assert run.returncode == 0, f"rc {run.returncode}: {run.stderr[-400:]}"
    assert run.stdout.split("\n")[:2] == ["json_schema True ", "lark True "]


def test_recursive_grammars_are_not_mistaken_for_deep_ones() -> None:
    expr = (
        "start: expr\nexpr: term (('+' | '-') term)*\nterm: factor (('*' | '/') factor)*\n"
        'factor: NUMBER | "(" expr ")"\nNUMBER: /[0-9]+/\n'
    )
    check_lark(expr)
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    assert check_schema(tree) < 10


# ---- files ----

_READ_DEVICE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # the old code read until MemoryError
from engine.constraints import ConstraintError
from engine.constraints.sources import constraint_from_file
from engine.tools import ToolDefinitionError, load_tools
for load in (constraint_from_file, load_tools):
    try:
        load(sys.argv[1])
        print("read")
    except (ConstraintError, ToolDefinitionError) as exc:
        print(exc)
"""


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_devices_and_pipes_are_refused_without_reading(tmp_path: Path, kind: str) -> None:
    path = "/dev/zero"
    if kind == "fifo":
        path = str(tmp_path / "pipe.lark")
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    run = run_child(_READ_DEVICE, path, timeout=60)
    assert run.returncode == 0, run.stderr[-400:]
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and all("not a regular file" in line for line in lines), lines


def test_oversized_grammar_files_are_refused_by_size(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text('{"description": "' + "x" * MAX_SOURCE_BYTES + '"}')
    with pytest.raises(ConstraintError, match=f"the limit is {MAX_SOURCE_BYTES:,} bytes"):
        constraint_from_file(big)


# ---- GBNF errors name their line and column ----


def test_gbnf_undefined_rule_names_its_line_and_column() -> None:
    source = 'root ::= "a" item\n# item may be "b" or [other]\nitem ::= "b" | other\n'
    report = validate_constraint(constraint_from_text(source, "gbnf", "g.gbnf"))
    (error,) = report.errors
    assert (error.line, error.column) == (3, 16)
    assert error.message == "rule 'other' is used but never defined"
    assert report.summary() == "g.gbnf: line 3, column 16: rule 'other' is used but never defined"


def test_gbnf_other_positionless_errors_get_a_position() -> None:
    no_root = validate_constraint(constraint_from_text('item ::= "a"\n', "gbnf")).errors[0]
    assert (no_root.line, no_root.column) == (1, 1) and "root" in no_root.message
    clash = validate_constraint(
        constraint_from_text('root ::= foo-bar foo_bar\nfoo-bar ::= "a"\nfoo_bar ::= "b"\n', "gbnf")
    ).errors[0]
    assert (clash.line, clash.column) == (3, 1) and "clashes" in clash.message
