"""Replies that finish by themselves: the budget reserve steers a reply toward its end,
a loop inside a value is moved on from, and a value that must still be closed to fit is
the model's own pick among the tokens that fit, not a placeholder.

The tracker is driven here by a scripted "model" that always prefers going on (another
item, another key, another character): with the tracker's steering off it is cut and
filled, with it on it ends the reply itself. Then the tiny random model, through the
engine, for what a user sees."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import numpy as np
import pytest

from engine.constraints.closing import ClosingPolicy, Nesting
from engine.constraints.finishing import ClosingTracker, token_classes
from engine.constraints.sources import json_schema_constraint
from engine.constraints.steering import Mode, Steer, steer
from engine.constraints.validate import compile_constraint
from engine.types import ChatRequest, SamplingSettings

USER = [{"role": "user", "content": "Give me JSON."}]

ITEMS = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "string", "maxLength": 12}},
        "note": {"type": "string"},
    },
    "required": ["items"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def lltok(tiny_model):
    from engine.constraints.tokenizer import ll_tokenizer

    return ll_tokenizer(tiny_model[1], (0, 2))


def matcher_at(lltok, schema, prefix):
    spec = compile_constraint(json_schema_constraint(schema))
    matcher = spec.compiled.matcher(lltok)
    assert matcher.consume_tokens(lltok.tokenize_str(prefix)), prefix
    nesting = Nesting()
    nesting.feed(prefix.encode())
    return matcher, nesting


def mask(matcher, n_words):
    words = np.zeros(n_words, np.int32)
    matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
    return words.view(np.uint32)


def allowed(words) -> set[int]:
    return set(np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist())


def texts(lltok, tokens) -> set[bytes]:
    return {lltok.decode_bytes([t]) for t in tokens}


# ---- the rules, where the reply stands ----


@pytest.mark.parametrize(
    ("prefix", "kept", "gone"),
    [
        # after an item: the array closes, no other item
        ('{"items":["a"', b"]", b","),
        # after the array: the object closes, the optional key is left out
        ('{"items":["a"]', b"}", b","),
        # inside an item: written on freely, but not closed and reopened in one token
        ('{"items":["ab', b"c", b'","'),
    ],
)
def test_the_reserve_masks_out_new_content_where_the_structure_may_close(lltok, prefix, kept, gone):
    matcher, nesting = matcher_at(lltok, ITEMS, prefix)
    policy = ClosingPolicy.for_tokenizer(lltok)
    words = mask(matcher, policy.n_words)
    before = texts(lltok, allowed(words))
    assert kept in before and gone in before
    assert steer(words, nesting, Mode.WRAP, token_classes(policy)) is Steer.NARROWED
    after = texts(lltok, allowed(words))
    assert kept in after and gone not in after


def test_the_reserve_leaves_alone_what_must_go_on(lltok):
    """Two items at least: after the first, the comma is the only way on."""
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2}
    matcher, nesting = matcher_at(lltok, schema, "[1")
    policy = ClosingPolicy.for_tokenizer(lltok)
    words = mask(matcher, policy.n_words)
    before = words.copy()
    assert steer(words, nesting, Mode.TIGHT, token_classes(policy)) is Steer.NARROWED
    # the number ends (no more digits), with the comma: the array may not close yet
    assert texts(lltok, allowed(words)) <= {b",", b",\n", b", "} | texts(lltok, allowed(before))
    assert b"," in texts(lltok, allowed(words)) and b"2" not in texts(lltok, allowed(words))


def test_near_the_end_a_string_ends_cleanly(lltok):
    matcher, nesting = matcher_at(lltok, ITEMS, '{"items":["ab')
    policy = ClosingPolicy.for_tokenizer(lltok)
    words = mask(matcher, policy.n_words)
    assert steer(words, nesting, Mode.TIGHT, token_classes(policy)) is Steer.NARROWED
    kept = texts(lltok, allowed(words))
    assert b'"' in kept and all(t.startswith(b'"') for t in kept), kept
    assert b'","' not in kept  # the string ends, no new item after it


def test_moving_on_is_refused_where_the_grammar_has_no_way_out(lltok):
    """A code that must read AB-1234 cannot end after `AB`: moving on says so (and the
    tracker fills it), where a free string ends at once."""
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}},
        "required": ["code"],
    }
    policy = ClosingPolicy.for_tokenizer(lltok)
    matcher, nesting = matcher_at(lltok, schema, '{"code":"AB')
    words = mask(matcher, policy.n_words)
    assert steer(words, nesting, Mode.MOVE_ON, token_classes(policy)) is Steer.REFUSED
    matcher, nesting = matcher_at(lltok, ITEMS, '{"items":["ababab')
    words = mask(matcher, policy.n_words)
    assert steer(words, nesting, Mode.MOVE_ON, token_classes(policy)) is Steer.NARROWED
    assert all(t.startswith(b'"') for t in texts(lltok, allowed(words)))


# ---- the tracker, driven by a scripted model ----


def drive(
    lltok, schema, max_tokens: int, pick: Callable[[list[bytes]], int], *, steering: bool
) -> tuple[str, ClosingTracker]:
    """Decode `schema` as the row does, the tracker watching, the "model" choosing with
    `pick` (an index into the allowed tokens' texts) at each step; the reply's text."""
    spec = compile_constraint(json_schema_constraint(schema))
    matcher = spec.compiled.matcher(lltok)
    tracker = ClosingTracker(lltok, max_tokens, steering=steering)
    policy = tracker.policy
    out: list[int] = []
    new: list[int] = []
    while len(out) <= max_tokens:
        forced = matcher.compute_ff_tokens()
        assert matcher.consume_tokens(forced)
        out += forced
        new += forced
        if matcher.is_stopped():
            break
        ending = tracker.after(matcher, new, len(out))
        if ending is not None:
            assert matcher.consume_tokens(ending)
            out += ending
            break
        words = mask(matcher, policy.n_words)
        tracker.narrow(matcher, words)
        choices = sorted(allowed(words) - set(lltok.eos_tokens))
        if not choices:  # only the end: the grammar accepts
            break
        token = choices[pick([policy.texts[t] for t in choices])]
        assert matcher.consume_token(token)
        out.append(token)
        new = [token]
    assert matcher.is_accepting() and len(out) <= max_tokens
    return lltok.decode_str(out), tracker


def keeps_going(options: list[bytes]) -> int:
    """A model that never wants to stop: another item, else more text, else anything."""
    for wanted in (b'","', b",", b'"', b"x"):
        if wanted in options and (wanted != b'"' or len(options) == 1):
            return options.index(wanted)
    for i, text in enumerate(options):
        if text.isalpha():
            return i
    return 0


@pytest.mark.parametrize("max_tokens", [30, 45, 60])
def test_a_reply_that_would_be_filled_ends_by_the_model_s_own_choice(lltok, max_tokens):
    text, unsteered = drive(lltok, ITEMS, max_tokens, keeps_going, steering=False)
    assert unsteered.state.reason == "budget"  # cut and closed to fit
    text, tracker = drive(lltok, ITEMS, max_tokens, keeps_going, steering=True)
    jsonschema.validate(json.loads(text), ITEMS)
    assert tracker.state.reason == "" and not tracker.fitting, text  # the model ended it
    assert tracker.state.steered > 0
    # the reserve is honoured: the reply ended with room to spare
    assert len(lltok.tokenize_str(text)) <= max_tokens


def test_a_filled_value_is_among_the_model_s_likeliest_not_a_placeholder(lltok):
    """A date that must be written to fit: every token the fitted mask leaves lets the
    reply end within the budget, and the model has more than the walk's digit to pick
    from (the walk would write 2000-01-01)."""
    schema = {
        "type": "object",
        "properties": {"d": {"type": "string", "format": "date"}},
        "required": ["d"],
    }
    spec = compile_constraint(json_schema_constraint(schema))
    matcher = spec.compiled.matcher(lltok)
    forced = matcher.compute_ff_tokens()
    assert matcher.consume_tokens(forced)
    budget = len(forced) + 14
    tracker = ClosingTracker(lltok, budget)
    assert tracker.after(matcher, forced, len(forced)) is None and tracker.fitting
    words = mask(matcher, tracker.policy.n_words)
    tracker.narrow(matcher, words)
    picks = allowed(words)
    assert len(picks) > 1 and texts(lltok, picks) >= {b"2", b"1"}, texts(lltok, picks)
    policy = tracker.policy
    for token in picks:  # each leaves an ending within what is left
        twin = matcher.deep_copy()
        assert twin.consume_token(token)
        nesting = Nesting()
        nesting.feed(lltok.decode_bytes(forced + [token]))
        ending = policy.ending(twin, 40, nesting)
        assert ending is not None and len(forced) + 1 + len(ending) <= budget


# ---- through the engine, the tiny model ----


def chat(engine, schema, max_tokens, **options):
    settings = SamplingSettings(temperature=0.0, max_tokens=max_tokens)
    constraint = json_schema_constraint(schema)
    return engine.chat(ChatRequest(USER, settings, constraint=constraint, **options))


@pytest.mark.parametrize("max_tokens", [30, 40, 60])
def test_the_tiny_model_wraps_up_within_the_budget_by_itself(tiny_engine, max_tokens):
    result = chat(tiny_engine, ITEMS, max_tokens)
    assert not result.incomplete and not result.closed_to_fit, result.text
    assert result.stats.steered_tokens > 0
    assert result.stats.generated_tokens <= max_tokens
    jsonschema.validate(json.loads(result.text), ITEMS)


def test_a_date_closed_to_fit_is_written_by_the_model(tiny_engine):
    """No room for anything but the date: the reply is closed to fit from its first
    token, and the date is the tiny model's own pick under the mask, not 2000-01-01."""
    schema = {
        "type": "object",
        "properties": {"d": {"type": "string", "format": "date"}},
        "required": ["d"],
        "additionalProperties": False,
    }
    result = chat(tiny_engine, schema, 15)
    assert result.closed_to_fit and result.stats.close_reason == "budget"
    assert result.stats.closing_tokens > 0 and not result.incomplete
    value = json.loads(result.text)["d"]
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    jsonschema.Draft202012Validator(schema, format_checker=checker).validate({"d": value})
    assert value != "2000-01-01"
