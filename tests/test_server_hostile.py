"""A client cannot take the server down: schemas, grammars and tool definitions too deep for
llguidance's native compiler are refused with 400, and the server keeps serving. The
server runs in a child process (`python -m engine serve`), so a regression that crashes it
fails the test instead of pytest."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]


def _deep_schema(depth: int = 1500) -> dict:
    defs = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"type": "null"}]} for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": "integer"}
    return {"type": "object", "$ref": "#/$defs/d0", "$defs": defs}


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            "serve",
            "--model",
            str(tiny_model_dir),
            "--port",
            str(port),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/health", timeout=1)
            break
        except httpx.HTTPError:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.3)
    yield url, proc
    proc.terminate()
    proc.wait(timeout=30)


CHAIN = "start: r0\n" + "".join(f"r{i}: r{i + 1}\n" for i in range(2999)) + 'r2999: "x"\n'


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": _deep_schema()},
                }
            },
            "nest 3,002 deep",
        ),
        ({"grammar": {"type": "lark", "value": CHAIN}}, "refer to one another 3,001 deep"),
        (
            {
                "tools": [
                    {"type": "function", "function": {"name": "deep", "parameters": _deep_schema()}}
                ]
            },
            'tool 1 ("deep")',
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "big", "description": "x" * 3_000_000},
                    }
                ]
            },
            '"description" is too long (3,000,000 characters',
        ),
    ],
)
def test_hostile_requests_get_400_and_the_server_lives_on(server, extra: dict, message: str):
    url, proc = server
    model = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        **extra,
    }
    response = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert proc.poll() is None, f"the server died (exit code {proc.returncode})"
    assert response.status_code == 400, response.text[:300]
    assert message in response.json()["error"]["message"]
    assert httpx.get(url + "/health", timeout=10).status_code == 200
