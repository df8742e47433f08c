"""GBNF (llama.cpp) grammars to llguidance's Lark, with every error at its line and column.

llguidance's converter reports syntax errors with a position but raises bare Exceptions
without one for a rule used and never defined, two rules whose names convert to the same
Lark name, and a missing `root` rule. Those are found again in the source here, so the
user is told where to look.
"""

from __future__ import annotations

import re

from llguidance import LLMatcher

from engine.constraints import ConstraintError, Diagnostic
from engine.constraints.limits import check_lark

# What holds no rule names: "strings", [character classes], # comments.
_SKIP = re.compile(r'"(?:[^"\\\n]|\\.)*"|\[(?:[^\]\\\n]|\\.)*\]|#[^\n]*')
_DEFINITION = re.compile(r"^[ \t]*([A-Za-z][\w-]*)[ \t]*::=", re.MULTILINE)
_NOT_FOUND = re.compile(r"Rule '([^']+)' not found")
_EXISTS = re.compile(r"Rule '([^']+)' already exists")


def gbnf_to_grammar(source: str, label: str = "GBNF grammar") -> str:
    """The llguidance grammar for the GBNF text `source`; ConstraintError with the line and
    column of the problem when it does not convert, or when it is too deep to compile."""
    from llguidance.gbnf_to_lark import GbnfToLarkError, any_to_lark

    try:
        lark = any_to_lark(source)
    except GbnfToLarkError as exc:
        line, column = line_column(source, exc.pos.pos)
        raise _error(label, str(exc).split(" at line ")[0], line, column) from exc
    except RecursionError as exc:
        raise _error(label, "invalid GBNF: the grammar is nested too deeply") from exc
    except Exception as exc:  # the converter raises bare Exceptions for these
        message, where_line, where_column = _locate(source, str(exc))
        raise _error(label, message, where_line, where_column) from exc
    check_lark(lark, label)
    return LLMatcher.grammar_from_lark(lark)


def line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _error(
    label: str, message: str, line: int | None = None, column: int | None = None
) -> ConstraintError:
    diag = Diagnostic(message, line, column)
    return ConstraintError(f"{label}: {diag}", [diag])


def _blank(text: str) -> str:
    """`text` with strings, character classes and comments blanked (offsets unchanged)."""
    return _SKIP.sub(lambda m: " " * len(m.group(0)), text)


def _lark_name(name: str) -> str:
    """The name the converter gives a GBNF rule (its case aside)."""
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name.replace("-", "_")).lower()


def _locate(source: str, message: str) -> tuple[str, int | None, int | None]:
    """(message, line, column) for one of the converter's position-less errors."""
    plain = _blank(source)
    if found := _NOT_FOUND.search(message):
        name = found.group(1)
        use = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])(?![ \t]*::=)")
        body = plain.find("::=")
        hit = use.search(plain, body + 3 if body >= 0 else 0)
        if hit is None:
            return f"rule '{name}' is used but never defined", None, None
        return (f"rule '{name}' is used but never defined", *line_column(source, hit.start()))
    if found := _EXISTS.search(message):
        wanted = found.group(1).lower()
        same = [d for d in _DEFINITION.finditer(plain) if _lark_name(d.group(1)) == wanted]
        if len(same) >= 2:
            first = same[0].group(1)
            line, column = line_column(source, same[1].start(1))
            return (
                f"rule '{same[1].group(1)}' clashes with rule '{first}' (both become "
                f"'{wanted}'; rename one)",
                line,
                column,
            )
        return f"invalid GBNF: {message}", None, None
    if "No 'root' rule" in message:
        return "no 'root' rule: a GBNF grammar starts at the rule named root", 1, 1
    return f"invalid GBNF: {message}", None, None
