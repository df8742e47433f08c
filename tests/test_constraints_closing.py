"""Closing within the budget: a constrained reply that would run past max_tokens, or loop
inside a value, ends valid and says so; one that ends on its own is untouched; a grammar
with no ending in reach is reported incomplete with the reason. The tiny random model
rambles inside strings, which makes it a good subject."""

from __future__ import annotations

import json

import jsonschema
import pytest

from engine.constraints.closing import ClosingPolicy, Nesting, RepetitionDetector
from engine.constraints.sources import json_schema_constraint
from engine.constraints.validate import compile_constraint
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings, StopReason

USER = [{"role": "user", "content": "Give me JSON."}]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "n": {"type": "integer"},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
    },
    "required": ["name", "tags", "n", "code"],
}


def chat(engine, constraint, max_tokens, **options):
    settings = SamplingSettings(temperature=0.0, max_tokens=max_tokens)
    return engine.chat(ChatRequest(USER, settings, constraint=constraint, **options))


@pytest.fixture(scope="module")
def lltok(tiny_model):
    from engine.constraints.tokenizer import ll_tokenizer

    return ll_tokenizer(tiny_model[1], (0, 2))


@pytest.mark.parametrize(
    "prefix", ["", "{", '{"name":"Bob', '{"name":"Bob","tags":["x', '{"name":"a\\']
)
def test_the_policy_ends_any_prefix_validly(lltok, prefix):
    spec = compile_constraint(json_schema_constraint(SCHEMA))
    matcher = spec.compiled.matcher(lltok)
    assert matcher.consume_tokens(lltok.tokenize_str(prefix))
    nesting = Nesting()
    nesting.feed(prefix.encode())
    ending = ClosingPolicy.for_tokenizer(lltok).ending(matcher, 80, nesting)
    assert ending is not None and len(ending) < 45
    assert not matcher.is_accepting()  # the walk used a copy
    text = prefix + lltok.decode_str(ending)
    jsonschema.validate(json.loads(text), SCHEMA)
    assert matcher.consume_tokens(ending) and matcher.is_accepting()


@pytest.mark.parametrize("density", [1.0, 0.5, 0.01, 0.0002, 0.0])
def test_the_walks_candidates_are_the_shortest_allowed_tokens(lltok, density):
    """The shortest allowed tokens, read in length order a chunk at a time, are exactly
    those a sort of every allowed token by length gives (ties by id), however few the mask
    allows."""
    import numpy as np

    from engine.constraints.closing import CANDIDATES

    policy = ClosingPolicy.for_tokenizer(lltok)
    rng = np.random.default_rng(int(density * 1e4))
    bits = rng.random(policy.n_words * 32) < density
    words = np.packbits(bits, bitorder="little").view(np.int32)
    allowed = np.flatnonzero(bits[: policy.lengths.size])
    want = allowed[np.argsort(policy.lengths[allowed], kind="stable")[:CANDIDATES]]
    assert policy._shortest(words).tolist() == want.tolist()


def test_a_long_walk_gives_up_when_the_reply_is_cancelled(lltok):
    """An ending thousands of tokens long takes seconds to walk: a cancelled reply must not
    wait for it (Stop, or an HTTP client hanging up, ends the reply at once)."""
    from engine.constraints.sources import regex_constraint

    spec = compile_constraint(regex_constraint("[a-z ]{2500,}"))
    policy = ClosingPolicy.for_tokenizer(lltok)
    asks: list[int] = []

    def cancelled() -> bool:
        asks.append(1)
        return len(asks) > 2

    assert policy.ending(spec.compiled.matcher(lltok), 3000, None, cancelled) is None
    assert len(asks) == 3
    whole = policy.ending(spec.compiled.matcher(lltok), 3000)
    assert whole is not None and len(lltok.decode_str(whole)) >= 2500


