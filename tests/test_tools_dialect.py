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
    assert main(["info", str(tiny_model_dir)]) == 0
    text = capsys.readouterr().out
    assert f"tool calls: {DESCRIBED}" in text and "thinking: none" in text


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
