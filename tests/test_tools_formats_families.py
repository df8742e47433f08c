"""Every chat template of the dataset (`../shared/datasets/chat-templates`, read in place)
and of the further families kept as fixtures (`tests/fixtures/chat-templates`, their
sources in its SOURCES.tsv) served in its family's own call syntax.

For each template a tiny random model carries the template and its markers as added
tokens (benchmarks/tiny_family_model.py). The checks: a template with tool support is
never served by the fallback, and each syntax names the templates it is checked against;
the grammar accepts calls written the family's way (one, and two where the family allows
parallel calls) and refuses bad arguments, unknown tools and calls a named tool_choice
excludes; a marker that is a special token is accepted as that token and never as its
characters; a required call decoded by the engine comes out in the family's syntax
(checked by the family's own marker, written here, not by Corral's parser), its markers
the special tokens, parses, and its arguments validate with `jsonschema`; the call, its
result and a follow-up reply render through the template again, the call token for token
as the model wrote it (the prefix cache reuses it on the next turn).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from shared_datasets import DATASETS, dataset
from tools_support import grammar_accepts

from benchmarks.families import rendered_back
from engine.tools import prepare_tool_request
from engine.tools.formats import FORMATS, choose_format, has_tool_support

FOLDER = DATASETS / "chat-templates"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "chat-templates"
FIXTURE_NAMES = sorted(p.stem for p in FIXTURES.glob("*.jinja"))
NAMES = sorted(
    [*(p.stem for p in FOLDER.glob("*.jinja")), *FIXTURE_NAMES]
    if FOLDER.is_dir()
    else ["(missing)"]
)

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
    # (Gemma 4's template writes the arguments in the order of their names: the grammar too)
    "gemma-4": ("gemma4", "<|tool_call>call:get_weather{"),
    # llama.cpp's GLM-4.5 template: no newline after the name or between arguments
    "glm-4.5": ("glm", "<tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>"),
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
    # the further families (tests/fixtures/chat-templates)
    "command-r-plus": (
        "command_r_plus",
        '\nAction:\n```json\n[\n    {\n        "tool_name": "get_weather",\n'
        '        "parameters": {\n            "city": ',
    ),
    "deepseek-r1-llamacpp": (
        "deepseek_r1_llamacpp",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{",
    ),
    "firefunction-v2": ("firefunction_v2", ' functools[{"name": "get_weather", "arguments": {'),
    "functionary-v3.1": ("functionary_v3_1", '<function=get_weather>{"city": '),
    "gpt-oss-first": (
        "harmony_first",
        " to=functions.get_weather<|channel|>commentary json<|message|>{",
    ),
    "mirothinker-v1": (
        "mirothinker",
        "<use_mcp_tool>\n<server_name>generic-extras</server_name>\n"
        "<tool_name>get_weather</tool_name>\n<arguments>\n{",
    ),
    "nemotron-super-v1.5": ("nemotron_super", '<TOOLCALL>[{"name": "get_weather"'),
    "seed-oss": ("seed_xml", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>"),
}
# Templates that cannot render a past call as the model writes it (see the test).
NOT_RENDERED_BACK = {"gemma-3-vllm-pythonic"}
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
    paths = [*sorted(folder.glob("*.jinja")), *sorted(FIXTURES.glob("*.jinja"))]
    return build_family_models(tmp_path_factory.mktemp("families"), default_model_dir, paths)


def template_path(name: str) -> Path:
    """The template file `name` (with its extension) in the dataset or the fixtures."""
    for folder in (FIXTURES, dataset("chat-templates")):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(name)


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
    for path in [*sorted(folder.glob("*.jinja")), *sorted(FIXTURES.glob("*.jinja"))]:
        template = path.read_text()
        assert (path.stem in EXPECTED) != (path.stem in NO_TOOLS), path.stem
        assert has_tool_support(template) == (path.stem in EXPECTED), path.stem


def test_each_syntax_names_the_public_templates_it_is_checked_against() -> None:
    """Every registered syntax names its templates, each of them a fixture or a dataset
    file whose source SOURCES.tsv records, and each detected as that syntax; every template
    with tools is named by the syntax that serves it."""
    named: dict[str, str] = {}
    for kind in FORMATS:
        assert kind.checked_against, f"{kind.__name__} names no template it is checked against"
        for file in kind.checked_against:
            path = template_path(file)
            sources = (path.parent / "SOURCES.tsv").read_text(encoding="utf-8")
            assert f"\n{file}\t" in sources, f"{file}: no source in {path.parent}/SOURCES.tsv"
            detected = next(k for k in FORMATS if k.detect(path.read_text(encoding="utf-8")))
            assert detected is kind, (file, detected.__name__, kind.__name__)
            named[path.stem] = kind.name
    for name, (syntax, _) in EXPECTED.items():
        assert named.get(name) == syntax, f"{name} is not named by the {syntax} syntax"


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


def _special_ids(hf: Any) -> dict[int, str]:
    """The tokenizer's special added tokens: id -> text."""
    decoder = getattr(hf, "added_tokens_decoder", None) or {}
    return {int(i): t.content for i, t in decoder.items() if getattr(t, "special", False)}