@pytest.mark.parametrize("max_tokens", [36, 60])
def test_a_reply_that_would_run_out_is_closed_valid_within_the_budget(tiny_engine, max_tokens):
    result = chat(tiny_engine, json_schema_constraint(SCHEMA), max_tokens)
    assert not result.incomplete and result.stop_reason == StopReason.EOS, result.warnings
    assert result.closed_to_fit and result.stats.closed_to_fit
    assert result.stats.generated_tokens <= max_tokens and result.stats.closing_tokens > 0
    jsonschema.validate(json.loads(result.text), SCHEMA)
    assert result.to_dict()["closed_to_fit"] is True
    off = chat(tiny_engine, json_schema_constraint(SCHEMA), max_tokens, close_to_fit=False)
    assert off.incomplete and not off.closed_to_fit  # what the policy saves it from


def test_a_loop_inside_a_value_is_closed_and_the_stats_say_so(tiny_engine):
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    result = chat(tiny_engine, json_schema_constraint(schema), 200)
    assert result.stats.close_reason == "repetition" and result.stats.close_loops
    assert result.stats.generated_tokens < 120 and not result.incomplete
    jsonschema.validate(json.loads(result.text), schema)
    slow = chat(tiny_engine, json_schema_constraint(schema), 200, close_loops=False)
    assert slow.stats.close_reason != "repetition"
    assert slow.stats.generated_tokens > result.stats.generated_tokens


def test_no_ending_within_the_budget_is_reported_incomplete_and_why(tiny_engine):
    result = chat(tiny_engine, ConstraintSpec("regex", "(a|b){60}", "sixty"), 10)
    assert result.incomplete and not result.closed_to_fit
    assert result.stop_reason == StopReason.LENGTH
    assert any("no valid ending" in w and "max_tokens (10)" in w for w in result.warnings)


def test_replies_that_end_on_their_own_are_the_same_token_for_token(tiny_engine):
    for constraint in (
        ConstraintSpec("regex", "The answer is (yes|no)\\."),
        json_schema_constraint({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
        json_schema_constraint({"enum": ["alpha", "beta", "gamma"]}),
    ):
        on = chat(tiny_engine, constraint, 40)
        off = chat(tiny_engine, constraint, 40, close_to_fit=False)
        assert not on.closed_to_fit and not on.incomplete
        assert on.token_ids == off.token_ids and on.text == off.text


def test_the_repetition_detector_wants_many_repeats_inside_one_value():
    texts = [b"a", b"_2023", b'"', b",", b"{", b'"type":']
    nesting = Nesting()
    nesting.feed(b'{"city":"Museum')  # inside a string
    detector = RepetitionDetector(texts)
    assert not detector.feed([1] * 10, nesting)
    assert detector.feed([1] * 20, nesting)  # 30 times the same unit
    structure = RepetitionDetector(texts)
    outside = Nesting()
    assert not structure.feed([4, 5] * 20, outside)  # {"type":{"type":... opens brackets


def test_a_required_call_with_one_of_arguments_is_made_and_validates(tiny_engine):
    """tool_choice required: the rambling tiny model still yields a call, closed to fit,
    whose arguments validate against a oneOf schema."""
    parameters = {
        "type": "object",
        "properties": {
            "place": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                        "required": ["lat", "lon"],
                        "additionalProperties": False,
                    },
                ]
            }
        },
        "required": ["place"],
    }
    tool = {"type": "function", "function": {"name": "weather", "parameters": parameters}}
    settings = SamplingSettings(temperature=0.0, max_tokens=60)
    result = tiny_engine.chat(ChatRequest(USER, settings, tools=[tool], tool_choice="required"))
    assert result.error is None and not result.incomplete, result.warnings
    (call,) = result.tool_calls
    jsonschema.validate(call.arguments, parameters)


# A realistic value per format: every prefix of it is a reply cut off inside the value.
FORMATTED = {
    "email": "jane.doe-1@mail.example.org",
    "uri": "https://example.com:8080/a/b?q=1#top",
    "date": "2024-11-26",
    "date-time": "2024-11-26T13:45:30.5+01:00",
    "time": "13:45:30.25-05:00",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.168.10.254",
    "ipv6": "2001:db8::8a2e:370:7334",
    "hostname": "mail-01.example.com",
    "duration": "P1Y2M3DT4H5M6S",
}
# Every format a JSON Schema draft defines, and one nobody does.
DRAFT_FORMATS = (
    *FORMATTED,
    *("idn-email", "idn-hostname", "iri", "iri-reference", "uri-reference", "uri-template"),
    *("json-pointer", "relative-json-pointer", "regex", "color", "topic"),
)


