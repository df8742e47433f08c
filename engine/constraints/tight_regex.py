"""Regular-expression algebra for the tight rewrite: one pattern for "matches these and
none of those", which llguidance enforces where it ignores `not`.

JSON Schema searches a string with a `pattern` (Python's `re.search`, as jsonschema reads
it). `meet(patterns, negated)` builds one pattern, anchored at both ends and without
lookaround (llguidance reads no lookaround), for strings that every one of `patterns` finds
a match in and none of `negated` does: `not: {pattern: "[^a-z ]"}` becomes `^(?:[ a-z]*)$`.
One regex per string, rather than several that overlap, also keeps llguidance's lexer
from running out of states mid-reply (it intersects overlapping regexes lazily).

The algebra is greenery's (finite automata: complement, intersection), on the subset of
regex syntax it reads as Python does: literals, classes spelled out (`[a-z]`, not `\\w` or
`\\d`, which are Unicode-wide in Python and ASCII in greenery), `.`, groups, alternation,
quantifiers, and `^`/`$` only at the pattern's ends. Python's `$` also matches before a
final line break, so the result keeps only strings `t` whose `t + "\\n"` is in the set too:
`^(?:R)$` then means the same set to Python and to llguidance, or (where that drops
strings) a subset of it, said by `Regex.exact`. Patterns beyond that subset, automata past
`MAX_STATES` and results past `MAX_LENGTH` give None; every result is spot-checked with
`re` against the patterns it came from before it is returned.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from itertools import islice
from typing import Any

from greenery import Fsm, parse
from greenery.parse import NoMatch
from greenery.rxelems import from_fsm

__all__ = ["MAX_LENGTH", "MAX_STATES", "NOTHING", "Regex", "meet", "overlap"]

MAX_PATTERN = 200  # characters of a pattern read
MAX_STATES = 64  # states of any automaton built on the way
MAX_ATOMS = 8  # characters a pattern spells, bounded repeats unrolled (automata grow 2^n)
MAX_LENGTH = 2000  # characters of a result
MAX_REPEAT = 64  # the largest bound a `{m,n}` may have
_SAMPLES = 24  # strings of each side spot-checked
MAX_SAMPLE_LENGTH = 12  # characters of a spot-checked string
MAX_FINAL_STATES = 12  # states of the automaton spelled back as a regex (slow past that)
_PICKS = tuple("a0 A_.\n-~é" + "\x00")
_SHORTHAND = {
    "\\d": "[0-9]",
    "\\D": "[^0-9]",
    "\\w": "[0-9A-Z_a-z]",
    "\\W": "[^0-9A-Z_a-z]",
    "\\s": "[\\t\\n\\v\\f\\r ]",
    "\\S": "[^\\t\\n\\v\\f\\r ]",
}


@dataclass(frozen=True)
class Regex:
    """An anchored pattern; `exact` when it matches exactly the strings asked for (else a
    subset of them)."""

    pattern: str
    exact: bool


def meet(patterns: list[str], negated: list[str], *, empty: bool = False) -> Regex | None:
    """One pattern for the strings every one of `patterns` finds a match in and none of
    `negated` does (both searched, as JSON Schema does); None where that cannot be built
    within the bounds (see the module doc). `empty`: a set found empty gives `NOTHING`
    (an exact answer: no string) rather than None. Answers are kept (spelling a regex
    back takes greenery up to seconds, and a schema is tightened more than once)."""
    if not patterns and not negated:
        return None
    found = _cached_meet(tuple(patterns), tuple(negated))
    return None if found is NOTHING and not empty else found


@functools.lru_cache(maxsize=256)
def _cached_meet(patterns: tuple[str, ...], negated: tuple[str, ...]) -> Regex | None:
    try:
        return _meet(list(patterns), list(negated))
    except _Empty:
        return NOTHING
    except (NoMatch, RecursionError, ValueError, KeyError, TypeError, OverflowError):
        return None  # greenery's limits, not a pattern's meaning


def overlap(a: str, b: str) -> bool | None:
    """Whether some string has a match of both `a` and `b` (searched, as JSON Schema
    does); None where greenery cannot tell. Cheap: no regex is spelled back."""
    try:
        one, two = _language(a), _language(b)
        if one is None or two is None:
            return None
        return not (one & two).empty()
    except (NoMatch, RecursionError, ValueError, KeyError, TypeError, OverflowError):
        return None


class _Empty(Exception):
    """No string is in the set asked for."""


# `meet(..., empty=True)`'s answer for an empty set (no pattern stands for it).
NOTHING = Regex("", exact=True)


def _meet(patterns: list[str], negated: list[str]) -> Regex | None:
    found: Fsm | None = None
    for text, wanted in [*((p, True) for p in patterns), *((q, False) for q in negated)]:
        language = _language(text)
        if language is None:
            return None
        part = language if wanted else language.everythingbut()
        if found is not None and len(found.states) * len(part.states) > MAX_STATES * 16:
            return None
        found = part if found is None else found & part
        if len(found.states) > MAX_STATES:
            return None
    assert found is not None
    # Python's `$` also matches before a final "\n": keep the strings t with t + "\n" in
    # the set too, so that `^(?:R)$` stays inside it
    ended = found.reversed().derive("\n").reversed()
    kept = (found & ended).reduce()
    if found.empty():
        raise _Empty
    if len(kept.states) > MAX_FINAL_STATES or kept.empty():
        return None
    exact = (kept | (kept + _line_break())).equivalent(found)
    body = _render(str(from_fsm(kept).reduce()))
    if body is None or len(body) > MAX_LENGTH:
        return None
    pattern = f"^(?:{body})$"
    if not _agrees(pattern, kept, found, patterns, negated):
        return None
    return Regex(pattern, exact)


def _language(pattern: str) -> Fsm | None:
    """The strings `re.search(pattern, s)` finds a match in, as an automaton; None for a
    pattern outside the subset greenery reads as Python does."""
    if len(pattern) > MAX_PATTERN:
        return None
    core = pattern
    start = core.startswith("^")
    if start:
        core = core[1:]
    end = core.endswith("$") and _unescaped_end(core)
    if end:
        core = core[:-1]
    plain = _plain(core, anchored=start or end)
    if plain is None or _atoms(core) > MAX_ATOMS:
        return None
    text = ("" if start else ".*") + f"({plain})" + ("\\n?" if end else ".*")
    fsm = parse(text).to_fsm()
    return fsm if len(fsm.states) <= MAX_STATES else None


def _unescaped_end(core: str) -> bool:
    """Whether the `$` ending `core` is an anchor (not the escaped `\\$`)."""
    slashes = len(core[:-1]) - len(core[:-1].rstrip("\\"))
    return slashes % 2 == 0


def _plain(core: str, anchored: bool) -> str | None:
    """`core` with `.` spelled as Python reads it (anything but "\\n"), or None where it
    uses what greenery reads differently or not at all."""
    out: list[str] = []
    in_class = False
    depth = 0
    i = 0
    while i < len(core):
        c = core[i]
        if c == "\\":
            if i + 1 >= len(core) or core[i + 1].isalnum():
                return None  # \d, \w, \b, \1, \x..: Unicode-wide or unknown to greenery
            out.append(core[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" or core[i : i + 2] in ("&&", "--", "~~", "||"):
                return None  # set operations to come in Python
            if c == "-" and (
                core[i + 1 : i + 2] == "]" or core[i - 1] == "[" or core[i - 2 : i] == "[^"
            ):
                out.append("\\-")  # a literal dash at a class's edge: greenery wants it escaped
                i += 1
                continue
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if core[i + 1 : i + 2] == "]" or core[i + 1 : i + 3] == "^]":
                return None  # `[]…]`: a bracket first, read differently
        elif c in "^$":
            return None  # an anchor inside the pattern
        elif c == "(":
            if core[i + 1 : i + 2] == "?":
                return None  # lookaround, flags, named groups
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0 and anchored:
            return None  # `^a|b$` anchors each branch at one end only
        elif c == "{" and not _bounded_repeat(core, i):
            return None
        elif c == ".":
            out.append("[^\\n]")
            i += 1
            continue
        out.append(c)
        i += 1
    return None if in_class or depth else "".join(out)


def _atoms(core: str) -> int:
    """How many characters `core` spells, each bounded repeat unrolled (an unbounded one
    counted once): what the automaton of a search for it grows with."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(core)
    except (ImportError, re.error, RecursionError, OverflowError):
        return MAX_ATOMS + 1
    return _count(list(parsed))


