"""Safe built-in tools for trying tool calling without writing code.

Each tool's schema lives in `resources/tools/<name>.json`; `run_builtin` executes a call
and returns the text for the `tool` message. Nothing here evaluates code: the calculator
walks a parsed `ast` of arithmetic only. Arguments come from a model (or whoever wrote the
conversation), so every one is checked before use: the calculator's powers and `round`'s
digits are bounded before they are computed (a result of more than 1e300 is refused
without computing it), an evaluation stops after 0.5 s between steps, and arguments of the
wrong type give an "error: ..." result, never an exception.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import operator
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from engine.tools.definitions import ToolDefinitionError
from engine.types import ToolDefinition

RESOURCES = Path(__file__).resolve().parents[2] / "resources" / "tools"
BUILTIN_NAMES = ("calculator", "current_datetime", "convert_units")

_MAX_EXPRESSION = 500
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 1e300
_MAX_DIGITS = 308  # round(x, n): |n| beyond a float's range would only burn time
_MAX_SECONDS = 0.5
_MAX_NAME = 100  # time zone and unit names


class BuiltinError(ValueError):
    """A built-in tool was called with arguments it cannot use."""


def builtin_tools(names: tuple[str, ...] | list[str] = BUILTIN_NAMES) -> list[ToolDefinition]:
    """The OpenAI-format definitions of the named built-in tools, read from resources/."""
    tools: list[ToolDefinition] = []
    for name in names:
        if name not in BUILTIN_NAMES:
            raise ToolDefinitionError(
                f'"{name}" is not a built-in tool ({", ".join(BUILTIN_NAMES)})'
            )
        tools.append(json.loads((RESOURCES / f"{name}.json").read_text(encoding="utf-8")))
    return tools


# --- calculator ---------------------------------------------------------------------------


def _pow(base: Any, exponent: Any) -> Any:
    """`base ** exponent`, refused before computing when the result would be too large."""
    if abs(exponent) > _MAX_EXPONENT:
        raise BuiltinError("the exponent is too large")
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > 300:
        raise BuiltinError("the result is too large")
    return operator.pow(base, exponent)


def _round(value: Any, digits: Any = None) -> Any:
    if digits is None:
        return round(value)
    if isinstance(digits, bool) or not isinstance(digits, int):
        raise BuiltinError("round's digits must be a whole number")
    if abs(digits) > _MAX_DIGITS:
        raise BuiltinError(f"round's digits must be between -{_MAX_DIGITS} and {_MAX_DIGITS}")
    return round(value, digits)


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _check(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BuiltinError("the result is not a number")
    if abs(value) > _MAX_MAGNITUDE:
        raise BuiltinError("the result is too large")
    return value


def _eval(node: ast.AST, deadline: float) -> Any:
    if time.monotonic() > deadline:
        raise BuiltinError("the expression takes too long to evaluate")
    if isinstance(node, ast.Expression):
        return _eval(node.body, deadline)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return _check(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, deadline), _eval(node.right, deadline)
        return _check(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand, deadline)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _check(_FUNCTIONS[node.func.id](*[_eval(a, deadline) for a in node.args]))
    raise BuiltinError(f"unsupported element in the expression: {ast.dump(node)[:60]}")


def calculate(expression: str) -> str:
    """Evaluate arithmetic in `expression` (no names, attributes or calls beyond the list)."""
    if not isinstance(expression, str) or not expression.strip():
        raise BuiltinError("expression must be a non-empty string")
    if len(expression) > _MAX_EXPRESSION:
        raise BuiltinError("the expression is too long")
    try:
        tree = ast.parse(expression.strip().replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise BuiltinError(f"not an arithmetic expression: {exc.msg}") from None
    try:
        value = _eval(tree, time.monotonic() + _MAX_SECONDS)
    except ZeroDivisionError:
        raise BuiltinError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as exc:
        if isinstance(exc, BuiltinError):
            raise
        raise BuiltinError(str(exc)) from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return repr(value) if isinstance(value, float) else str(value)


# --- date and time ------------------------------------------------------------------------


# The weekday in English whatever the machine's locale: `strftime("%A")` follows LC_TIME,
# which Qt sets from the environment once the app starts ("Montag" under de_DE).
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def current_datetime(timezone: str | None = None, now: datetime | None = None) -> str:
    """The current date and time as ISO 8601 with the weekday and zone name."""
    if timezone is not None and not isinstance(timezone, str):
        raise BuiltinError("timezone must be a string, such as Europe/Paris")
    if timezone and len(timezone) > _MAX_NAME:
        raise BuiltinError(f"unknown time zone (longer than {_MAX_NAME} characters)")
    read_as = ""
    if timezone:
        zone = _zone(timezone)
        if zone.key != timezone:  # say which zone answered: the model named another
            read_as = f"; {zone.key}, the only zone named {timezone.rsplit('/', 1)[-1]!r}"
        moment = (now or datetime.now(zone)).astimezone(zone)
    else:
        moment = (now or datetime.now()).astimezone()
    weekday = _WEEKDAYS[moment.weekday()]
    return f"{moment.isoformat(timespec='seconds')} ({weekday}, {moment.tzname()}{read_as})"


def _zone(name: str) -> ZoneInfo:
    """The zone `name` names; failing that, the one zone whose city is its last part (a
    small model writes "America/Paris" for Paris: Europe/Paris is the only Paris)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    city = name.rsplit("/", 1)[-1].strip().replace(" ", "_").lower()
    named = [key for key in _zone_keys() if key.rsplit("/", 1)[-1].lower() == city]
    if len(named) != 1:
        raise BuiltinError(f'unknown time zone "{name}"')
    return ZoneInfo(named[0])