def formatted(fmt: str, keys: tuple[str, ...] = ("v",)) -> dict:
    return {
        "type": "object",
        "properties": {k: {"type": "string", "format": fmt} for k in keys},
        "required": list(keys),
        "additionalProperties": False,
    }


def format_errors(schema: dict, value: object) -> list[str]:
    """What jsonschema finds wrong with `value`, formats checked as the schema's draft
    defines them (the catch-all FormatChecker() reads `time` as draft 3 does)."""
    validator = jsonschema.validators.validator_for(schema)
    checker = validator(schema, format_checker=validator.FORMAT_CHECKER)
    return [e.message for e in checker.iter_errors(value)]


def test_the_closing_table_knows_each_format_llguidance_enforces():
    from llguidance import LLMatcher

    from engine.constraints.formats import FORMAT_VALUES

    enforced = set()
    for fmt in DRAFT_FORMATS:
        grammar = LLMatcher.grammar_from_json_schema(formatted(fmt), defaults={"lenient": True})
        _, warnings = LLMatcher.validate_grammar_with_warnings(grammar)
        if not any(w.startswith("Unknown format") for w in warnings):
            enforced.add(fmt)
    assert enforced == set(FORMAT_VALUES) == set(FORMATTED)


@pytest.mark.parametrize("fmt", sorted(FORMATTED))
def test_each_short_value_is_valid_to_llguidance_and_jsonschema(lltok, fmt):
    from engine.constraints.formats import FORMAT_VALUES

    validator = jsonschema.validators.validator_for(formatted(fmt))
    assert fmt in validator.FORMAT_CHECKER.checkers, "install jsonschema[format-nongpl]"
    spec = compile_constraint(json_schema_constraint(formatted(fmt)))
    for value in (*FORMAT_VALUES[fmt], FORMATTED[fmt]):
        text = json.dumps({"v": value}, separators=(",", ":"))
        matcher = spec.compiled.matcher(lltok)
        assert matcher.consume_tokens(lltok.tokenize_str(text)) and matcher.is_accepting(), text
        assert not format_errors(formatted(fmt), {"v": value}), value


@pytest.mark.parametrize("fmt", sorted(FORMATTED))
def test_a_reply_cut_off_inside_a_formatted_value_ends_valid(lltok, fmt):
    """Every prefix of a real value (`jane`, `jane.`, `jane.doe-1@`, `2024-11-26T1`...)
    closes, in a few tokens, to a value jsonschema's format checker accepts; and so does the
    second value the ending must write whole (the walk reaches it through forced text)."""
    schema = formatted(fmt, ("v", "w"))
    spec = compile_constraint(json_schema_constraint(schema))
    policy = ClosingPolicy.for_tokenizer(lltok)
    value = FORMATTED[fmt]
    for cut in range(len(value)):
        prefix = '{"v":"' + value[:cut]
        matcher = spec.compiled.matcher(lltok)
        assert matcher.consume_tokens(lltok.tokenize_str(prefix)), prefix
        nesting = Nesting()
        nesting.feed(prefix.encode())
        ending = policy.ending(matcher, 80, nesting)
        assert ending is not None, prefix
        assert len(ending) <= 60, (prefix, lltok.decode_str(ending))
        text = prefix + lltok.decode_str(ending)
        assert not format_errors(schema, json.loads(text)), text
        assert matcher.consume_tokens(ending) and matcher.is_accepting()


