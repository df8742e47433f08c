"""`python -m engine chat` says how a reply ended (issue 44): exit status 3 for a reply
Corral filled or cut (0 only for one the model finished); `--json` carries `ending` and
the filled values' pointers; without it, a line on stderr says in words what Corral did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["name", "n"],
}


def _chat(model: Path, schema: dict, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    path = tmp / "schema.json"
    path.write_text(json.dumps(schema))
    command = [
        sys.executable, "-m", "engine", "chat", "--model", str(model), "--prompt", "JSON?",
        "--temperature", "0", "--json-schema", str(path), *args,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=REPO, env=env)


def test_a_filled_reply_exits_3_and_says_what_corral_wrote(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    done = _chat(tiny_model_dir, SCHEMA, "--max-tokens", "24", "--json", tmp=tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    reply = json.loads(done.stdout)
    assert reply["ending"] == "filled" and reply["stop_reason"] == "eos"
    assert reply["filled_paths"] and set(reply["filled_paths"]) <= {"/name", "/n"}


def test_without_json_a_line_says_in_words_what_corral_did(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """(A reply the model finished exits 0: tests/test_reasoning_cli.py's schema reply.)"""
    done = _chat(tiny_model_dir, SCHEMA, "--max-tokens", "24", tmp=tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("[filled: "))
    assert line.startswith("[filled: Corral finished this reply")
    assert line.endswith("filled in]") and ("`name`" in line or "`n`" in line)
    assert "\n[filled] " in done.stderr  # the figures line names the ending too
