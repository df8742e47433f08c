"""MCP servers are other programs: a listed tool whose inputSchema would crash llguidance is
left out with its reason (in a child process, so a regression cannot take pytest down),
and an MCP configuration that is a device or a pipe is refused without reading it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.mcp.config import McpConfigError, load_config

REPO = Path(__file__).resolve().parents[1]

_CHECK = """
from engine.mcp.catalog import check_tool
defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"type": "null"}]} for i in range(1500)}
defs["d1500"] = {"type": "integer"}
info = check_tool("deep", "a tool", {"type": "object", "$ref": "#/$defs/d0", "$defs": defs})
print(info.error)
"""


def test_a_listed_tool_with_a_too_deep_schema_is_left_out_not_a_crash() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _CHECK], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"rc {run.returncode}: {run.stderr[-400:]}"
    assert "nest 3,002 deep" in run.stdout and "not offered" in run.stdout


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_an_mcp_configuration_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = Path("/dev/zero")
    if kind == "fifo":
        path = tmp_path / "mcp.json"
        os.mkfifo(path)
    with pytest.raises(McpConfigError, match="not a regular file"):
        load_config(path)
