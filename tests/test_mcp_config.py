"""mcp.json, read at the edge: the common format loads, every malformed file names its line
and nothing is applied, imports merge without touching a bad target, and no secret shows."""

from __future__ import annotations

import json

import pytest

from engine.mcp.config import (
    McpConfigError,
    default_config_path,
    import_servers,
    load_config,
    parse_config,
    write_config_text,
)
from engine.mcp.redaction import redact

GOOD = """{
  "mcpServers": {
    "time": {
      "command": "uvx",
      "args": ["mcp-server-time", "--local-timezone", "UTC"],
      "env": {"API_KEY": "sk-live-123456"}
    },
    "docs": {
      "type": "streamable-http",
      "url": "https://bob:pw@docs.example.com/mcp?key=abc",
      "headers": {"Authorization": "Bearer tok-987654"}
    },
    "old": {"command": "node", "args": ["server.js"], "disabled": true, "autoApprove": []}
  }
}
"""


def test_the_common_format_loads() -> None:
    config = parse_config(GOOD, "mcp.json")
    time, docs, old = config.servers
    assert (time.name, time.transport, time.command) == ("time", "stdio", "uvx")
    assert time.args == ("mcp-server-time", "--local-timezone", "UTC")
    assert dict(time.env) == {"API_KEY": "sk-live-123456"}
    assert (docs.transport, docs.url) == ("http", "https://bob:pw@docs.example.com/mcp?key=abc")
    assert dict(docs.headers) == {"Authorization": "Bearer tok-987654"}
    assert old.disabled and not time.disabled
    assert [s.line for s in config.servers] == [3, 8, 13]


def test_secrets_are_never_shown() -> None:
    config = parse_config(GOOD)
    shown = " ".join(repr(s) + s.describe() for s in config.servers) + repr(config)
    for secret in ("sk-live-123456", "tok-987654", "bob", "pw@", "key=abc"):
        assert secret not in shown
    assert "API_KEY" in shown and "Authorization" in shown  # names are fine
    assert config.servers[1].describe().startswith("https://docs.example.com/… (headers:")
    text = redact("failed: token tok-987654 refused", config.servers[1].secrets())
    assert "tok-987654" not in text and "to…" in text


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}', 3, "not valid JSON"),
        ('{\n  "mcpServers": {\n    "a": {\n      "command": 7\n    }\n  }\n}', 4, '"command"'),
        ('{\n "mcpServers": {\n  "a": {\n   "command": "x",\n   "args": "-v"}}}', 5, "args"),
        ('{\n "mcpServers": {\n  "a": {"command": "x", "env": {"K": 1}}\n }\n}', 3, '"env"'),
        ('{\n "mcpServers": {\n  "a": {"command": "x"},\n  "a": {"command": "y"}}}', 4, "twice"),
        ('{\n "mcpServers": {\n  "a": {\n   "url": "ftp://host/x"\n  }\n }\n}', 4, "http(s) URL"),
        ('{\n "mcpServers": {\n  "a": {"url": "http://h", "command": "x"}\n }\n}', 3, "not both"),
        ('{\n "mcpServers": {\n  "a": {"args": ["x"]}\n }\n}', 3, 'either "command"'),
        ('{\n "mcpServers": {\n  "a": {\n   "type": "sse",\n   "url": "http://h"}}}', 4, "SSE"),
        ('{\n "mcpServers": {\n  "a": {"command": "x", "disabled": "yes"}\n }\n}', 3, "true or"),
        ('{\n "mcpServers": []\n}', 2, "must be an object"),
        ('{"tools": []}', 1, 'no "mcpServers"'),
        ("[1, 2]", 1, "expected an object"),
        ("", 1, "not valid JSON"),
    ],
)
def test_a_malformed_file_names_its_line(text: str, line: int, message: str) -> None:
    with pytest.raises(McpConfigError) as info:
        parse_config(text, "mcp.json")
    assert info.value.line == line
    assert str(info.value).startswith(f"mcp.json, line {line}: ")
    assert message in str(info.value)


def test_files_load_and_a_missing_file_is_empty(tmp_path) -> None:
    path = tmp_path / "mcp.json"
    assert load_config(path).servers == ()
    path.write_text(GOOD)
    assert [s.name for s in load_config(path).servers] == ["time", "docs", "old"]
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(McpConfigError, match="UTF-8"):
        load_config(path)
    assert default_config_path().name == "mcp.json"


def test_import_merges_and_a_bad_file_changes_nothing(tmp_path) -> None:
    target = tmp_path / "config" / "mcp.json"
    incoming = tmp_path / "claude_desktop_config.json"
    incoming.write_text(json.dumps({"mcpServers": {"git": {"command": "uvx", "args": ["g"]}}}))
    outcome = import_servers(incoming, target)  # no target yet: created
    assert outcome.added == ["git"] and target.stat().st_mode & 0o077 == 0
    incoming.write_text(
        json.dumps({"mcpServers": {"git": {"command": "git-mcp"}, "web": {"url": "http://h/m"}}})
    )
    outcome = import_servers(incoming, target)
    assert (outcome.added, outcome.replaced) == (["web"], ["git"])
    assert [s.name for s in load_config(target).servers] == ["git", "web"]
    assert load_config(target).servers[0].command == "git-mcp"

    before = target.read_text()
    incoming.write_text('{\n  "mcpServers": {\n    "x": {"command": ""}\n  }\n}')
    with pytest.raises(McpConfigError, match="line 3"):
        import_servers(incoming, target)
    with pytest.raises(McpConfigError, match="line 1"):
        write_config_text(target, "{oops")
    assert target.read_text() == before
    assert list(target.parent.iterdir()) == [target]  # no temporary file left behind
