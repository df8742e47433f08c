"""How each coding agent (Claude Code, Codex, OpenCode) is pointed at a Corral server.

One place says what to set for each agent: the environment variables, the command line,
and, for Codex and OpenCode, a configuration file. Those files go into a folder Corral owns
(`config_dir`, inside Corral's data folder or a temporary folder), never into the agent's
own configuration: Codex reads its folder from `CODEX_HOME`, OpenCode its file from
`OPENCODE_CONFIG`. The server's key is never written in a file: both read it from
`CORRAL_API_KEY`. Every agent is kept off the network but for the server: telemetry,
update checks and model-list downloads are switched off by their own variables.

`python -m engine launch` runs an agent this way (or prints it); the app writes the same
setup with a launcher script (`write_launcher`) into its folder and shows the one command
that runs it (`run_command`); the dev scripts under benchmarks/agents/ run the agents for
recording and end-to-end checks.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from engine.files import check_inside

AGENTS = ("claude", "codex", "opencode")
AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex", "opencode": "OpenCode"}
INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "opencode": "npm install -g opencode-ai",
}
KEY_VARIABLE = "CORRAL_API_KEY"  # where an agent's launcher reads the server's key
_KEY_ENV = ("ANTHROPIC_AUTH_TOKEN", KEY_VARIABLE)  # the variables that carry the key
# OpenCode speaks to a server through one of two AI-SDK providers.
OPENCODE_PROVIDERS = {"openai": "@ai-sdk/openai-compatible", "anthropic": "@ai-sdk/anthropic"}
PROVIDER_ID = "corral"  # the provider's name in Codex's and OpenCode's configuration

_QUIET_CLAUDE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}
_QUIET_OPENCODE = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


@dataclass(frozen=True)
class AgentSetup:
    """What running `agent` against a server takes: its command, the variables to set,
    and the configuration files to write (path -> text) in Corral's own folder."""

    agent: str
    command: list[str]
    env: dict[str, str]
    files: dict[Path, str] = field(default_factory=dict)

    def write_files(self, folder: Path | None = None) -> None:
        """Write the configuration files; each must lie inside `folder` (Corral's own,
        where given)."""
        for path, text in self.files.items():
            if folder is not None:
                check_inside(path, folder)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def launcher(self) -> str:
        """A POSIX shell script that sets the agent up and runs it, its arguments passed on.
        The key is never written: the variables that carry it read CORRAL_API_KEY from the
        environment ("corral" when unset, which a server without a key ignores)."""
        name, program = AGENT_NAMES[self.agent], self.command[0]
        lines = [
            "#!/bin/sh",
            f"# Written by Corral: {name} against Corral's local server.",
            f"# The server's key, if it has one, comes from {KEY_VARIABLE}; Corral never"
            " writes it in a file.",
            f"command -v {program} >/dev/null 2>&1 || {{",
            f'  echo "{name} is not installed here: {INSTALL[self.agent]}" >&2',
            "  exit 127",
            "}",
        ]
        for variable, value in self.env.items():
            if variable in _KEY_ENV:
                lines.append(f'export {variable}="${{{KEY_VARIABLE}:-corral}}"')
            else:
                lines.append(f"export {variable}={shlex.quote(value)}")
        lines.append(f'exec {shlex.join(self.command)} "$@"')
        return "\n".join(lines) + "\n"

    def write_launcher(self, folder: Path) -> Path:
        """Write the configuration files and the launcher (`folder`/AGENT.sh, executable),
        each inside `folder` (Corral's own); returns the launcher's path."""
        self.write_files(folder)
        path = folder / f"{self.agent}.sh"
        folder.mkdir(parents=True, exist_ok=True)
        check_inside(path, folder)
        path.write_text(self.launcher(), encoding="utf-8")
        path.chmod(0o755)
        return path

    def instructions(self) -> str:
        """The setup as shell lines a user can copy: files to write, variables, command."""
        lines: list[str] = []
        for path, text in self.files.items():
            lines.append(f"# write {path}:")
            lines += [f"#   {line}".rstrip() for line in text.splitlines()]
        lines += [f"export {name}={shlex.quote(value)}" for name, value in self.env.items()]
        lines.append(shlex.join(self.command))
        return "\n".join(lines)


