"""Run the real coding agents end to end against `python -m engine serve`.

    PYTHONPATH=$PWD python -m benchmarks.agents.end_to_end [--npm-folder DIR] [--only VARIANT]

Builds the tiny random model with a long context (benchmarks/tiny_model.py, `context`),
starts `python -m engine serve` on it (a loopback port, any model name answered), installs
the agents from npm into a temporary folder (or DIR), and runs a three-turn session of each
(Claude Code, Codex, OpenCode through its OpenAI-compatible and its Anthropic provider):
the first prompt, then two follow-up turns of the same session. For each it reports
whether every turn ended cleanly, the server's log of its requests, the tool calls the
model made, and how much of the second main request's prompt was read from the prompt
cache (goal: over 90%). Dev-only: nothing here ships; it runs in minutes on a CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.agents.run import VARIANTS, install_agents, run_agent, variant_name
from benchmarks.tiny_model import build_tiny_model
from engine.library.load import ensure_default_model

CONTEXT = 65536
TURNS = (
    "List the files in this folder.",
    "Read notes.txt and tell me what it says.",
    "Thanks. Say done.",
)
# The serve command's log line of a request (engine/server/activity.py RequestRecord.line).
_LINE = re.compile(
    r"(?P<status>\d{3}) (?P<endpoint>/\S+)(?: \(stream\))?: (?P<prompt>\d+) prompt "
    r"\((?P<cached>\d+) cached\), (?P<completion>\d+) completion.*?, (?P<stop>\w+)(?:, (?P<c>.*))?$"
)
MAIN_PROMPT_TOKENS = 1000  # requests of the agent's own loop (titles and probes are shorter)


class Server:
    """`python -m engine serve` on `model` in a subprocess, its log lines collected."""

    def __init__(self, model: Path) -> None:
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine", "serve", "--model", str(model), "--port", "0"]
            + ["--serve-any-model-name"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )
        self.lines: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read_stdout() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if found := re.search(r"on (http://\S+) ", line):
                    self.url = found.group(1)
                    ready.set()

        def read_stderr() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        if not ready.wait(300):
            self.stop()
            raise RuntimeError("the server did not start:\n" + "\n".join(self.lines[-20:]))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@dataclass
class Session:
    """What one agent's three turns did, as the agent and the server saw them."""

    variant: str
    turns_ok: int
    failures: list[str]
    requests: int
    errors: list[str]
    cancelled: int
    tool_calls: int
    second_request_cached: float | None
    log: list[str]


def session(server: Server, agent: str, provider: str | None, bin_dir: Path, root: Path) -> Session:
    """Three turns of one agent; what the server saw of them."""
    name = variant_name(agent, provider)
    home = root / name
    first = len(server.lines)
    turns = []
    for i, prompt in enumerate(TURNS):
        run = run_agent(
            agent,
            provider,
            server.url,
            "corral-tiny",
            prompt,
            bin_dir,
            home,
            context_length=CONTEXT,
            timeout=600,
            resume=i > 0,
        )
        turns.append(run)
        if run.returncode != 0:
            break
    time.sleep(0.5)  # the last log lines
    lines = server.lines[first:]
    requests = [m.groupdict() for line in lines if (m := _LINE.search(line))]
    main = [r for r in requests if int(r["prompt"]) >= MAIN_PROMPT_TOKENS]
    second = main[1] if len(main) > 1 else None
    cached = int(second["cached"]) / int(second["prompt"]) if second else None
    return Session(
        variant=name,
        turns_ok=sum(t.returncode == 0 for t in turns),
        failures=[t.stderr[-600:] or t.stdout[-600:] for t in turns if t.returncode != 0],
        requests=len(requests),
        # 499: the agent hung up (OpenCode drops its title request when a run ends)
        errors=[line for line in lines if re.search(r" (?!499)[45]\d\d /", line)],
        cancelled=sum(" 499 /" in line for line in lines),
        tool_calls=sum(r["stop"] == "tool_calls" for r in requests),
        second_request_cached=round(cached, 3) if cached is not None else None,
        log=lines,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npm-folder", type=Path, help="install the agents here (kept)")
    parser.add_argument("--only", help="one variant (claude, codex, opencode-openai, ...)")
    parser.add_argument("--verbose", action="store_true", help="print the server's log")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="corral-e2e-") as tmp:
        root = Path(tmp)
        model = build_tiny_model(root / "model", ensure_default_model(), context=CONTEXT)
        bin_dir = install_agents(args.npm_folder or root / "npm")
        server = Server(model)
        ok = True
        try:
            for agent, provider in VARIANTS:
                if args.only and variant_name(agent, provider) != args.only:
                    continue
                report = session(server, agent, provider, bin_dir, root / "homes")
                passed = report.turns_ok == len(TURNS) and not report.errors
                ok &= passed
                print(
                    f"{report.variant}: {report.turns_ok}/{len(TURNS)} turns, "
                    f"{report.requests} requests, {report.tool_calls} tool calls, "
                    f"second request {report.second_request_cached} cached, "
                    f"{report.cancelled} cancelled by the agent, "
                    f"{len(report.errors)} errors -> {'ok' if passed else 'FAILED'}",
                    flush=True,
                )
                for failure in report.failures:
                    print("  failure:", failure)
                for line in report.errors:
                    print("  error:", line)
                if args.verbose:
                    for line in report.log:
                        print("  |", line)
        finally:
            server.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
