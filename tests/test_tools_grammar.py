"""The tool grammar token by token on the default tokenizer (no model): function-call
schemas from Glaiveai2K accept their valid arguments and reject their invalid ones, and
each tool_choice mode allows exactly the replies it should."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from schema_corpus import CASES, UNSUPPORTED
from shared_datasets import dataset
from tools_support import GLAIVE, default_model_dir, grammar_accepts

from engine.constraints.tight import tighten
from engine.tools import ToolDefinitionError, prepare_tool_request
from engine.types import SchemaOptions


@pytest.fixture(scope="module")
def tok():
    from mlx_lm.tokenizer_utils import load

    return load(default_model_dir())


def in_schema_order(value: Any, schema: Any) -> Any:
    """`value` with object keys in the order the schema lists them (the grammar writes
    properties in schema order)."""
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        out = {k: in_schema_order(value[k], props[k]) for k in props if k in value}
        out.update({k: v for k, v in value.items() if k not in props})
        return out
    items = schema.get("items") if isinstance(schema, dict) else None
    if isinstance(value, list) and isinstance(items, dict):
        return [in_schema_order(v, items) for v in value]
    return value


def hermes_call(name: str, arguments: Any) -> str:
    return (
        f'<tool_call>\n{{"name": "{name}", "arguments": '
        f"{json.dumps(arguments, ensure_ascii=False)}}}\n</tool_call>"
    )


def test_glaive_schemas_accept_valid_and_reject_invalid_arguments(tok) -> None:
    """Every 6th file of Glaiveai2K (about 285 schemas): a schema either compiles or is
    refused with an error naming the tool; a compiled one accepts the examples jsonschema
    accepts (format-checked ones aside) and rejects every example jsonschema rejects."""
    hf = tok._tokenizer
    checked = refused = accepted_valid = rejected_invalid = 0
    for path in sorted(dataset(*GLAIVE).glob("*.json"))[::6]:
        data = json.loads(path.read_text())
        schema = data["schema"]
        name = path.stem.rsplit("_", 1)[0]
        tools = [{"type": "function", "function": {"name": name, "parameters": schema}}]
        try:
            plan = prepare_tool_request(tok, [{"role": "user", "content": "Go"}], tools, "required")
        except ToolDefinitionError as exc:
            assert f'tool 1 ("{name}")' in str(exc)
            refused += 1
            continue
        checked += 1
        # Lenient by default: a keyword llguidance cannot enforce (or oneOf it enforces as
        # anyOf) is relaxed and named in a warning; such a schema may accept what the
        # relaxed keyword would refuse.
        relaxed = bool(plan.warnings)
        for case in data["tests"]:
            args = case["data"]
            if not isinstance(args, dict):
                continue
            valid = jsonschema.Draft202012Validator(schema).is_valid(args)
            text = hermes_call(name, in_schema_order(args, schema))
            accepted = grammar_accepts(hf, plan.constraint.source, text)
            if not valid:
                assert relaxed or not accepted, f"{path.name}: accepted invalid {args}"
                rejected_invalid += not accepted
            elif accepted:
                accepted_valid += 1
            else:
                # string formats, which llguidance checks and jsonschema skips here, or the
                # tight defaults, which narrow what is generated (declared keys only, in the
                # order the schema and its branches declare them)
                narrowed = '"format"' in json.dumps(schema) or tighten(schema).changed
                assert narrowed, f"{path.name}: rejected valid {args}"
    assert checked >= 250 and refused <= 15
    assert accepted_valid >= 250 and rejected_invalid >= 100


def test_suite_schemas_accept_valid_and_reject_invalid_arguments(tok) -> None:
    """The Glaive check on the suite's own schemas (no dataset needed): each compiles as a
    tool, its calls accept the arguments jsonschema accepts and reject the rest; a schema
    llguidance cannot enforce is refused with an error naming the tool."""
    hf = tok._tokenizer
    ask = [{"role": "user", "content": "Go"}]
    for case in CASES:
        tools = [{"type": "function", "function": {"name": case.name, "parameters": case.schema}}]
        plan = prepare_tool_request(tok, ask, tools, "required")
        assert plan.constraint is not None
        for args in case.valid:
            text = hermes_call(case.name, in_schema_order(args, case.schema))
            assert grammar_accepts(hf, plan.constraint.source, text), (case.name, args)
        for args in case.invalid:
            text = hermes_call(case.name, in_schema_order(args, case.schema))
            assert not grammar_accepts(hf, plan.constraint.source, text), (case.name, args)
    schema, keyword = next((s, k) for s, k in UNSUPPORTED if s.get("type") == "object")
    tools = [{"type": "function", "function": {"name": "dedupe", "parameters": schema}}]
    # By default the keyword is ignored and named in a warning; strict schemas refuse it.
    plan = prepare_tool_request(tok, ask, tools, "required")
    assert any(keyword in w for w in plan.warnings), plan.warnings
    strict = SchemaOptions(lenient=False)
    with pytest.raises(ToolDefinitionError, match=keyword) as caught:
        prepare_tool_request(tok, ask, tools, "required", schema_options=strict)
    assert 'tool 1 ("dedupe")' in str(caught.value)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
CALL_W = hermes_call("get_weather", {"city": "Paris"})
CALL_A = hermes_call("add", {"a": 1, "b": 2})


@pytest.mark.parametrize(
    ("choice", "reply", "accepted"),
    [
        ("auto", "Hello there", True),
        ("auto", "", True),
        ("auto", CALL_W, True),
        ("auto", "Let me check. " + CALL_W + "\nDone.", True),
        ("auto", CALL_W + "\n" + CALL_A, True),
        ("auto", 'Sure <tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>', False),
        ("auto", CALL_W + " then <tool_call> free text", False),
        ("required", "Hello there", False),
        ("required", "", False),
        ("required", CALL_W, True),
        ("required", CALL_W + "\n", False),  # the reply ends after its last call
        ("required", CALL_W + "\n" + CALL_A, True),
        ("required", "Sure. " + CALL_W, False),
        ("required", CALL_W + " and more text", False),
        ("add", CALL_A, True),
        ("add", CALL_W, False),
        ("add", CALL_A + "\n" + CALL_A, False),
        ("add", "3", False),
    ],
)
def test_modes(tok, choice: str, reply: str, accepted: bool) -> None:
    plan = prepare_tool_request(tok, [{"role": "user", "content": "Go"}], [WEATHER, ADD], choice)
    assert grammar_accepts(tok._tokenizer, plan.constraint.source, reply) is accepted


def test_grammar_forces_the_call_scaffolding(tok) -> None:
    """Under required, the opener, the name prefix and the keys are forced tokens."""
    from llguidance import LLMatcher
    from tools_support import ll_tokenizer

    plan = prepare_tool_request(tok, [{"role": "user", "content": "Go"}], [WEATHER], "required")
    lt = ll_tokenizer(tok._tokenizer)
    matcher = LLMatcher(lt, plan.constraint.source, log_level=0)
    forced = lt.decode_str(matcher.compute_ff_tokens())
    assert forced.startswith('<tool_call>\n{"name": "get_weather", "arguments": {"city":')


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_parallel_calls_can_be_turned_off(tok, choice: str) -> None:
    plan = prepare_tool_request(
        tok, [{"role": "user", "content": "Go"}], [WEATHER, ADD], choice, parallel_tool_calls=False
    )
    grammar = plan.constraint.source
    assert grammar_accepts(tok._tokenizer, grammar, CALL_W)
    assert not grammar_accepts(tok._tokenizer, grammar, CALL_W + "\n" + CALL_A)
