"""`python -m engine launch claude|codex|opencode`: one step from Corral to a coding agent.

Finds the server on the given loopback port, or starts `python -m engine serve` there
(answering any model name, since agents send their own) and waits for its model; then runs
the agent with the environment and configuration `engine.server.agents` gives it, and stops
the server it started when the agent exits. Configuration files go into Corral's data
folder (`agents/`), never into the agent's own. `--print` only prints what to set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.server.agents import INSTALL, AgentSetup, agent_setup
from engine.server.config import data_dir

START_TIMEOUT_S = 900  # loading a model the first time can mean a download


@dataclass(frozen=True)
class Running:
    """A server answering on `url`: its model's name and context length."""

    url: str
    model: str
    context_length: int | None


def agents_dir() -> Path:
    """Where Corral keeps the agents' configuration it writes."""
    return data_dir() / "agents"


def probe(url: str, api_key: str | None = None) -> Running | None:
    """The server at `url` and its model, or None if nothing answers there (or it has
    no model loaded yet)."""
    request = urllib.request.Request(url + "/v1/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            cards: list[dict[str, Any]] = json.load(response).get("data") or []
    except (OSError, ValueError, urllib.error.URLError):
        return None
    if not cards:
        return None
    return Running(url, str(cards[0]["id"]), cards[0].get("context_length"))


def start_server(model: str, port: int, api_key: str | None) -> subprocess.Popen[bytes]:
    """`python -m engine serve` on loopback `port`, answering any model name."""
    command = [sys.executable, "-m", "engine", "serve", "--model", model, "--port", str(port)]
    command.append("--serve-any-model-name")
    env = dict(os.environ)
    if api_key:
        env["CORRAL_API_KEY"] = api_key
    return subprocess.Popen(command, env=env)


def wait_for(
    url: str, api_key: str | None, server: subprocess.Popen[bytes], timeout: float
) -> Running:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server stopped (exit code {server.returncode})")
        if (running := probe(url, api_key)) is not None:
            return running
        time.sleep(0.5)
    raise RuntimeError(f"the server did not answer on {url} within {timeout:.0f} s")


def setup_for(
    agent: str, running: Running, api_key: str | None, provider: str, folder: Path
) -> AgentSetup:
    return agent_setup(
        agent,
        running.url,
        running.model,
        folder,
        api_key=api_key,
        context_length=running.context_length,
        opencode_provider=provider,
    )


def launch(
    agent: str,
    *,
    model: str = "default",
    port: int = 8080,
    api_key: str | None = None,
    provider: str = "openai",
    print_only: bool = False,
    agent_args: list[str] | None = None,
) -> int:
    """Run `agent` against the server on `port` (started if none answers), or print what
    to set. The agent's exit code."""
    url = f"http://127.0.0.1:{port}"
    folder = agents_dir()
    running = probe(url, api_key)
    if print_only:
        if running is None:
            print(
                f"# start the server first:\npython -m engine serve --model {model} --port {port}"
                " --serve-any-model-name"
            )
            running = Running(url, model, None)
        setup = setup_for(agent, running, api_key, provider, folder)
        print(setup.instructions())
        return 0
    program = shutil.which(agent)
    if program is None:
        print(
            f"{agent} is not installed ({INSTALL[agent]}); to set it up by hand:", file=sys.stderr
        )
        running = running or Running(url, model, None)
        print(setup_for(agent, running, api_key, provider, folder).instructions())
        return 127
    server = None
    if running is None:
        print(f"Starting the server on {url} with {model}…", file=sys.stderr)
        server = start_server(model, port, api_key)
    try:
        if server is not None:
            running = wait_for(url, api_key, server, START_TIMEOUT_S)
        assert running is not None
        setup = setup_for(agent, running, api_key, provider, folder)
        setup.write_files(folder)
        env = {**os.environ, **setup.env}
        return subprocess.call([program, *setup.command[1:], *(agent_args or [])], env=env)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
