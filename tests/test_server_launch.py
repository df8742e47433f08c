"""`python -m engine launch` and the agents' setup (engine/server/agents.py,
engine/server/launch.py): each agent is pointed at the server by its own variables and a
configuration file inside Corral's folder, and `--print` says exactly that."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import serving

from engine.cli import main
from engine.engine import Engine
from engine.errors import CorralError
from engine.server import HTTPServer
from engine.server.agents import agent_setup
from engine.server.launch import Running, probe

URL = "http://127.0.0.1:8123"


def test_claude_code_is_pointed_by_its_variables(tmp_path: Path) -> None:
    setup = agent_setup("claude", URL, "m", tmp_path, api_key="k")
    assert setup.env["ANTHROPIC_BASE_URL"] == URL and setup.env["ANTHROPIC_AUTH_TOKEN"] == "k"
    assert setup.env["ANTHROPIC_MODEL"] == "m" and setup.env["DISABLE_TELEMETRY"] == "1"
    assert setup.files == {} and setup.command == ["claude", "--model", "m"]


def test_codex_gets_a_responses_provider_in_a_home_of_corrals(tmp_path: Path) -> None:
    setup = agent_setup("codex", URL + "/", "m", tmp_path, context_length=4096)
    ((path, text),) = setup.files.items()
    assert path == tmp_path / "codex" / "config.toml" and setup.env["CODEX_HOME"] == str(
        path.parent
    )
    config = tomllib.loads(text)
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == URL + "/v1" and provider["wire_api"] == "responses"
    assert config["model"] == "m" and config["model_context_window"] == 4096
    assert setup.env[provider["env_key"]] == "corral"


@pytest.mark.parametrize(
    ("provider", "package"),
    [("openai", "@ai-sdk/openai-compatible"), ("anthropic", "@ai-sdk/anthropic")],
)
def test_opencode_gets_either_provider(tmp_path: Path, provider: str, package: str) -> None:
    setup = agent_setup("opencode", URL, "m", tmp_path, opencode_provider=provider)
    ((path, text),) = setup.files.items()
    assert setup.env["OPENCODE_CONFIG"] == str(path)
    config = json.loads(text)
    assert config["model"] == "corral/m" and setup.command[-1] == "corral/m"
    entry = config["provider"]["corral"]
    assert entry["npm"] == package and entry["options"]["baseURL"] == URL + "/v1"
    assert "m" in entry["models"]


def test_files_are_written_only_inside_corrals_folder(tmp_path: Path) -> None:
    setup = agent_setup("codex", URL, "m", tmp_path / "agents")
    setup.write_files(tmp_path / "agents")
    assert (tmp_path / "agents" / "codex" / "config.toml").is_file()
    with pytest.raises(CorralError, match="not inside"):
        setup.write_files(tmp_path / "elsewhere")


def test_unknown_agents_and_providers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="claude, codex, opencode"):
        agent_setup("aider", URL, "m", tmp_path)
    with pytest.raises(ValueError, match="openai, anthropic"):
        agent_setup("opencode", URL, "m", tmp_path, opencode_provider="bedrock")


def test_instructions_are_shell_lines(tmp_path: Path) -> None:
    text = agent_setup("claude", URL, "my model", tmp_path).instructions()
    assert f"export ANTHROPIC_BASE_URL={URL}" in text.splitlines()
    assert text.splitlines()[-1] == "claude --model 'my model'"


@pytest.fixture(scope="module")
def served(tiny_engine: Engine) -> Iterator[HTTPServer]:
    with serving(tiny_engine) as server:
        yield server


def test_probe_finds_a_running_server_and_its_model(
    served: HTTPServer, tiny_engine: Engine
) -> None:
    info = tiny_engine.snapshot.model
    assert info is not None
    assert probe(served.url) == Running(served.url, info.name, info.context_length)
    assert probe("http://127.0.0.1:9") is None  # nothing listens on the discard port


def test_launch_print_names_the_running_servers_model(
    served: HTTPServer, tiny_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    info = tiny_engine.snapshot.model
    assert info is not None
    assert main(["launch", "claude", "--print", "--port", served.url.rsplit(":", 1)[1]]) == 0
    out = capsys.readouterr().out
    assert f"export ANTHROPIC_BASE_URL={served.url}" in out
    assert f"export ANTHROPIC_MODEL={info.name}" in out and "start the server" not in out


def test_launch_print_without_a_server_says_how_to_start_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["launch", "codex", "--print", "--port", "9", "--model", "default"]) == 0
    out = capsys.readouterr().out
    assert "python -m engine serve --model default --port 9 --serve-any-model-name" in out
    assert 'wire_api = "responses"' in out and "export CODEX_HOME=" in out


@pytest.mark.parametrize("agent", ["codex", "opencode"])
def test_the_servers_key_is_never_written_in_a_file(tmp_path: Path, agent: str) -> None:
    setup = agent_setup(agent, URL, "m", tmp_path, api_key="secret-key-123")
    assert all("secret-key-123" not in text for text in setup.files.values())
    assert setup.env["CORRAL_API_KEY"] == "secret-key-123"
    if agent == "opencode":  # OpenCode substitutes the variable into its provider's options
        options = json.loads(next(iter(setup.files.values())))["provider"]["corral"]["options"]
        assert options["apiKey"] == "{env:CORRAL_API_KEY}"


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode"])
def test_a_launcher_runs_the_agent_set_up_with_the_key_from_the_environment(
    tmp_path: Path, agent: str
) -> None:
    """The app's one command: `sh …/AGENT.sh` sets the agent's variables (the key read from
    CORRAL_API_KEY, never written) and runs it with its arguments. Here the agent is a
    stand-in program on PATH that prints what it was given."""
    import os
    import subprocess

    from engine.server.agents import run_command

    folder = tmp_path / "Corral data" / "agents"  # a space, as in "Application Support"
    setup = agent_setup(agent, URL, "m", folder, api_key="secret-key-123")
    launcher = setup.write_launcher(folder)
    assert launcher == folder / f"{agent}.sh" and os.access(launcher, os.X_OK)
    assert all("secret-key-123" not in p.read_text() for p in folder.rglob("*") if p.is_file())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / setup.command[0]
    program.write_text('#!/bin/sh\nenv\necho "ARGS $*"\n')
    program.chmod(0o755)
    command = run_command(launcher, "secret-key-123")
    assert command.startswith("CORRAL_API_KEY=secret-key-123 sh ")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(command + " --print hi", shell=True, env=env, capture_output=True)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    assert f"ARGS {' '.join(setup.command[1:])} --print hi" in out
    key_name = "ANTHROPIC_AUTH_TOKEN" if agent == "claude" else "CORRAL_API_KEY"
    assert f"{key_name}=secret-key-123" in out.splitlines()
    for name, value in setup.env.items():
        if name != key_name:
            assert f"{name}={value}" in out.splitlines()
    # no key given: the placeholder a server without a key ignores
    bare = subprocess.run(run_command(launcher), shell=True, env=env, capture_output=True)
    assert f"{key_name}=corral" in bare.stdout.decode().splitlines()
    # the agent missing: it says how to install it
    program.unlink()
    missing = subprocess.run(run_command(launcher), shell=True, env=env, capture_output=True)
    assert missing.returncode == 127 and b"is not installed here: npm install -g" in missing.stderr
