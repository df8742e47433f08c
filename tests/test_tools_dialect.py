"""`python -m engine info` names a model's dialect: its tool-call syntax (or that calls are
described in the system prompt) and its thinking syntax."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.tools.dialect import DESCRIBED, describe_dialect
from tests.template_support import template_text, template_tokenizer


def test_info_says_a_model_without_tool_syntax_gets_calls_in_the_system_prompt(
    tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", str(tiny_model_dir), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["tool_syntax"].startswith(DESCRIBED) and not found["tool_syntax_native"]
    assert found["thinking_syntax"] == "none" and found["thinking"] is None
    assert "reads no `tools` and renders no past `tool_calls`" in found["tool_syntax_why"]
    assert main(["info", str(tiny_model_dir)]) == 0
    text = capsys.readouterr().out
    assert f"tool calls: {DESCRIBED}" in text and "thinking: none" in text
    assert "Hermes <tool_call> JSON" in text  # which syntax the fallback chose, and why


FURTHER = Path(__file__).resolve().parent / "fixtures" / "chat-templates"


@pytest.mark.parametrize(
    ("name", "syntax", "words"),
    [
        ("firefunction-v2.jinja", "firefunction_v2", "functools["),
        ("command-r-plus.jinja", "command_r_plus", "Action:"),
        ("functionary-v3.1.jinja", "functionary_v3_1", "<function=NAME>"),
        ("nemotron-super-v1.5.jinja", "nemotron_super", "<TOOLCALL>"),
        ("deepseek-r1-llamacpp.jinja", "deepseek_r1_llamacpp", "text given as null"),
        ("mirothinker-v1.jinja", "mirothinker", "written into the turn's text"),
        ("gpt-oss-first.jinja", "harmony_first", "ended `<|end|>`"),
    ],
)
def test_info_names_the_syntax_of_each_further_family(
    tmp_path: Path,
    default_model_dir: Path,
    tiny_model_dir: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    syntax: str,
    words: str,
) -> None:
    """`engine info MODEL` on a model carrying the family's public template (its markers
    as tokens) names the syntax and says what it is."""
    from benchmarks.tiny_family_model import build_family_tokenizer

    template = (FURTHER / name).read_text()
    folder = build_family_tokenizer(tmp_path / "m", default_model_dir, template)
    (folder / "config.json").write_bytes((tiny_model_dir / "config.json").read_bytes())
    for weights in tiny_model_dir.glob("*.safetensors"):  # not read: info loads no weights
        (folder / weights.name).symlink_to(weights)
    assert main(["info", str(folder), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["tool_syntax"], found["tool_syntax_native"]) == (syntax, True)
    assert words in found["tool_syntax_why"], found["tool_syntax_why"]
    assert main(["info", str(folder)]) == 0
    assert f"tool calls: {syntax}" in capsys.readouterr().out


def test_info_names_the_thinking_syntax(
    thinking_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", str(thinking_model_dir), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["thinking_syntax"] == "think" and found["thinking"]["steerable"]


@pytest.mark.parametrize(
    ("name", "thinking"),
    [("qwen3.jinja", "think"), ("gpt-oss.jinja", "harmony"), ("gemma-4.jinja", "gemma4_channel")],
)
def test_dialect_of_real_templates(
    tmp_path: Path, default_model_dir: Path, name: str, thinking: str
) -> None:
    from mlx_lm.utils import load_tokenizer

    template = template_text(name)
    folder = template_tokenizer(default_model_dir, template, tmp_path / "tok")
    found = describe_dialect(load_tokenizer(folder))
    assert found["thinking_syntax"] == thinking
    assert found["template_renders_tools"]
    assert found["tool_syntax"]  # a format's name, native or described