def agent_setup(
    agent: str,
    base_url: str,
    model: str,
    config_dir: Path,
    *,
    api_key: str | None = None,
    context_length: int | None = None,
    opencode_provider: str = "openai",
) -> AgentSetup:
    """How to run `agent` against the server at `base_url` (no trailing /v1) serving
    `model`; configuration files go under `config_dir`. ValueError for an unknown agent."""
    key = api_key or "corral"  # the agents want a key; a server without one ignores it
    base_url = base_url.rstrip("/")
    if agent == "claude":
        env = {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_AUTH_TOKEN": key,
            "ANTHROPIC_MODEL": model,
            # The small model Claude Code uses for titles and summaries: the same one.
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,
            **_QUIET_CLAUDE,
        }
        return AgentSetup(agent, ["claude", "--model", model], env)
    if agent == "codex":
        home = config_dir / "codex"
        env = {"CODEX_HOME": str(home), "CORRAL_API_KEY": key}
        return AgentSetup(
            agent,
            ["codex", "--model", model],
            env,
            {home / "config.toml": _codex_config(base_url, model, context_length)},
        )
    if agent == "opencode":
        if opencode_provider not in OPENCODE_PROVIDERS:
            raise ValueError(
                f"OpenCode's provider is one of {', '.join(OPENCODE_PROVIDERS)}, "
                f"not {opencode_provider!r}"
            )
        path = config_dir / "opencode" / "opencode.json"
        # The key goes in the environment, as Codex's does: the file names the variable.
        env = {"OPENCODE_CONFIG": str(path), "CORRAL_API_KEY": key, **_QUIET_OPENCODE}
        config = _opencode_config(base_url, model, opencode_provider, context_length)
        return AgentSetup(
            agent, ["opencode", "--model", f"{PROVIDER_ID}/{model}"], env, {path: config}
        )
    raise ValueError(f"unknown agent {agent!r}; Corral can launch {', '.join(AGENTS)}")


def _codex_config(base_url: str, model: str, context_length: int | None) -> str:
    lines = [
        "# Written by Corral (python -m engine launch codex): Codex against a local server.",
        f"model = {json.dumps(model)}",
        f'model_provider = "{PROVIDER_ID}"',
        "check_for_update_on_startup = false",
    ]
    if context_length:
        lines.append(f"model_context_window = {context_length}")
    lines += [
        "",
        "[analytics]",
        "enabled = false",
        "",
        f"[model_providers.{PROVIDER_ID}]",
        'name = "Corral"',
        f"base_url = {json.dumps(base_url + '/v1')}",
        'wire_api = "responses"',
        'env_key = "CORRAL_API_KEY"',
        "",
    ]
    return "\n".join(lines)


def _opencode_config(base_url: str, model: str, provider: str, context_length: int | None) -> str:
    card: dict[str, object] = {"name": model, "tool_call": True}
    if context_length:
        card["limit"] = {"context": context_length, "output": min(8192, context_length // 4)}
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"{PROVIDER_ID}/{model}",
        "small_model": f"{PROVIDER_ID}/{model}",
        "provider": {
            PROVIDER_ID: {
                "npm": OPENCODE_PROVIDERS[provider],
                "name": "Corral",
                "options": {"baseURL": base_url + "/v1", "apiKey": "{env:CORRAL_API_KEY}"},
                "models": {model: card},
            }
        },
    }
    return json.dumps(config, indent=2) + "\n"


def run_command(launcher: Path, api_key: str | None = None) -> str:
    """The one command that runs an agent through `launcher`: `sh '…/claude.sh'`, given
    the server's key for this run when the server has one."""
    command = shlex.join(["sh", str(launcher)])
    return f"{KEY_VARIABLE}={shlex.quote(api_key)} {command}" if api_key else command
