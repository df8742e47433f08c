"""`python -m engine chat` with a model that thinks first (the tiny thinking fixture), run
as a user runs it: `--think`/`--no-think`, `--max-thinking-tokens N`, and `--json`
reporting the reasoning apart from the answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

REPO = Path(__file__).resolve().parents[1]
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 12}},
    "required": ["a", "b"],
}


def _chat(model: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine", "chat", "--model", str(model), "--prompt", "Hi"]
    command += ["--temperature", "0.8", "--seed", "3", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=REPO)


def test_think_with_a_budget_reports_the_reasoning_apart(thinking_model_dir, tmp_path):
    schema = tmp_path / "pair.json"
    schema.write_text(json.dumps(SCHEMA))
    proc = _chat(
        thinking_model_dir,
        "--think",
        "--max-thinking-tokens",
        "7",
        "--max-tokens",
        "60",
        "--json-schema",
        str(schema),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr  # 0: the model finished its answer itself
    out = json.loads(proc.stdout)
    assert out["ending"] == "finished" and out["filled_paths"] == []
    assert isinstance(out["reasoning"], str) and out["reasoning"]
    assert out["stats"]["thinking_tokens"] == 7 and out["stats"]["thinking_forced_end"]
    assert out["stats"]["answer_tokens"] > 0
    assert "<think>" not in out["text"] and "</think>" not in out["text"]
    assert out["reasoning"] not in out["text"]
    jsonschema.validate(json.loads(out["text"]), SCHEMA)


def test_no_think_answers_at_once(thinking_model_dir):
    proc = _chat(thinking_model_dir, "--no-think", "--max-tokens", "6", "--json")
    assert proc.returncode == 3, proc.stderr  # cut at its 6 tokens: not the model's end
    out = json.loads(proc.stdout)
    assert "reasoning" not in out
    assert out["stats"]["thinking_tokens"] == 0 and out["stats"]["generated_tokens"] == 6


def test_streamed_thinking_goes_to_stderr_and_the_answer_to_stdout(thinking_model_dir):
    proc = _chat(thinking_model_dir, "--think", "--max-thinking-tokens", "4", "--max-tokens", "12")
    assert proc.returncode == 3, proc.stderr  # cut at its 12 tokens
    assert "\x1b[2m" in proc.stderr  # the thinking, dimmed, apart from the answer
    assert "\x1b[2m" not in proc.stdout and "<think>" not in proc.stdout


def test_a_negative_budget_is_refused_clearly(thinking_model_dir):
    proc = _chat(thinking_model_dir, "--max-thinking-tokens", "-1", "--json")
    assert proc.returncode != 0
    assert "max_thinking_tokens" in proc.stderr and "Traceback" not in proc.stderr
