"""Arguments from models and clients are bounded: built-in tools answer "error: ..." at
once for hostile arguments, tool names are whole-string matches, and every sampling
setting outside its range is refused with the field, the range and the value."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from engine.tools import ToolDefinitionError, validate_tools
from engine.tools.builtins import run_builtin
from engine.types import ChatRequest, SamplingSettings

REPO = Path(__file__).resolve().parents[1]

_RUN = """
import json, sys
from engine.tools.builtins import run_builtin
print(run_builtin(sys.argv[1], json.loads(sys.argv[2])))
"""


def test_calculator_round_with_a_huge_negative_digit_count_returns_at_once() -> None:
    """The old calculator computed round(7, -10**9) for ever; in a child process with a
    deadline, so a regression fails instead of hanging the suite."""
    run = subprocess.run(
        [sys.executable, "-c", _RUN, "calculator", '{"expression": "round(7, -10**9)"}'],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "error: round's digits must be between -308 and 308"


@pytest.mark.parametrize(
    ("name", "arguments", "answer"),
    [
        ("calculator", {"expression": "(10**300)**1000"}, "error: the result is too large"),
        ("calculator", {"expression": "9**9**9"}, "error: the exponent is too large"),
        ("calculator", {"expression": "round(2.5, 0.5)"}, "error: round's digits must be a whole"),
        ("calculator", {"expression": "round(1234.5678, -2)"}, "1200"),
        ("calculator", {"expression": 5}, "error: expression must be a non-empty string"),
        ("current_datetime", {"timezone": "x" * 100_000}, "error: unknown time zone (longer"),
        ("current_datetime", {"timezone": 5}, "error: timezone must be a string"),
        ("current_datetime", {"timezone": "../../etc/passwd"}, "error: unknown time zone"),
        (
            "convert_units",
            {"value": 10**400, "from_unit": "m", "to_unit": "km"},
            "error: value is too large",
        ),
        (
            "convert_units",
            {"value": math.nan, "from_unit": "m", "to_unit": "km"},
            "error: value must be a finite",
        ),
        (
            "convert_units",
            {"value": 1, "from_unit": ["m"], "to_unit": "km"},
            "error: from_unit and to_unit",
        ),
        (
            "convert_units",
            {"value": 1, "from_unit": "x" * 10_000, "to_unit": "km"},
            'error: unknown unit "xxx',
        ),
    ],
)
def test_builtin_arguments_are_checked(name: str, arguments: dict, answer: str) -> None:
    result = run_builtin(name, arguments)
    assert result.startswith(answer), result
    assert len(result) < 300


@pytest.mark.parametrize("name", ["get_time\n", "get_time\r\n", "get time", "", "x" * 129, "ä"])
def test_tool_names_must_match_the_rule_as_a_whole(name: str) -> None:
    tool = {"type": "function", "function": {"name": name, "parameters": {}}}
    with pytest.raises(ToolDefinitionError, match="name"):
        validate_tools([tool])


def test_tool_limits_name_the_tool_and_the_limit() -> None:
    big = {"type": "function", "function": {"name": "big", "description": "x" * 3_000_000}}
    with pytest.raises(ToolDefinitionError, match=r'tool 1 \("big"\): "description" is too long'):
        validate_tools([big])
    many = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(500)]
    with pytest.raises(ToolDefinitionError, match="too many tools .500; a request may offer"):
        validate_tools(many)


BAD_SETTINGS = [
    ("temperature", math.nan, "temperature must be a number in [0, 100], got nan"),
    ("temperature", -1.0, "temperature must be a number in [0, 100], got -1.0"),
    ("temperature", math.inf, "temperature must be a number in [0, 100]"),
    ("top_p", math.nan, "top_p must be a number in (0, 1], got nan"),
    ("top_p", 0.0, "top_p must be a number in (0, 1]"),
    ("top_k", -5, "top_k must be a whole number from 0"),
    ("top_k", 2.5, "top_k must be a whole number"),
    ("min_p", -0.1, "min_p must be a number in [0, 1)"),
    ("repetition_penalty", math.nan, "repetition_penalty must be a number in (0, 100], got nan"),
    ("repetition_penalty", -1.0, "repetition_penalty must be a number in (0, 100]"),
    ("repetition_context", 0, "repetition_context must be a whole number from 1"),
    ("seed", -1, "seed must be a whole number from 0 to 18,446,744,073,709,551,615, got -1"),
    ("seed", 2**64, "seed must be a whole number"),
    ("seed", "7", "seed must be a whole number"),
    ("max_tokens", 0, "max_tokens must be a whole number from 1"),
    ("max_tokens", "many", "max_tokens must be a whole number"),
    ("temperature", "hot", "temperature must be a number in [0, 100], got 'hot'"),
    ("temperature", True, "temperature must be a number"),
    ("stop", ["ok", 5], "stop[1] must be a string of 1 to 1,000 characters, got 5"),
    ("stop", [""], "stop[0] must be a string"),
    ("stop", "END", "stop must be a list of at most 16 strings"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_SETTINGS)
def test_bad_sampling_settings_are_refused_naming_field_and_range(
    tiny_engine, field: str, value: object, message: str
) -> None:
    settings = SamplingSettings(max_tokens=2)
    setattr(settings, field, value)
    result = tiny_engine.chat(ChatRequest([{"role": "user", "content": "hi"}], settings))
    assert result.error_kind == "input"
    assert message in (result.error or ""), result.error


def test_edge_values_inside_the_ranges_are_accepted() -> None:
    SamplingSettings(temperature=0, top_p=1, top_k=0, min_p=0, seed=0, max_tokens=1).validate()
    SamplingSettings(temperature=100, repetition_penalty=100, seed=2**64 - 1).validate()
