"""Seed-OSS writes Qwen3-Coder's XML parameters inside its own `<seed:tool_call>` (values
without the blank lines Qwen puts around them). Its template is not in the shared dataset, so
the tiny model here carries a template written for this test in Seed-OSS's syntax (the
markers and the call layout of ByteDance-Seed/Seed-OSS-36B-Instruct's template): Corral must
serve it Seed's syntax, not Qwen's, decode a required call in it, and render it back."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from tools_support import grammar_accepts

from benchmarks.families import ASK, WEATHER, call_history
from engine.tools import prepare_tool_request
from engine.tools.dialect import template_dialect
from engine.tools.formats import QwenXmlFormat, choose_format
from engine.types import ChatRequest, SamplingSettings

# The layout Seed-OSS's template writes (its tools section and thinking budget left out).
SEED_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}<seed:bos>assistant"
    "{%- for c in m.tool_calls %}{% set f = c.function %}"
    "{{ '\\n<seed:tool_call>\\n<function=' + f.name + '>\\n' }}"
    "{%- for k, v in f.arguments | items %}"
    "{{ '<parameter=' + k + '>' + (v if v is string else v | string) + '</parameter>\\n' }}"
    "{%- endfor %}{{ '</function>\\n</seed:tool_call>' }}{%- endfor %}<seed:eos>"
    "{%- else %}<seed:bos>{{ m.role }}\\n{{ m.content }}<seed:eos>{%- endif %}"
    "{%- endfor %}"
    "{%- if tools %}<seed:bos>system\\nTools: {{ tools | tojson }}<seed:eos>{%- endif %}"
    "{%- if add_generation_prompt %}<seed:bos>assistant\\n{%- endif %}"
    "{#- <seed:think> … </seed:think> #}"
)


@pytest.fixture(scope="module")
def seed_model(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> Path:
    from benchmarks.tiny_family_model import build_family_models

    source = tmp_path_factory.mktemp("seed-template") / "seed-oss.jinja"
    source.write_text(SEED_TEMPLATE)
    out = tmp_path_factory.mktemp("seed-model")
    return build_family_models(out, default_model_dir, [source])["seed-oss"]


def test_seed_is_served_its_own_syntax_not_qwens(seed_model: Path) -> None:
    from mlx_lm.tokenizer_utils import load

    tok = load(seed_model)
    fmt = choose_format(tok)
    assert (fmt.name, fmt.native) == ("seed_xml", True)
    assert template_dialect(SEED_TEMPLATE) == ("seed_xml", "seed")
    arguments = {"city": "Paris", "days": 2, "unit": "c"}
    one = fmt.calls_as_text([("get_weather", arguments)])
    assert one == (
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
        "<parameter=days>2</parameter>\n<parameter=unit>c</parameter>\n</function>\n"
        "</seed:tool_call>"
    )
    required = prepare_tool_request(tok, ASK, [WEATHER], "required")
    hf = tok._tokenizer
    assert grammar_accepts(hf, required.constraint.source, one)
    qwen = QwenXmlFormat(tok, native=True).calls_as_text([("get_weather", arguments)])
    assert not grammar_accepts(hf, required.constraint.source, qwen)
    too_long = one.replace("Paris", "Parisparisparis")  # past maxLength 12
    assert not grammar_accepts(hf, required.constraint.source, too_long)
    content, calls = required.parse(one)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", arguments)]


def test_a_required_call_decodes_in_seeds_syntax_and_renders_back(seed_model: Path) -> None:
    from mlx_lm.tokenizer_utils import load

    from engine.engine import Engine

    eng = Engine()
    try:
        eng.load_model(str(seed_model)).result()
        result = eng.chat(
            ChatRequest(
                messages=ASK,
                sampling=SamplingSettings(max_tokens=120, seed=7, think=False),
                tools=[WEATHER],
                tool_choice="required",
                parallel_tool_calls=False,
            )
        )
    finally:
        eng.close()
    assert result.error is None, result.error
    tok = load(seed_model)
    raw = tok._tokenizer.decode(
        result.token_ids[result.stats.prompt_tokens :], skip_special_tokens=False
    )
    assert raw.startswith("<seed:tool_call>\n<function=get_weather>\n<parameter="), raw
    [call] = result.tool_calls
    jsonschema.validate(call.arguments, WEATHER["function"]["parameters"])
    history = call_history([call])  # the call and its result, as the families bench writes them
    again = prepare_tool_request(tok, history, [WEATHER], "auto").prompt_text
    # The template re-renders the call as the model wrote it (arguments as a mapping).
    assert choose_format(tok).calls_as_text([(call.name, call.arguments)]) in again