@functools.cache
def _zone_keys() -> tuple[str, ...]:
    return tuple(sorted(available_timezones()))


# --- unit conversion ----------------------------------------------------------------------

# Factor to the base unit of each kind (m, kg, l, s, m/s).
_UNITS: dict[str, tuple[str, float]] = {
    "mm": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "m": ("length", 1.0),
    "km": ("length", 1e3),
    "in": ("length", 0.0254),
    "ft": ("length", 0.3048),
    "yd": ("length", 0.9144),
    "mi": ("length", 1609.344),
    "mg": ("mass", 1e-6),
    "g": ("mass", 1e-3),
    "kg": ("mass", 1.0),
    "t": ("mass", 1e3),
    "oz": ("mass", 0.028349523125),
    "lb": ("mass", 0.45359237),
    "ml": ("volume", 1e-3),
    "l": ("volume", 1.0),
    "tsp": ("volume", 0.00492892159375),
    "tbsp": ("volume", 0.01478676478125),
    "cup": ("volume", 0.2365882365),
    "pt": ("volume", 0.473176473),
    "qt": ("volume", 0.946352946),
    "gal": ("volume", 3.785411784),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "week": ("time", 604800.0),
    "m/s": ("speed", 1.0),
    "km/h": ("speed", 1 / 3.6),
    "mph": ("speed", 0.44704),
    "kn": ("speed", 1852 / 3600),
}
_TO_KELVIN = {
    "C": lambda v: v + 273.15,
    "F": lambda v: (v - 32) * 5 / 9 + 273.15,
    "K": lambda v: v,
}
_FROM_KELVIN = {
    "C": lambda k: k - 273.15,
    "F": lambda k: (k - 273.15) * 9 / 5 + 32,
    "K": lambda k: k,
}


def convert_units(value: object, from_unit: str, to_unit: str) -> str:
    """Convert `value` from one unit to another of the same kind."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BuiltinError("value must be a number")
    if not isinstance(from_unit, str) or not isinstance(to_unit, str):
        raise BuiltinError("from_unit and to_unit must be unit names, such as km or lb")
    try:
        value = float(value)
    except OverflowError:
        raise BuiltinError("value is too large") from None
    if not math.isfinite(value) or abs(value) > _MAX_MAGNITUDE:
        raise BuiltinError("value must be a finite number")
    if from_unit in _TO_KELVIN or to_unit in _TO_KELVIN:
        if from_unit not in _TO_KELVIN or to_unit not in _TO_KELVIN:
            raise BuiltinError(f"cannot convert {from_unit} to {to_unit}")
        result = _FROM_KELVIN[to_unit](_TO_KELVIN[from_unit](value))
    else:
        if from_unit not in _UNITS or to_unit not in _UNITS:
            unknown = from_unit if from_unit not in _UNITS else to_unit
            raise BuiltinError(f'unknown unit "{unknown[:_MAX_NAME]}"')
        (kind_a, factor_a), (kind_b, factor_b) = _UNITS[from_unit], _UNITS[to_unit]
        if kind_a != kind_b:
            raise BuiltinError(f"cannot convert {kind_a} ({from_unit}) to {kind_b} ({to_unit})")
        result = value * factor_a / factor_b
    return f"{value:g} {from_unit} = {round(result, 6):g} {to_unit}"


def run_builtin(name: str, arguments: dict[str, Any]) -> str:
    """Run a built-in tool; the result (or "error: ...") is the text for the tool message."""
    if not isinstance(arguments, dict):
        return "error: arguments must be an object"
    try:
        if name == "calculator":
            return calculate(arguments.get("expression", ""))
        if name == "current_datetime":
            return current_datetime(arguments.get("timezone"))
        if name == "convert_units":
            return convert_units(
                arguments.get("value"), arguments.get("from_unit", ""), arguments.get("to_unit", "")
            )
    except BuiltinError as exc:
        return f"error: {exc}"
    raise ToolDefinitionError(f'"{name}" is not a built-in tool ({", ".join(BUILTIN_NAMES)})')
