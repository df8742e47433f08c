"""Every chat template of the dataset (`../shared/datasets/chat-templates`, read in place)
served in its family's own call syntax.

For each template a tiny random model carries the template and its markers as added
tokens (benchmarks/tiny_family_model.py). The checks: a template with tool support is
never served by the fallback; the grammar accepts calls written the family's way (one, and
two where the family allows parallel calls) and refuses bad arguments, unknown tools and
calls a named tool_choice excludes; a required call decoded by the engine comes out in the
family's syntax (checked by the family's own marker, written here, not by Corral's parser),
parses, and its arguments validate with `jsonschema`; the call, its result and a follow-up
reply render through the template again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from shared_datasets import DATASETS, dataset
from tools_support import grammar_accepts

from engine.tools import prepare_tool_request
from engine.tools.formats import choose_format, has_tool_support

FOLDER = DATASETS / "chat-templates"
NAMES = sorted(p.stem for p in FOLDER.glob("*.jinja")) if FOLDER.is_dir() else ["(missing)"]

HERMES = ("hermes", "<tool_call>\n{")
# What each family writes at the start of a call to get_weather: (format, marker).
EXPECTED: dict[str, tuple[str, str]] = {
    "apertus": ("apertus", '<|tools_prefix|>[{"get_weather": {'),
    "apriel-1.6-thinker": ("apriel", '<tool_calls>[{"name": "get_weather"'),
    "command-r7b": ("command_r7b", '<|START_ACTION|>[\n    {"tool_call_id": "'),
    "deepseek-r1-distill-qwen": (
        "deepseek_r1",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{",
    ),
    "deepseek-v3.1": ("deepseek_v3", "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"),
    "deepseek-v3.2": ("deepseek_dsml", '<｜DSML｜invoke name="get_weather">'),
    "functionary-v3.2": ("functionary", "get_weather\n{"),
    "gemma-3-vllm-pythonic": ("pythonic", "[get_weather(city="),
    "gemma-4": ("gemma4", '<|tool_call>call:get_weather{city:<|"|>'),
    "glm-4.5": ("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>"),
    "glm-4.6": ("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>"),
    "gpt-oss": ("harmony", " to=functions.get_weather<|channel|>commentary json<|message|>{"),
    "granite-3.3": ("granite", '<|tool_call|>[{"name": "get_weather"'),
    "granite-4.0": HERMES,
    "hermes-3-llama-3.1": HERMES,
    "kimi-k2": ("kimi_k2", "<|tool_call_begin|>functions.get_weather:"),
    "kimi-k2-thinking": ("kimi_k2", "<|tool_call_begin|>functions.get_weather:"),
    "kimi-k3": ("kimi_xtml", '<|open|>call tool="get_weather" index="'),
    "lfm2-llamacpp": ("lfm2", '<|tool_call_start|>[{"name": "get_weather"'),
    "llama-3.2": ("llama3_json", '{"name": "get_weather", "parameters": {'),
    "llama-3.3": ("llama3_json", '{"name": "get_weather", "parameters": {'),
    "llama-4-vllm-pythonic": ("pythonic", "[get_weather(city="),
    "magistral-small-2509": ("mistral_args", "[TOOL_CALLS]get_weather[ARGS]{"),
    "minimax-m2": ("minimax", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter'),
    "mistral-nemo": ("mistral", '[TOOL_CALLS][{"name": "get_weather"'),
    "mistral-small-3.1": ("mistral", '[TOOL_CALLS] [{"name": "get_weather"'),
    "mistral-small-3.2": ("mistral_call_id", "[TOOL_CALLS]get_weather[CALL_ID]"),
    "nemotron-nano-v2": ("nemotron", '<TOOLCALL>[{"name": "get_weather"'),
    "olmo-3-vllm": ("olmo", "<function_calls>\nget_weather(city="),
    "phi-4-mini": ("phi4", '<|tool_call|>{"name": "get_weather"'),
    "qwen2.5": HERMES,
    "qwen3": HERMES,
    "qwen3-coder": ("qwen_xml", "<tool_call>\n<function=get_weather>\n<parameter=city>\n"),
    "qwen3.5": ("qwen_xml", "<tool_call>\n<function=get_weather>\n<parameter=city>\n"),
    "qwq": HERMES,
}
# Templates that render no tools: the fallback (tools described in the system prompt).
NO_TOOLS = {"gemma-2", "phi-3.5-mini", "phi-3.5-vision", "qwen2-vl", "smollm3"}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "alerts": {"type": "boolean"},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Time in a zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user", "content": "Weather in Paris?"}]
GOOD = ("get_weather", {"city": "Paris", "days": 2, "unit": "c", "alerts": True})
TWO = [GOOD, ("get_time", {"zone": "CET"})]


@pytest.fixture(scope="module")
def family_models(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path):
    from benchmarks.tiny_family_model import build_family_models

    folder = dataset("chat-templates")
    paths = sorted(folder.glob("*.jinja"))
    return build_family_models(tmp_path_factory.mktemp("families"), default_model_dir, paths)


_LOADED: dict[Path, Any] = {}


def _tokenizer(family_models: dict[str, Path], name: str) -> Any:
    """The family's tokenizer, loaded once (so llguidance's view of it is built once)."""
    from mlx_lm.tokenizer_utils import load

    if name not in family_models:
        pytest.fail(f"no model for {name}")
    folder = family_models[name]
    if folder not in _LOADED:
        _LOADED[folder] = load(folder)
    return _LOADED[folder]


def test_every_template_in_the_dataset_is_classified() -> None:
    folder = dataset("chat-templates")
    for path in sorted(folder.glob("*.jinja")):
        template = path.read_text()
        assert (path.stem in EXPECTED) != (path.stem in NO_TOOLS), path.stem
        assert has_tool_support(template) == (path.stem in EXPECTED), path.stem


@pytest.mark.parametrize("name", NAMES)
def test_a_template_with_tools_is_served_in_its_own_syntax(family_models, name: str) -> None:
    tok = _tokenizer(family_models, name)
    fmt = choose_format(tok)
    if name in NO_TOOLS:
        assert not fmt.native
        return
    assert fmt.native, f"{name} has tool support but is served by the fallback"
    assert fmt.name == EXPECTED[name][0]


@pytest.mark.parametrize("name", sorted(EXPECTED) if FOLDER.is_dir() else NAMES)
def test_the_grammar_holds_calls_to_the_family_syntax_and_the_schema(
    family_models, name: str
) -> None:
    tok = _tokenizer(family_models, name)
    hf = tok._tokenizer
    fmt = choose_format(tok)
    required = prepare_tool_request(tok, ASK, TOOLS, "required")
    grammar = required.constraint.source
    one = fmt.calls_as_text([GOOD])
    assert EXPECTED[name][1] in one
    assert grammar_accepts(hf, grammar, one), one
    content, calls = required.parse(one)
    assert [(c.name, c.arguments) for c in calls] == [GOOD] and content == ""
    two = fmt.calls_as_text(TWO)
    assert grammar_accepts(hf, grammar, two) == fmt.parallel, two
    if fmt.parallel:
        assert [(c.name, c.arguments) for c in required.parse(two)[1]] == TWO
    bad_arguments = [
        {"city": "Paris", "unit": "kelvin"},  # not in the enum
        {"city": "Paris", "unit": "c", "days": 9},  # above the maximum
        {"city": "Paris"},  # a required argument missing
        {"city": "Paris", "unit": "c", "wind": 3},  # an unknown argument
        {"city": "Paris", "unit": "c", "days": "two"},  # a string for an integer
    ]
    for arguments in bad_arguments:
        bad = fmt.calls_as_text([("get_weather", arguments)])
        assert not grammar_accepts(hf, grammar, bad), bad
    assert not grammar_accepts(hf, grammar, fmt.calls_as_text([("get_stock", {"q": "x"})]))
    assert not grammar_accepts(hf, grammar, fmt.text_reply("It is sunny."))
    auto = prepare_tool_request(tok, ASK, TOOLS, "auto").constraint.source
    assert grammar_accepts(hf, auto, fmt.text_reply("It is sunny."))
    assert grammar_accepts(hf, auto, one)
    named = prepare_tool_request(
        tok, ASK, TOOLS, {"type": "function", "function": {"name": "get_time"}}
    )
    assert not grammar_accepts(hf, named.constraint.source, one)
    assert grammar_accepts(hf, named.constraint.source, fmt.calls_as_text([TWO[1]]))


@pytest.mark.parametrize("name", sorted(EXPECTED) if FOLDER.is_dir() else NAMES)
def test_tool_choice_none_offers_no_tools_and_no_grammar(family_models, name: str) -> None:
    tok = _tokenizer(family_models, name)
    none = prepare_tool_request(tok, ASK, TOOLS, "none")
    assert none.constraint is None and "get_weather" not in none.prompt_text


@pytest.fixture(scope="module")
def engine_for(family_models):
    """An engine loading each family's model in turn (one at a time)."""
    from engine.engine import Engine

    eng = Engine()
    loaded: list[str] = []

    def load(name: str) -> Engine:
        if loaded[-1:] != [name]:
            eng.load_model(str(family_models[name])).result()
            loaded.append(name)
        return eng

    yield load
    eng.close()


