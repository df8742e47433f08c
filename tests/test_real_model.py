"""The embedded default model answers for real through the engine and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.engine import Engine
from engine.types import ChatRequest, SamplingSettings, StopReason

REPO = Path(__file__).resolve().parents[1]


def test_capital_of_france_greedy(default_engine: Engine) -> None:
    result = default_engine.chat(
        ChatRequest(
            [{"role": "user", "content": "What is the capital of France?"}],
            SamplingSettings(temperature=0.0, max_tokens=16),
        )
    )
    assert "Paris" in result.text
    assert result.stop_reason in (StopReason.EOS, StopReason.LENGTH)


def test_same_seed_same_sampled_text(default_engine: Engine) -> None:
    request = ChatRequest(
        [{"role": "user", "content": "Name a colour."}],
        SamplingSettings(temperature=1.0, seed=42, max_tokens=8),
    )
    first = default_engine.chat(request)
    second = default_engine.chat(request)
    assert first.text and first.text == second.text


def test_cli_chat_json(tiny_model_dir) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "chat",
            "--model",
            str(tiny_model_dir),
            "--prompt",
            "Hi",
            "--max-tokens",
            "4",
            "--temperature",
            "0",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 3, proc.stderr  # cut at its 4 tokens, not ended by the model
    out = json.loads(proc.stdout)
    assert out["stop_reason"] == "length" and out["ending"] == "cut"
    assert out["stats"]["generated_tokens"] == 4
    assert out["stats"]["prompt_tokens"] > 0


def test_cli_reports_a_missing_model_clearly(tmp_path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "chat",
            "--model",
            str(tmp_path / "nope"),
            "--prompt",
            "Hi",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert "no such model folder" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_import_gguf(default_gguf, tmp_path) -> None:
    out = tmp_path / "smol"
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "import-gguf", str(default_gguf), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
