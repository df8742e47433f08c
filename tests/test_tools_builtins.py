"""Built-in tools: their schemas load as valid tools, and they compute without `eval`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.tools import ToolDefinitionError, validate_tools
from engine.tools.builtins import (
    BUILTIN_NAMES,
    BuiltinError,
    builtin_tools,
    calculate,
    convert_units,
    current_datetime,
    run_builtin,
)


def test_builtin_schemas_are_valid_tools() -> None:
    specs = validate_tools(builtin_tools())
    assert [s.name for s in specs] == list(BUILTIN_NAMES)
    assert all(s.description for s in specs)
    with pytest.raises(ToolDefinitionError, match="not a built-in tool"):
        builtin_tools(["shell"])


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("(3 + 4) * 2", "14"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("2 ** 10", "1024"),
        ("2^3", "8"),
        ("-5 % 3", "1"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(pi, 3)", "3.142"),
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("1e3 * 2", "2000"),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, result: str) -> None:
    assert calculate(expression) == result


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('echo hi')", "unsupported"),
        ("open('/etc/passwd').read()", "unsupported"),
        ("(1).__class__", "unsupported"),
        ("x + 1", "unsupported"),
        ("9 ** 9 ** 9", "exponent is too large"),
        ("10 ** 999 * 10 ** 999", "too large"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("2 +", "not an arithmetic expression"),
        ("", "non-empty"),
        ("1" * 600, "too long"),
        ("True + 1", "unsupported"),
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str, message: str) -> None:
    with pytest.raises(BuiltinError, match=message):
        calculate(expression)


def test_current_datetime_in_a_named_zone() -> None:
    moment = datetime(2024, 7, 1, 12, 30, tzinfo=UTC)
    assert current_datetime("Europe/Paris", now=moment) == (
        "2024-07-01T14:30:00+02:00 (Monday, CEST)"
    )
    assert current_datetime("UTC", now=moment).startswith("2024-07-01T12:30:00+00:00")
    local = datetime.fromisoformat(current_datetime().split(" (")[0])  # local time, ISO 8601
    assert abs((local - datetime.now(UTC)).total_seconds()) < 60
    with pytest.raises(BuiltinError, match='unknown time zone "Mars/Olympus"'):
        current_datetime("Mars/Olympus")


def test_a_zone_named_by_its_city_under_another_region_says_which_zone_answered() -> None:
    """The default model asks for "America/Paris": the only Paris answers, and says so;
    a city two zones share, or none, stays an error."""
    moment = datetime(2024, 7, 1, 12, 30, tzinfo=UTC)
    assert current_datetime("America/Paris", now=moment) == (
        "2024-07-01T14:30:00+02:00 (Monday, CEST; Europe/Paris, the only zone named 'Paris')"
    )
    with pytest.raises(BuiltinError, match='unknown time zone "Asia/Atlantis"'):
        current_datetime("Asia/Atlantis")
    # America/Indianapolis and America/Indiana/Indianapolis: no one zone to choose
    with pytest.raises(BuiltinError, match='unknown time zone "Europe/Indianapolis"'):
        current_datetime("Europe/Indianapolis")


def test_the_weekday_is_english_whatever_the_locale() -> None:
    """The model reads the weekday: a German desktop (LC_TIME set by Qt at start) must not
    turn Monday into Montag."""
    import locale

    saved = locale.setlocale(locale.LC_TIME)
    try:
        try:
            locale.setlocale(locale.LC_TIME, "de_DE.UTF-8")
        except locale.Error:
            pytest.skip("the de_DE.UTF-8 locale is not installed on this machine")
        assert datetime(2024, 7, 1).strftime("%A") == "Montag"  # the locale took effect
        moment = datetime(2024, 7, 1, 12, 30, tzinfo=UTC)
        assert "(Monday, CEST)" in current_datetime("Europe/Paris", now=moment)
    finally:
        locale.setlocale(locale.LC_TIME, saved)


@pytest.mark.parametrize(
    ("value", "src", "dst", "result"),
    [
        (10, "km", "mi", "10 km = 6.21371 mi"),
        (100, "C", "F", "100 C = 212 F"),
        (32, "F", "C", "32 F = 0 C"),
        (0, "K", "C", "0 K = -273.15 C"),
        (2, "lb", "kg", "2 lb = 0.907185 kg"),
        (1, "gal", "l", "1 gal = 3.78541 l"),
        (90, "min", "h", "90 min = 1.5 h"),
        (100, "km/h", "m/s", "100 km/h = 27.7778 m/s"),
    ],
)
def test_unit_conversion(value: float, src: str, dst: str, result: str) -> None:
    assert convert_units(value, src, dst) == result


def test_unit_conversion_refuses_mismatched_kinds() -> None:
    with pytest.raises(BuiltinError, match=r"cannot convert length \(km\) to mass \(kg\)"):
        convert_units(1, "km", "kg")
    with pytest.raises(BuiltinError, match="cannot convert C to m"):
        convert_units(1, "C", "m")
    with pytest.raises(BuiltinError, match='unknown unit "parsec"'):
        convert_units(1, "parsec", "m")


def test_run_builtin_returns_text_for_the_tool_message() -> None:
    assert run_builtin("calculator", {"expression": "6 * 7"}) == "42"
    assert run_builtin("convert_units", {"value": 1, "from_unit": "m", "to_unit": "cm"}) == (
        "1 m = 100 cm"
    )
    assert "T" in run_builtin("current_datetime", {})
    assert run_builtin("calculator", {"expression": "import os"}).startswith("error: ")
    assert run_builtin("calculator", "6*7").startswith("error: ")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="not a built-in tool"):
        run_builtin("rm", {})
