"""The one place templates render (engine.prompt.templates): every real template of the
dataset renders a conversation with tools, a call and its result; the Jinja behaviour
templates rely on works; a template that fails names its own line."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from engine.prompt.templates import (
    TemplateRenderError,
    render_template,
    template_traits,
)
from tests.template_support import TOOL_CONVERSATION, WEATHER_TOOL, template_paths

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def plain_tokenizer(default_model_dir: Path):
    from mlx_lm.tokenizer_utils import load

    return load(default_model_dir)


def test_every_dataset_template_renders_a_conversation_with_tools(plain_tokenizer) -> None:
    """Through the tools layer, as a request with tools is served: the tool, the call's
    arguments, its result and the reply all reach the prompt, for all 40 templates."""
    from engine.tools import prepare_tool_request

    failures = []
    for path in template_paths():
        plain_tokenizer._tokenizer.chat_template = path.read_text(encoding="utf-8")
        try:
            plan = prepare_tool_request(plain_tokenizer, TOOL_CONVERSATION, [WEATHER_TOOL], "auto")
        except Exception as exc:
            failures.append(f"{path.name}: {exc}")
            continue
        text = plain_tokenizer.decode(plan.prompt_tokens)
        wanted = ("get_weather", "Paris", "Sunny, 21 degrees", "It is sunny.")
        missing = [s for s in wanted if s not in text]
        if missing:
            failures.append(f"{path.name}: prompt lacks {missing}")
    assert not failures, "\n".join(failures)


def test_templates_get_the_conversation_in_the_shape_they_accept() -> None:
    by_name = {p.name: p.read_text(encoding="utf-8") for p in template_paths()}
    # DeepSeek concatenates the arguments as text; Apertus reads flat tools and text
    # arguments; Mistral wants nine-character call ids; Gemma 2 refuses a system role.
    assert template_traits(by_name["deepseek-v3.1.jinja"]).arguments_as_text
    apertus = template_traits(by_name["apertus.jinja"])
    assert apertus.flat_tools and apertus.arguments_as_text
    assert template_traits(by_name["mistral-nemo.jinja"]).short_call_ids
    assert template_traits(by_name["gemma-2.jinja"]).fold_system
    assert template_traits(by_name["qwen3.jinja"]).renders_tools
    text = render_template(by_name["mistral-nemo.jinja"], TOOL_CONVERSATION, tools=[WEATHER_TOOL])
    calls, _ = json.JSONDecoder().raw_decode(text.split("[TOOL_CALLS]")[1])
    call_id = calls[0]["id"]
    assert len(call_id) == 9 and call_id.isalnum()
    assert f'"call_id": "{call_id}"' in text  # the result names the same call


def test_a_failing_template_names_its_line() -> None:
    template = (
        "{{ bos_token }}\n{% for m in messages %}\n"
        "{{ raise_exception('no ' + m.role) }}\n{% endfor %}"
    )
    with pytest.raises(TemplateRenderError) as err:
        render_template(template, USER)
    assert err.value.line == 3
    assert "chat template line 3" in str(err.value) and "no user" in str(err.value)
    with pytest.raises(TemplateRenderError) as err:
        render_template("ok\n{{ messages[0].content | nosuchfilter }}", USER)
    assert err.value.line == 2
    with pytest.raises(TemplateRenderError) as err:
        render_template("a\nb\n{% if x %}unclosed", USER)
    assert err.value.line == 3


def test_jinja_behaviour_real_templates_rely_on() -> None:
    template = (
        "{%- set ns = namespace(seen=0, last='') -%}"
        "{%- for m in messages -%}"
        "{%- if m.role == 'system' %}{% continue %}{% endif -%}"
        "{%- set ns.seen = ns.seen + 1 -%}{%- set ns.last = m.content -%}"
        "{%- if ns.seen == 2 %}{% break %}{% endif -%}"
        "{%- endfor -%}"
        "{{ ns.seen }}|{{ ns.last }}"
        "|{{ tools | tojson(ensure_ascii=False, separators=(',', ':')) }}"
        "|{{ {'a': 1} | tojson(indent=2) }}|{{ strftime_now('%Y') }}|{{ date_string }}"
        "|{{ bos_token }}|{{ functions | length }}"
    )
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "é"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    tools = [{"type": "function", "function": {"name": "café", "parameters": {}}}]
    text = render_template(template, messages, tools=tools, special_tokens={"bos_token": "<s>"})
    seen, last, tools_json, indented, year, date, bos, functions = text.split("|")
    assert (seen, last) == ("2", "two")
    assert tools_json == '[{"type":"function","function":{"name":"café","parameters":{}}}]'
    assert indented == '{\n  "a": 1\n}'
    assert year == str(datetime.date.today().year)
    assert date == datetime.date.today().strftime("%d %b %Y")
    assert (bos, functions) == ("<s>", "1")  # `functions` is the tools for templates reading it


def test_the_thinking_of_a_message_reaches_the_template_under_its_names() -> None:
    template = "{% for m in messages %}[{{ m.reasoning_content }}/{{ m.thinking }}]{% endfor %}"
    messages = [*USER, {"role": "assistant", "content": "a", "reasoning_content": "hmm"}]
    assert render_template(template, messages) == "[/][hmm/hmm]"


def test_templates_get_what_llama_cpps_renderer_gives_them() -> None:
    """Attribute assignment on messages (MiroThinker), `tojson` of what a filter built
    (llama.cpp's R1 template), `"text"|safe + value` left unescaped (Functionary v3.1),
    `functions` as JSON text where joined to text and `datetime` (FireFunction), and an
    empty description for each parameter where a template writes every one (gpt-oss as
    first published); the messages the caller gave are left as they were."""
    assigns = (
        "{%- for m in messages %}{%- set m.content = m.content | upper %}"
        "{%- set m.seen = 1 %}{{ m['role'] }}:{{ m.content }}{{ m.seen }};{%- endfor %}"
    )
    messages = [{"role": "user", "content": "hi"}]
    assert render_template(assigns, messages) == "user:HI1;"
    assert messages == [{"role": "user", "content": "hi"}]
    mapped = "{{ tools | map(attribute='function') | map(attribute='name') | tojson }}"
    assert render_template(mapped, USER, tools=[WEATHER_TOOL]) == '["get_weather"]'
    safe = "{{ 'Use '|safe + tools[0]['function'] | tojson }}"
    assert "&#34;" not in render_template(safe, USER, tools=[WEATHER_TOOL])
    joined = "{{ 'Functions:\\n' + functions + '\\nToday is ' + datetime }}"
    text = render_template(joined, USER, tools=[WEATHER_TOOL])
    assert json.loads(text.split("\n", 1)[1].rsplit("\nToday", 1)[0])[0]["function"]["name"] == (
        "get_weather"
    )
    assert datetime.date.today().strftime("%b %d %Y") in text
    assert render_template(joined, USER).startswith("Functions:\n\nToday is ")  # no tools
    described = (
        "{%- for t in tools %}{{ t.function.name }} "
        "{%- for k, p in t.function.parameters.properties.items() %}"
        "{{ k }}: {{ '// ' + p.description }};{%- endfor %}{%- endfor %}"
    )
    text = render_template(described, USER, tools=[WEATHER_TOOL])
    assert text == "get_weathercity: // ;days: // ;"