def _count(items: list[Any]) -> int:
    total = 0
    for op, arg in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            times = high if isinstance(high, int) and high < MAX_REPEAT + 1 else max(low, 1)
            total += _count(list(sub)) * times
        elif name == "SUBPATTERN":
            total += _count(list(arg[-1]))
        elif name == "BRANCH":
            total += sum(_count(list(branch)) for branch in arg[1])
        elif name != "AT":
            total += 1
        if total > MAX_ATOMS:
            return total
    return total


def _bounded_repeat(core: str, i: int) -> bool:
    found = re.match(r"\{(\d+)(,(\d*))?\}", core[i:])
    if found is None:
        return False  # a literal brace: greenery may read it otherwise
    high = found.group(3)
    return int(found.group(1)) <= MAX_REPEAT and (not high or int(high) <= MAX_REPEAT)


def _line_break() -> Fsm:
    return parse("\\n").to_fsm()


def _render(body: str) -> str | None:
    """greenery's regex text as Python and llguidance read the same: its `.` (any
    character) as `[\\s\\S]`, its shorthand classes (ASCII) spelled out."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            pair = body[i : i + 2]
            if pair in _SHORTHAND:
                if in_class:
                    return None
                out.append(_SHORTHAND[pair])
            else:
                out.append(pair)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == ".":
            c = "[\\s\\S]"
        out.append(c)
        i += 1
    return "".join(out)


def _agrees(pattern: str, kept: Fsm, found: Fsm, patterns: list[str], negated: list[str]) -> bool:
    """Spot-check the result with `re`: strings of the set it keeps match it and are what
    was asked for; strings outside the asked-for set do not match it."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False

    def asked(s: str) -> bool:
        return all(re.search(p, s) for p in patterns) and not any(re.search(q, s) for q in negated)

    for s in islice(_strings(kept), _SAMPLES):
        if not compiled.search(s) or not asked(s):
            return False
    for s in islice(_strings(found.everythingbut()), _SAMPLES):
        if compiled.search(s) and not asked(s):
            return False
    return True


def _strings(fsm: Fsm) -> list[str]:
    """A few short strings of `fsm`'s language (breadth first, one character standing for
    each class of the alphabet)."""
    found: list[str] = []
    frontier: list[tuple[object, str]] = [(fsm.initial, "")]
    for _ in range(MAX_SAMPLE_LENGTH + 1):
        following: list[tuple[object, str]] = []
        for state, text in frontier:
            if state in fsm.finals:
                found.append(text)
                if len(found) >= _SAMPLES:
                    return found
            for charclass, target in fsm.map.get(state, {}).items():
                ch = _pick(charclass)
                if ch is not None and len(following) < _SAMPLES * 8:
                    following.append((target, text + ch))
        frontier = following
    return found


def _pick(charclass: Any) -> str | None:
    """A character of `charclass` (a greenery Charclass), preferring plain ones."""
    for ch in _PICKS:
        inside = any(low <= ord(ch) <= high for low, high in charclass.ord_ranges)
        if inside != charclass.negated:
            return ch
    ranges = charclass.ord_ranges
    return chr(ranges[0][0]) if ranges and not charclass.negated else None
