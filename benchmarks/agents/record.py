"""Record the real request sequences of Claude Code, Codex and OpenCode as test fixtures.

    PYTHONPATH=$PWD python -m benchmarks.agents.record [--npm-folder DIR]

Installs the agents from npm into a temporary folder (or DIR), runs each once against a
capturing loopback server (benchmarks/agents/capture.py: a call of the agent's shell tool,
then a text answer), and writes what each sent to tests/fixtures/agents/<variant>.json.
Long texts are trimmed (their start kept, the length noted); the structure stays: every
field, role, tool and header. Credentials (Authorization, x-api-key, cookies) and user ids
are left out. Dev-only: nothing here ships.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks.agents.capture import Recorder, capture_server
from benchmarks.agents.run import VARIANTS, install_agents, run_agent, variant_name, versions

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "agents"
PROMPT = "List the files in this folder with the shell tool, then say done."
MODEL = "corral-test-model"
MAX_TEXT = 600  # characters a recorded text keeps
SECRET_HEADERS = {"authorization", "x-api-key", "cookie", "proxy-authorization"}
# Headers that only describe the connection: dropped, they say nothing about the client.
TRANSPORT_HEADERS = {"host", "content-length", "connection", "accept-encoding"}


def trim(value: Any) -> Any:
    """`value` with long strings cut to their start (the cut noted) and user ids scrubbed."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        return value[:MAX_TEXT] + f"…[trimmed {len(value) - MAX_TEXT} characters]"
    if isinstance(value, list):
        return [trim(v) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if key in ("user_id", "user", "safety_identifier") and isinstance(v, str):
                out[key] = "recorded-user"
            else:
                out[key] = trim(v)
        return out
    return value


def clean_headers(headers: dict[str, str]) -> dict[str, str]:
    return {
        k.lower(): v
        for k, v in sorted(headers.items())
        if k.lower() not in SECRET_HEADERS | TRANSPORT_HEADERS
    }


def record(agent: str, provider: str | None, bin_dir: Path, root: Path) -> dict[str, Any]:
    recorder = Recorder()
    server = capture_server(recorder, MODEL)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    home = root / variant_name(agent, provider)
    try:
        run = run_agent(agent, provider, url, MODEL, PROMPT, bin_dir, home, timeout=240)
    finally:
        server.shutdown()
    print(f"{run.variant}: exit {run.returncode}, {len(recorder.requests)} requests")
    if run.returncode != 0:
        print(run.stdout[-2000:], run.stderr[-2000:])
    return {
        "variant": run.variant,
        "agent": agent,
        "provider": provider,
        "prompt": PROMPT,
        "exit_code": run.returncode,
        "requests": [
            {**r, "headers": clean_headers(r["headers"]), "body": trim(r["body"])}
            for r in recorder.requests
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npm-folder", type=Path, help="install the agents here (kept)")
    parser.add_argument("--only", help="one variant (claude, codex, opencode-openai, ...)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="corral-agents-") as tmp:
        root = Path(tmp)
        bin_dir = install_agents(args.npm_folder or root / "npm")
        found = versions(bin_dir)
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for agent, provider in VARIANTS:
            if args.only and variant_name(agent, provider) != args.only:
                continue
            fixture = record(agent, provider, bin_dir, root / "homes")
            fixture["version"] = found[agent]
            path = FIXTURES / f"{fixture['variant']}.json"
            path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