@pytest.mark.parametrize("name", sorted(EXPECTED) if FOLDER.is_dir() else NAMES)
def test_a_required_call_decodes_in_the_family_syntax_and_round_trips(
    family_models, engine_for, name: str
) -> None:
    from engine.types import ChatRequest, SamplingSettings

    if name not in EXPECTED:
        dataset("chat-templates")
    eng = engine_for(name)
    sampling = SamplingSettings(max_tokens=200, seed=7, think=False)
    # One tool, its strings short, one call (parallel calls are checked on the grammar): the
    # random model's call stays within a few tokens.
    request = ChatRequest(
        messages=ASK,
        sampling=sampling,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
    )
    result = eng.chat(request)
    assert result.error is None, result.error
    tok = _tokenizer(family_models, name)
    reply = result.token_ids[result.stats.prompt_tokens :]
    raw = tok._tokenizer.decode(reply, skip_special_tokens=False)
    assert EXPECTED[name][1] in raw, raw
    assert result.tool_calls, raw
    written_ids = choose_format(tok).call_ids(raw)  # Mistral, Kimi K2: ids in the syntax
    if written_ids:
        assert [c.id for c in result.tool_calls] == written_ids
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for call in result.tool_calls:
        jsonschema.validate(call.arguments, schemas[call.name])
    # The call, its result and a follow-up reply render through the template again.
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
        }
        for c in result.tool_calls
    ]
    history = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": calls},
        *(
            {"role": "tool", "tool_call_id": c.id, "content": "22 C and sunny"}
            for c in result.tool_calls
        ),
    ]
    again = prepare_tool_request(tok, history, TOOLS, "auto").prompt_text
    assert "22 C and sunny" in again
    assert result.tool_calls[0].name in again.split("Weather in Paris?", 1)[1]
    follow = [
        *history,
        {"role": "assistant", "content": "It is 22 C."},
        {"role": "user", "content": "Thanks"},
    ]
    text = prepare_tool_request(tok, follow, TOOLS, "auto").prompt_text
    assert "It is 22 C." in text and "Thanks" in text.split("It is 22 C.", 1)[1]
