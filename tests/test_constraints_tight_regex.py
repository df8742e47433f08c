"""One pattern for "matches these, none of those" (issue 38): `not` over a `pattern`
enforced by a regex complement, combined with the string's own pattern into one regex.

Each result is checked here with `re` (as jsonschema searches) on strings around it, and
with llguidance on the grammar it compiles; patterns beyond what the algebra reads the way
Python does are refused rather than guessed.
"""

from __future__ import annotations

import json
import re

import pytest
from llguidance import LLMatcher, LLTokenizer
from tight_oracle import validator

from engine.constraints.sources import json_schema_constraint
from engine.constraints.tight import tighten
from engine.constraints.tight_regex import meet
from engine.constraints.validate import validate_constraint

IGNORED = "not enforced (ignored)"
PROBES = ["", "a", "A", "abc", "xabcx", "ab", "b", "a5b", "a5", "5b", "ba", "zz", "a1b2", "a1"]
PROBES += ["a\n", "abc\n", "é", "a-b", "9", "99", "a99b", "t" * 10, "A a", "\n"]

# (patterns to match, patterns to exclude)
CASES = [
    ([], ["A"]),
    ([], ["a5b"]),
    ([], ["^[ab]"]),
    ([], ["^a*$"]),
    ([], ["99"]),
    ([], ["^([a-z][0-9])+$"]),
    (["^[a-z]+$"], ["abc"]),
    (["[a-c]"], ["^b", "c$"]),
]


def searched(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


@pytest.mark.parametrize(("wanted", "excluded"), CASES)
def test_the_pattern_matches_exactly_the_strings_asked_for(wanted, excluded):
    regex = meet(wanted, excluded)
    assert regex is not None and regex.exact
    assert regex.pattern.startswith("^(?:") and regex.pattern.endswith(")$")
    for text in PROBES:
        asked = all(searched(p, text) for p in wanted) and not any(
            searched(q, text) for q in excluded
        )
        assert searched(regex.pattern, text) == asked, (regex.pattern, text)


@pytest.mark.parametrize(
    "pattern",
    [
        "\\d",  # Unicode digits to Python, ASCII ones to the algebra
        "\\w+",
        "(?=a)b",  # lookaround
        "a^b",  # an anchor inside
        "^a|b$",  # anchors on one branch each
        "((c1d3g3).{4,8}){6,6}",  # an automaton too large to build in time
        "[[a]",  # a set Python will read as nested
    ],
)
def test_patterns_the_algebra_would_misread_or_not_finish_are_refused(pattern):
    assert meet([], [pattern]) is None


def test_a_string_whose_every_completion_ends_on_a_line_break_is_narrowed_not_widened():
    """Python's `$` also matches before a final "\\n": where that would let the result
    accept what the patterns refuse, those strings are dropped (and the result says it
    is not exact) or the rewrite is refused."""
    regex = meet([], ["a[^a-z]"])  # "ba" is fine, but Python reads "ba\n" as "ba" too
    assert regex is not None and not regex.exact
    for text in ("ab", "b", "ba", "ba\n", "a-", "a\n", "xyz"):
        if searched(regex.pattern, text):
            assert not searched("a[^a-z]", text), text
    assert searched(regex.pattern, "ab") and not searched(regex.pattern, "ba")
    assert meet([], ["[^a-z]"]) is None  # every string it keeps would take a final "\n"


def grammar_accepts(grammar: str, value: object) -> bool:
    matcher = LLMatcher(LLTokenizer("byte"), grammar, log_level=0)
    text = json.dumps(value, separators=(",", ":")).encode()
    return bool(matcher.consume_tokens(list(text)) and matcher.is_accepting())


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (
            {"type": "string", "pattern": "^[a-z]+$", "not": {"pattern": "abc"}},
            ["abd", "xyz"],
            ["xabcx", "abc"],
        ),
        ({"type": "string", "not": {"type": "string", "pattern": "a5b"}}, ["a5", "b"], ["a5b"]),
        (
            {"type": ["string", "integer"], "not": {"pattern": "^[ab]"}},
            ["c", "xab"],
            ["ab", "b", 3],  # a number satisfies `pattern`, so it fails the `not`
        ),
    ],
)
def test_a_not_over_a_pattern_is_enforced_as_one_regex(schema, good, bad):
    tight = tighten(schema)
    assert "not" not in json.dumps(tight.schema), tight.schema
    report = validate_constraint(json_schema_constraint(schema))
    assert report.ok and report.grammar is not None, report.errors
    assert not [w for w in report.warnings if IGNORED in str(w)], report.warnings
    check = validator(tight.schema)
    for value in good:
        assert validator(schema).is_valid(value) and check.is_valid(value), value
        assert grammar_accepts(report.grammar, value), value
    for value in bad:
        assert not check.is_valid(value), value
        assert not grammar_accepts(report.grammar, value), value
    if schema.get("type") == "string":  # one pattern at the string, not two that overlap
        assert json.dumps(tight.schema).count('"pattern"') == 1, tight.schema
