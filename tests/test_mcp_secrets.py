"""Secrets stay secret, and approvals belong to a configuration: a server whose arguments and
URL path carry tokens is described, logged, reported when it fails (its stderr, its garbage
output in a timeout message) and printed by the CLI without them; `--mcp` prints what it
starts before it starts it; a configuration's fingerprint changes with what runs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from mcp_support import (
    REPO,
    child_processes,
    config_text,
    http_server,
    misbehaving_entry,
    stdio_entry,
    wait_no_children,
)

from engine.mcp.config import parse_config
from engine.mcp.hub import McpHub
from engine.mcp.redaction import mask_args, redact
from engine.mcp.runner import ServerState

GHP = "ghp_" + "R4nd0mT0kenV4lu3Xq9Zk2Lm7Np1Bv8Cw3Dy"  # 36 characters after the prefix
SK = "sk-" + "Zq8Wm2Xr5Tn7Yp3Kd9Lf4Hs6Gj1Vb0Nc8Mx2Qa7"
LEAKY = misbehaving_entry("banner")
LEAKY["args"] += ["--token", GHP]
REMOTE = {"url": f"https://example.invalid/mcp/{SK}"}


def assert_hidden(text: str) -> None:
    for token in (GHP, SK, GHP[4:], SK[3:]):
        assert token not in text


def test_descriptions_show_the_program_and_host_only() -> None:
    config = parse_config(
        config_text(
            {
                "leaky": LEAKY,
                "remote": REMOTE,
                "inline": stdio_entry(["npx", "mcp-remote", f"--api-key={SK}", GHP]),
                "time": stdio_entry(["uvx", "mcp-server-time", "--local-timezone", "UTC"]),
                "user": {"url": "http://bob:hunter22@127.0.0.1:8123/mcp?key=abc123#frag"},
            }
        )
    )
    leaky, remote, inline, time_server, user = config.servers
    shown = "\n".join(s.plan() + repr(s) for s in config.servers)
    assert_hidden(shown)
    for secret in ("hunter22", "abc123", "bob", "frag"):
        assert secret not in shown
    assert leaky.plan() == (
        f"leaky: runs {sys.executable} {REPO}/tests/fixtures/mcp_servers/"
        "misbehaving.py --mode banner --token …"
    )
    assert remote.plan() == "remote: connects to https://example.invalid/…"
    assert inline.describe() == "npx mcp-remote --api-key=… ghp_…"
    assert time_server.describe() == "uvx mcp-server-time --local-timezone UTC"  # harmless
    assert user.describe() == "http://127.0.0.1:8123/…"
    # Known secrets are masked wherever they turn up, even where no pattern would see them.
    assert redact(f"refused: {SK[3:]}", remote.secrets()) == f"refused: {SK[3:5]}…"
    assert redact("it said GHP-LESS hunter22!", user.secrets()) == "it said GHP-LESS hu…!"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"Authorization: Bearer {GHP[4:]}", "Authorization: Bearer …"),
        ("curl --token=abc123def --verbose", "curl --token=… --verbose"),
        ("set api_key=letmein and go", "set api_key=… and go"),
        ('{"password": "hunter2"}', '{"password": "…"}'),
        (f"key {SK} failed", "key sk-… failed"),
        (f"see https://h.example:8443/v1/{GHP[4:]}?q=1.", "see https://h.example:8443/…."),
        ("at /srv/keys/9fQ2xL7pR4mZ8kT1wB6vN3cJ5hD0sG/x", "at /srv/keys/9f…/x"),
        # Prose, paths and versions stay as they are.
        ("the token expired; log in again", "the token expired; log in again"),
        ("/usr/lib/python3.11/site-packages/mcp/client/stdio.py", None),
        ("mcp-server-time 2024-01-01T00:00:00.123456+00:00 UTC", None),
    ],
)
def test_redact_masks_what_looks_like_a_secret(text: str, shown: str | None) -> None:
    assert redact(text) == (text if shown is None else shown)


def test_an_argument_after_a_secret_flag_is_masked_whatever_it_looks_like() -> None:
    args = ["--api-key", "plain", "--verbose", "-p", "8080", "--password", "--x"]
    assert mask_args(args) == ["--api-key", "…", "--verbose", "-p", "8080", "--password", "--x"]


def test_the_fingerprint_follows_what_runs_not_the_name() -> None:
    entry = stdio_entry(["node", "s.js"], env={"K": "1"})
    (base,) = parse_config(config_text({"a": entry})).servers
    same = [replace(base, name="b"), replace(base, disabled=True), replace(base, line=9)]
    assert {s.fingerprint() for s in same} == {base.fingerprint()}
    changed = [
        replace(base, command="nodejs"),
        replace(base, args=("s.js", "--x")),
        replace(base, env=(("K", "2"),)),
        replace(base, cwd="/tmp"),
        replace(base, transport="http", url="https://h/m"),
        replace(base, transport="http", url="https://h/m", headers=(("A", "b"),)),
    ]
    prints = {s.fingerprint() for s in changed}
    assert len(prints) == len(changed) and base.fingerprint() not in prints


def test_a_leaky_server_never_shows_its_token(caplog) -> None:
    """Its description, its stderr, its garbage output quoted in a timeout, its crash,
    an unreachable URL and an HTTP error with the token in the URL path: nothing in the
    snapshots, the call results or the logs (httpx logs every request) holds the token."""
    caplog.set_level(logging.DEBUG)
    before = {p.pid for p in child_processes()}
    with http_server(token=None) as url:
        wrong_path = url.removesuffix("/mcp") + f"/mcp/{SK}"
        config = parse_config(
            config_text({"leaky": LEAKY, "remote": REMOTE, "local": {"url": wrong_path}})
        )
        hub = McpHub(config, call_timeout=1.0)
        try:
            hub.start().result(10)
            assert hub.wait_until_settled(60)
            snaps = hub.snapshots()
            assert snaps["leaky"].state == ServerState.READY
            assert snaps["remote"].state == snaps["local"].state == ServerState.FAILED
            assert "HTTP 404" in snaps["local"].detail, snaps["local"].detail
            assert snaps["remote"].detail.startswith("could not connect to https://example.")
            timeout = hub.call("leaky", "hang", {}).result(30)
            assert timeout.failure == "timeout"
            # The banner (garbage on stdout) is quoted, its key masked.
            assert "'Welcome to the misbehaving server v1 with key ghp_…'" in timeout.text
            crash = hub.call("leaky", "crash", {}).result(30)
            assert crash.failure == "server_exited"
            assert "starting in banner mode with key ghp_…" in crash.text
            deadline = time.monotonic() + 10
            while hub.snapshots()["leaky"].state != ServerState.FAILED:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            shown = [timeout.text, crash.text, json.dumps(crash.to_dict())]
            for snap in hub.snapshots().values():
                shown += [snap.description, snap.detail, snap.stderr_tail, repr(snap)]
            assert "fatal: the crash tool was called" in hub.snapshots()["leaky"].stderr_tail
        finally:
            hub.close()
    assert "HTTP Request: POST http://127.0.0.1:" in caplog.text  # httpx did log, redacted
    assert_hidden("\n".join(shown) + caplog.text)
    assert wait_no_children(before) == []


def test_cli_prints_what_it_starts_and_never_the_token(tiny_model_dir, tmp_path) -> None:
    """`chat --mcp FILE`, run as the user runs it: each server is printed (redacted) before
    it starts, and the token shows nowhere in what the terminal gets, including a call that
    times out quoting the server's garbage output and a server that cannot connect."""
    mcp_file = tmp_path / "mcp.json"
    mcp_file.write_text(config_text({"leaky": LEAKY, "remote": REMOTE}))
    command = [sys.executable, "-m", "engine", "chat", "--model", str(tiny_model_dir)]
    command += ["--mcp", str(mcp_file), "--prompt", "Wait", "--tool-choice", "hang"]
    command += ["--max-tokens", "24", "--max-steps", "1", "--approve", "all"]
    command += ["--tool-timeout", "1", "--seed", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode in (0, 3), run.stderr[-2000:]  # 3: the last reply hit --max-tokens
    plan = [line for line in run.stderr.splitlines() if line.startswith("[mcp] ")]
    assert plan[:2] == [
        f"[mcp] leaky: runs {sys.executable} {REPO}/tests/fixtures/mcp_servers/misbehaving.py"
        " --mode banner --token …",
        "[mcp] remote: connects to https://example.invalid/…",
    ]
    # Printed before anything started: ahead of the failure of the server that cannot connect.
    failed = run.stderr.index('MCP server "remote" failed: could not connect to https://exam')
    assert run.stderr.index("[mcp] remote: connects to") < failed
    assert "did not answer within 1 s" in run.stderr and "with key ghp_…" in run.stderr
    assert_hidden(run.stdout + run.stderr)