@pytest.mark.parametrize("fmt", sorted(FORMATTED))
def test_a_reply_run_out_inside_a_formatted_value_is_closed_valid(tiny_engine, lltok, fmt):
    """The tiny model writes into the value until the budget closes it: from the shortest
    reply's length (plus the tokens the policy keeps in hand) up, the reply is complete and
    valid with formats checked, and some budget closes it inside the value."""
    from engine.constraints.closing import MARGIN

    schema = formatted(fmt)
    spec = compile_constraint(json_schema_constraint(schema))
    shortest = ClosingPolicy.for_tokenizer(lltok).ending(spec.compiled.matcher(lltok), 80)
    assert shortest is not None
    mid_value = 0
    for max_tokens in range(len(shortest) + MARGIN, len(shortest) + MARGIN + 24, 2):
        result = chat(tiny_engine, json_schema_constraint(schema), max_tokens)
        assert not result.incomplete and result.stop_reason == StopReason.EOS, result.warnings
        assert result.stats.generated_tokens <= max_tokens
        assert not format_errors(schema, json.loads(result.text)), result.text
        if result.closed_to_fit:
            written = result.token_ids[: len(result.token_ids) - result.stats.closing_tokens]
            before = tiny_engine.run(lambda lm, w=written: lm.tokenizer.decode(w)).result()
            mid_value += before.count('"') == 3 and not before.endswith('"')
    assert mid_value, "no budget closed the reply inside the value"


# ---- numbers under multipleOf (issue 38) ----

MULTIPLES = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 11}]},
        "price": {"type": "number", "multipleOf": 7.5},
    },
    "required": ["n", "price"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "prefix", ['{"n":1', '{"n":-9', '{"n":1234567', '{"n":44,"price":1', '{"n":0,"price":-']
)
def test_a_number_the_digits_so_far_cannot_end_is_finished_in_a_few_digits(lltok, prefix):
    """A multiple of 4 and 11 cut off at `1`: no single digit makes one, and the number is
    unbounded, so a walk that only looks one token ahead writes digits forever. The
    ending writes the fewest digits that make it one (`1` + `32`), then closes."""
    spec = compile_constraint(json_schema_constraint(MULTIPLES))
    matcher = spec.compiled.matcher(lltok)
    assert matcher.consume_tokens(lltok.tokenize_str(prefix))
    nesting = Nesting()
    nesting.feed(prefix.encode())
    ending = ClosingPolicy.for_tokenizer(lltok).ending(matcher, 80, nesting)
    assert ending is not None, prefix
    text = prefix + lltok.decode_str(ending)
    assert len(text) - len(prefix) <= 16, text  # three digits at most per number, and keys
    jsonschema.validate(json.loads(text), MULTIPLES)


@pytest.mark.parametrize("max_tokens", [16, 24, 40])
def test_a_reply_run_out_inside_a_multiple_is_closed_valid(tiny_engine, max_tokens):
    result = chat(tiny_engine, json_schema_constraint(MULTIPLES), max_tokens)
    assert not result.incomplete and result.stop_reason == StopReason.EOS, result.warnings
    assert result.stats.generated_tokens <= max_tokens
    jsonschema.validate(json.loads(result.text), MULTIPLES)
    assert result.valid_as_written


NAMED = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12, "pattern": "^[A-Z][a-z]+ [A-Z][a-z]+$"},
        "code": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+_[0-9]{2}$"},
    },
    "required": ["name", "code"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "prefix", ['{"name":"', '{"name":"Abcdefgh', '{"name":"Ab Cd","code":"abcde']
)
def test_a_string_under_max_length_and_a_pattern_ends_valid(lltok, prefix):
    """The pattern wants a space and a capital, or `_` and two digits, which no short
    token gives and the budget of characters leaves little room for: the walk still ends
    the string inside both."""
    spec = compile_constraint(json_schema_constraint(NAMED))
    matcher = spec.compiled.matcher(lltok)
    assert matcher.consume_tokens(lltok.tokenize_str(prefix))
    nesting = Nesting()
    nesting.feed(prefix.encode())
    ending = ClosingPolicy.for_tokenizer(lltok).ending(matcher, 80, nesting)
    assert ending is not None, prefix
    jsonschema.validate(json.loads(prefix + lltok.decode_str(ending)), NAMED)
