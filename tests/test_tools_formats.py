"""Call formats chosen from real chat templates: the rendered prompt, the grammar over the
template's call syntax, and the calls parsed back, for ChatML without tools (SmolLM2),
Qwen2.5, Llama 3.2 and Mistral v0.3."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tools_support import grammar_accepts, load_fixture_tokenizer

from engine.constraints.sources import json_schema_constraint
from engine.tools import prepare_tool_request
from engine.tools.formats import choose_format
from engine.types import ConstraintSpec

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user", "content": "Weather in Paris?"}]

# For each fixture: (format, native, a reply with one call, a reply with two calls).
REPLIES: dict[str, tuple[str, bool, str, str]] = {
    "chatml": (
        "hermes",
        False,
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n'
        "</tool_call>",
    ),
    "qwen2_5": (
        "hermes",
        True,
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n'
        "</tool_call>",
    ),
    "llama3_2": (
        "llama3_json",
        True,
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}; '
        '{"name": "get_time", "parameters": {"zone": "CET"}}',
    ),
    # its template writes each call's id back: the model writes one (nine letters, digits)
    "mistral_v3": (
        "mistral",
        True,
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}]',
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}, '
        '"id": "a1B2c3D4e"}, {"name": "get_time", "arguments": {"zone": "CET"}, '
        '"id": "f5G6h7I8j"}]',
    ),
}
TWO_CALLS = [("get_weather", {"city": "Paris", "unit": "c"}), ("get_time", {"zone": "CET"})]


@pytest.fixture(scope="module", params=list(REPLIES))
def fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    return request.param, load_fixture_tokenizer(request.param, tmp_path_factory.mktemp("tok"))


def test_format_is_chosen_from_the_template(fixture) -> None:
    name, tok = fixture
    expected, native, _, _ = REPLIES[name]
    fmt = choose_format(tok)
    assert (fmt.name, fmt.native) == (expected, native)


def test_rendered_prompt_carries_the_tools_in_the_template_layout(fixture) -> None:
    name, tok = fixture
    plan = prepare_tool_request(tok, ASK, TOOLS, "auto")
    text = plan.prompt_text
    function = json.dumps(WEATHER["function"])
    if name == "chatml":
        assert text.startswith("<|im_start|>system\nYou can call functions")
        assert f"<tools>\n{function}\n{json.dumps(TIME['function'])}\n</tools>" in text
        assert text.endswith(
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
        )
    elif name == "qwen2_5":
        assert "# Tools\n\nYou may call one or more functions" in text
        assert f"<tools>\n{json.dumps(WEATHER)}\n{json.dumps(TIME)}\n</tools>" in text
        assert text.endswith("Weather in Paris?<|im_end|>\n<|im_start|>assistant\n")
    elif name == "llama3_2":
        assert text.startswith(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
        )
        assert json.dumps(WEATHER, indent=4) in text
        assert text.endswith(
            "Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    else:
        assert text.startswith(
            '<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather"'
        )
        assert text.endswith("[/AVAILABLE_TOOLS][INST] Weather in Paris?[/INST]")
    hf = tok._tokenizer
    assert plan.prompt_tokens == hf.encode(text, add_special_tokens=False)
    # The template's control tokens are single tokens in the prompt, not spelled out.
    first = {
        "chatml": "<|im_start|>",
        "qwen2_5": "<|im_start|>",
        "llama3_2": "<|begin_of_text|>",
        "mistral_v3": "<s>",
    }[name]
    assert plan.prompt_tokens[0] == hf.convert_tokens_to_ids(first)


def test_grammar_accepts_the_format_and_calls_parse_back(fixture) -> None:
    name, tok = fixture
    _, _, one, two = REPLIES[name]
    hf = tok._tokenizer
    for choice in ("auto", "required"):
        plan = prepare_tool_request(tok, ASK, TOOLS, choice)
        assert plan.constraint is not None and plan.constraint.kind == "lark"
        assert grammar_accepts(hf, plan.constraint.source, one)
        assert grammar_accepts(hf, plan.constraint.source, two)
        content, calls = plan.parse(two)
        assert content == ""
        assert [(c.name, c.arguments) for c in calls] == TWO_CALLS
        assert len({c.id for c in calls}) == 2
        if name == "mistral_v3":  # the model's own ids
            assert [c.id for c in calls] == ["a1B2c3D4e", "f5G6h7I8j"]


def test_grammar_rejects_bad_arguments_names_and_foreign_formats(fixture) -> None:
    name, tok = fixture
    _, _, one, _ = REPLIES[name]
    hf = tok._tokenizer
    plan = prepare_tool_request(tok, ASK, TOOLS, "required")
    grammar = plan.constraint.source
    bad = [
        one.replace('"Paris"', "42"),  # wrong type
        one.replace('{"city": "Paris"}', '{"unit": "c"}'),  # missing required
        one.replace('"Paris"}', '"Paris", "days": 3}'),  # unknown argument
        one.replace("get_weather", "get_stock"),  # unknown tool
        one.replace('"Paris"}', '"Paris", "unit": "kelvin"}'),  # not in the enum
        "It is sunny in Paris.",  # text only, under required
    ]
    for reply in bad:
        assert not grammar_accepts(hf, grammar, reply), reply
    others = [r[2] for key, r in REPLIES.items() if r[0] != REPLIES[name][0]]
    for reply in others:
        assert not grammar_accepts(hf, grammar, reply), reply


def test_auto_allows_text_and_named_choice_allows_only_that_function(fixture) -> None:
    name, tok = fixture
    _, _, one, two = REPLIES[name]
    hf = tok._tokenizer
    auto = prepare_tool_request(tok, ASK, TOOLS, "auto").constraint.source
    assert grammar_accepts(hf, auto, "It is sunny in Paris.")
    named = prepare_tool_request(
        tok, ASK, TOOLS, {"type": "function", "function": {"name": "get_time"}}
    )
    assert named.constraint.name.startswith("tools: get_time")
    assert not grammar_accepts(hf, named.constraint.source, one)
    assert not grammar_accepts(hf, named.constraint.source, two)  # exactly one call
    time_call = {
        "hermes": '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>',
        "llama3_json": '{"name": "get_time", "parameters": {"zone": "CET"}}',
        "mistral": (
            '[TOOL_CALLS] [{"name": "get_time", "arguments": {"zone": "CET"}, "id": "f5G6h7I8j"}]'
        ),
    }[REPLIES[name][0]]
    assert grammar_accepts(hf, named.constraint.source, time_call)
    none = prepare_tool_request(tok, ASK, TOOLS, "none")
    assert none.constraint is None
    assert "get_weather" not in none.prompt_text  # tools are not offered under "none"
    assert none.parse(one) == (one, [])


def _conversation(call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "22 C and sunny"},
    ]


def test_tool_results_are_rendered_so_the_conversation_continues(fixture) -> None:
    name, tok = fixture
    plan = prepare_tool_request(tok, _conversation("call_abc123"), TOOLS, "auto")
    text = plan.prompt_text
    if name in ("chatml", "qwen2_5"):
        assert (
            '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}\n</tool_call><|im_end|>\n'
        ) in text
        assert text.endswith(
            "<|im_start|>user\n<tool_response>\n22 C and sunny\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n"
        )
    elif name == "llama3_2":
        assert (
            '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", '
            '"parameters": {"city": "Paris"}}<|eot_id|>'
        ) in text
        assert text.endswith(
            '<|start_header_id|>ipython<|end_header_id|>\n\n"22 C and sunny"'
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    else:
        # Mistral wants 9-character ids: the OpenAI id is mapped the same way in both places.
        call = text.split("[TOOL_CALLS] [")[1].split("]</s>")[0]
        short = json.loads(call)["id"]
        assert len(short) == 9 and short.isalnum()
        assert text.endswith(
            f'[TOOL_RESULTS] {{"content": 22 C and sunny, "call_id": "{short}"}}[/TOOL_RESULTS]'
        )


def test_parallel_calls_in_history_render_for_every_template(fixture) -> None:
    name, tok = fixture
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(TWO_CALLS)
    ]
    messages = [
        ASK[0],
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_1", "content": "10:00"},
    ]
    text = prepare_tool_request(tok, messages, TOOLS, "auto").prompt_text
    assert "sunny" in text and "10:00" in text
    assert '"zone": "CET"' in text
    if name == "llama3_2":  # one call per turn in the template: both written as text
        assert '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}; ' in text
    if name in ("chatml", "qwen2_5"):  # consecutive results share one user turn
        assert "<tool_response>\nsunny\n</tool_response>\n<tool_response>\n10:00\n" in text


def test_parse_keeps_text_and_leaves_broken_calls_as_text(fixture) -> None:
    name, tok = fixture
    plan = prepare_tool_request(tok, ASK, TOOLS, "auto")
    assert plan.parse("Just text.") == ("Just text.", [])
    _, _, one, _ = REPLIES[name]
    cut = one[: len(one) - 6]
    content, calls = plan.parse(cut)
    assert calls == [] and content == cut.strip()
    if name in ("chatml", "qwen2_5"):
        content, calls = plan.parse("Let me check.\n" + one)
        assert content == "Let me check." and calls[0].arguments == {"city": "Paris"}
    if name == "mistral_v3":  # a detokenizer that drops special tokens loses the marker
        content, calls = plan.parse(one.replace("[TOOL_CALLS]", ""))
        assert calls[0].name == "get_weather"


def test_text_that_looks_like_a_call_is_not_free_text(tmp_path) -> None:
    """Under auto, what parse() would read as a call can only come through the grammar."""
    for name, text in [
        ("llama3_2", ' {"name": "get_weather", "parameters": {"city": 1}}'),
        ("mistral_v3", '[{"name": "get_weather", "arguments": {"city": 1}}]'),
        ("qwen2_5", 'Hi <tool_call>\n{"name": "get_weather", "arguments": {"city": 1}}'),
    ]:
        tok = load_fixture_tokenizer(name, tmp_path)
        plan = prepare_tool_request(tok, ASK, TOOLS, "auto")
        assert not grammar_accepts(tok._tokenizer, plan.constraint.source, text), name


def test_a_tokenizer_without_a_template_gets_chatml_and_the_fallback(tmp_path) -> None:
    tok = load_fixture_tokenizer("chatml", tmp_path)
    tok._tokenizer.chat_template = None
    plan = prepare_tool_request(tok, ASK, TOOLS, "required")
    assert (plan.format, plan.native) == ("hermes", False)
    assert plan.prompt_text.startswith("<|im_start|>system\nYou can call functions")
    assert plan.prompt_text.endswith("<|im_start|>assistant\n")


def test_the_engine_constraint_checker_accepts_every_tool_grammar(fixture) -> None:
    from engine.constraints.tokenizer import ll_tokenizer
    from engine.constraints.validate import validate_constraint

    name, tok = fixture
    lt = ll_tokenizer(tok, tok.eos_token_ids)
    for choice in ("auto", "required", "get_time"):
        plan = prepare_tool_request(tok, ASK, TOOLS, choice)
        report = validate_constraint(plan.constraint, lt)
        assert report.ok and not report.warnings, report.summary()


VERDICT = ConstraintSpec("lark", 'start: "yes" | "no"\n', "verdict.lark")
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 8}},
    "required": ["answer"],
    "additionalProperties": False,
}


def test_a_user_grammar_joins_the_tools_under_auto(fixture) -> None:
    """The reply follows the user's grammar or is tool calls; nothing else, not even text
    before a call."""
    name, tok = fixture
    _, _, one_call, _ = REPLIES[name]
    plan = prepare_tool_request(tok, ASK, TOOLS, "auto", user_constraint=VERDICT)
    assert plan.user_constraint == "with_tools"
    assert plan.constraint is not None and plan.constraint.compiled is not None
    assert plan.constraint.name.startswith("verdict.lark or tool calls")
    grammar = plan.constraint.compiled.grammar
    hf = tok._tokenizer
    assert grammar_accepts(hf, grammar, "yes") and grammar_accepts(hf, grammar, "no")
    assert grammar_accepts(hf, grammar, one_call)
    for other in ("maybe", "yes " + one_call, "Sure. " + one_call):
        assert not grammar_accepts(hf, grammar, other), (name, other)
    assert plan.parse(one_call)[1] and plan.parse("yes") == ("yes", [])


def test_a_user_grammar_that_calls_could_pass_for_is_paused_and_says_why(fixture) -> None:
    """A JSON schema cannot be told apart from Llama's bare JSON calls at their first byte:
    the schema is paused there (and the reply says so); the other formats join it."""
    name, tok = fixture
    schema = json_schema_constraint(ANSWER_SCHEMA, "answer.json")
    plan = prepare_tool_request(tok, ASK, TOOLS, "auto", user_constraint=schema)
    answer = json.dumps({"answer": "Paris"}, separators=(",", ":"))
    if name == "llama3_2":
        assert plan.user_constraint == "paused"
        assert plan.constraint is not None and plan.constraint.name.startswith("tools: auto")
        assert any("answer.json is paused while tools are on" in w for w in plan.warnings)
    else:
        assert plan.user_constraint == "with_tools" and not plan.warnings
        assert plan.constraint is not None and plan.constraint.compiled is not None
        assert grammar_accepts(tok._tokenizer, plan.constraint.compiled.grammar, answer)


def test_required_pauses_the_user_grammar_and_none_keeps_it_alone(fixture) -> None:
    _, tok = fixture
    required = prepare_tool_request(tok, ASK, TOOLS, "required", user_constraint=VERDICT)
    assert required.user_constraint == "paused"
    assert required.constraint is not None and required.constraint.name.startswith("tools:")
    assert any('tool_choice "required" allows only tool calls' in w for w in required.warnings)
    alone = prepare_tool_request(tok, ASK, TOOLS, "none", user_constraint=VERDICT)
    assert alone.user_constraint == "alone" and alone.constraint == VERDICT
    plain = prepare_tool_request(tok, ASK, TOOLS, "auto")
    assert plain.user_constraint is None


def test_a_tool_grammar_is_compiled_once_for_every_request_with_the_same_tools(fixture) -> None:
    from engine.constraints.tokenizer import ll_tokenizer

    _, tok = fixture
    lt = ll_tokenizer(tok, tok.eos_token_ids)
    plans = [prepare_tool_request(tok, ASK, TOOLS, "required") for _ in range(3)]
    compiled = {id(p.constraint.compiled) for p in plans if p.constraint is not None}
    assert len(compiled) == 1
    grammar = plans[0].constraint.compiled  # type: ignore[union-attr]
    before = grammar.compiles
    for _ in range(3):
        assert not grammar.matcher(lt).is_error()
    assert grammar.compiles - before <= 1  # the first use with this tokenizer, at most