def _ids_accepted(hf: Any, grammar: str, ids: list[int]) -> bool:
    from llguidance import LLMatcher
    from tools_support import ll_tokenizer

    matcher = LLMatcher(ll_tokenizer(hf), grammar, log_level=0)
    return matcher.consume_tokens(ids) and matcher.is_accepting()


# The families whose call markers include a special token of their tokenizer; every other
# family's markers are ordinary text (checked below, so a family that gains one is named).
SPECIAL_MARKERS = frozenset(
    {
        "apertus",
        "command-r7b",
        "deepseek-r1-distill-qwen",
        "deepseek-r1-llamacpp",
        "deepseek-v3.1",
        "gemma-4",
        "gpt-oss",
        "gpt-oss-first",
        "granite-3.3",
        "kimi-k2",
        "kimi-k2-thinking",
        "kimi-k3",
        "lfm2-llamacpp",
        "magistral-small-2509",
        "mistral-nemo",
        "mistral-small-3.1",
        "mistral-small-3.2",
        "phi-4-mini",
    }
)
FAMILY_NAMES = sorted(EXPECTED) if FOLDER.is_dir() else NAMES


def _call_markers(family_models: Any, name: str) -> tuple[Any, Any, list[int], list[int]]:
    """(tokenizer, HF tokenizer, a call's ids, the special tokens among them)."""
    tok = _tokenizer(family_models, name)
    hf = tok._tokenizer
    ids = hf.encode(choose_format(tok).calls_as_text([GOOD]), add_special_tokens=False)
    return tok, hf, ids, [t for t in ids if t in _special_ids(hf)]


def test_the_other_families_markers_are_ordinary_text(family_models) -> None:
    others = [n for n in FAMILY_NAMES if n not in SPECIAL_MARKERS]
    with_special = [n for n in others if _call_markers(family_models, n)[3]]
    assert with_special == [], "add these to SPECIAL_MARKERS: their markers are special tokens"


@pytest.mark.parametrize("name", [n for n in FAMILY_NAMES if n in SPECIAL_MARKERS])
def test_call_markers_that_are_special_tokens_are_written_as_those_tokens(
    family_models, name: str
) -> None:
    """A marker that is one special token is accepted as that token's id, and its
    characters spelled in ordinary tokens are refused: the model writes the token it was
    trained on, never the text of it (`<｜tool▁calls▁begin｜>` in byte pieces)."""
    from engine.prompt.shield import _plain_tokenizer

    tok, hf, ids, markers = _call_markers(family_models, name)
    assert markers, f"{name}: no special token among its call's markers"
    grammar = prepare_tool_request(tok, ASK, TOOLS, "required").constraint.source
    assert _ids_accepted(hf, grammar, ids), hf.decode(ids)
    first = ids.index(markers[0])
    marker_text = _special_ids(hf)[markers[0]]
    spelled = _plain_tokenizer(hf).encode(marker_text, add_special_tokens=False).ids
    assert not _ids_accepted(hf, grammar, [*ids[:first], *spelled, *ids[first + 1 :]]), name


@pytest.mark.parametrize("name", sorted(EXPECTED) if FOLDER.is_dir() else NAMES)
def test_the_template_renders_a_past_call_back_as_the_model_wrote_it(
    family_models, name: str
) -> None:
    """One call and, where the family writes several, two, given back as history: the
    template writes them exactly as the format writes them (so as the grammar let the model
    write them), but for vLLM's Gemma 3 template, which drops the commas between arguments
    and refuses the calls written as text."""
    from engine.tools.formats.fitting import ONE, TWO, renders_back

    fmt = choose_format(_tokenizer(family_models, name))
    back = renders_back(fmt, ONE) and (not fmt.parallel or renders_back(fmt, TWO))
    assert back == (name not in NOT_RENDERED_BACK), (name, fmt.fitted)


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
    reply = result.reply_token_ids
    raw = tok._tokenizer.decode(reply, skip_special_tokens=False)
    assert EXPECTED[name][1] in raw, raw
    # each marker the reply holds is its special token (ids, not only the text)
    special = _special_ids(tok._tokenizer)
    canonical = tok._tokenizer.encode(raw, add_special_tokens=False)
    assert [t for t in reply if t in special] == [t for t in canonical if t in special], raw
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
    plan = prepare_tool_request(tok, history, TOOLS, "auto")
    again = plan.prompt_text
    assert "22 C and sunny" in again
    assert result.tool_calls[0].name in again.split("Weather in Paris?", 1)[1]
    if name not in NOT_RENDERED_BACK:  # the reply, token for token (its free text's own)
        assert rendered_back(tok, reply, plan.prompt_tokens), (raw, again)
    follow = [
        *history,
        {"role": "assistant", "content": "It is 22 C."},
        {"role": "user", "content": "Thanks"},
    ]
    text = prepare_tool_request(tok, follow, TOOLS, "auto").prompt_text
    assert "It is 22 C." in text and "Thanks" in text.split("It is 22 C.", 1)[1]
