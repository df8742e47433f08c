"""Installing the coding agents from npm into a temporary folder and running one of them,
once, against a server on this machine: the pieces `record.py` and `end_to_end.py` share.

Each agent runs with a home folder of its own (a temporary one: nothing of the user's
configuration is read or written), pointed at the server by `engine.server.agents` (the
same setup `python -m engine launch` uses), with its telemetry and update checks off.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from engine.server.agents import AgentSetup, agent_setup

PACKAGES = ("@anthropic-ai/claude-code", "@openai/codex", "opencode-ai")
# (agent, OpenCode's provider): each way an agent can be pointed at the server.
VARIANTS = (("claude", None), ("codex", None), ("opencode", "openai"), ("opencode", "anthropic"))


def install_agents(folder: Path) -> Path:
    """`npm install` the three agents under `folder`; their bin folder."""
    bin_dir = folder / "node_modules" / ".bin"
    if not all((bin_dir / name).exists() for name in ("claude", "codex", "opencode")):
        subprocess.run(
            ["npm", "install", "--no-fund", "--no-audit", "--prefix", str(folder), *PACKAGES],
            check=True,
        )
    return bin_dir


def versions(bin_dir: Path) -> dict[str, str]:
    out = {}
    for name in ("claude", "codex", "opencode"):
        done = subprocess.run(
            [str(bin_dir / name), "--version"], capture_output=True, text=True, timeout=60
        )
        out[name] = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "?"
    return out


@dataclass
class AgentRun:
    variant: str
    returncode: int
    stdout: str
    stderr: str


def variant_name(agent: str, provider: str | None) -> str:
    return f"{agent}-{provider}" if provider else agent


def one_shot(setup: AgentSetup, prompt: str, model: str, resume: bool = False) -> list[str]:
    """The agent's command that answers `prompt` once and exits (`resume`: as the next
    turn of the agent's last session in this folder)."""
    if setup.agent == "claude":
        again = ["--continue"] if resume else []
        return ["claude", "-p", prompt, "--model", model, "--allowedTools", "Bash", *again]
    if setup.agent == "codex":
        flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if resume:
            return ["codex", "exec", *flags, "resume", "--last", prompt]
        return ["codex", "exec", *flags, prompt]
    again = ["--continue"] if resume else []
    return ["opencode", "run", "--model", setup.command[-1], *again, prompt]


def run_agent(
    agent: str,
    provider: str | None,
    base_url: str,
    model: str,
    prompt: str,
    bin_dir: Path,
    home: Path,
    *,
    context_length: int | None = None,
    timeout: float = 300,
    resume: bool = False,
) -> AgentRun:
    """Run `agent` once in a fresh work folder under `home`, against `base_url`."""
    setup = agent_setup(
        agent,
        base_url,
        model,
        home / "corral",
        context_length=context_length,
        opencode_provider=provider or "openai",
    )
    setup.write_files()
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "notes.txt").write_text("hello\n")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TERM": "dumb",
        "NO_COLOR": "1",
        **setup.env,
    }
    command = one_shot(setup, prompt, model, resume)
    command[0] = str(bin_dir / command[0])
    try:
        done = subprocess.run(
            command,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code = -9
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = (exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or "") + (
            f"\n(timed out after {timeout:.0f} s)"
        )
    return AgentRun(variant_name(agent, provider), code, out, err)
