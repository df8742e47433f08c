"""The MCP configuration file: `mcp.json` in the common format, read and checked at the edge.

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"}}}}

Claude Desktop, Cursor and LM Studio write this format; keys other apps add (`type`,
`disabled`, `autoApprove`, ...) are accepted or ignored, never an error. Every problem is a
McpConfigError naming the line it is on. Env values, headers and anything in the arguments
or URL that looks like a token are secrets: nothing here prints them (`MCPServerConfig.__repr__`
and `describe` go through engine.mcp.redaction). `fingerprint` names a server's exact
configuration: approvals (to start it, to run a tool without asking) are keyed by it.
"""

from __future__ import annotations

import hashlib
import json
import json.decoder
import json.scanner
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import platformdirs

from engine.errors import CorralError
from engine.files import FileRefused, read_text_limited
from engine.mcp.redaction import looks_like_token, mask_args, secret_args, short_url

CONFIG_NAME = "mcp.json"
MAX_CONFIG_BYTES = 1024 * 1024
MAX_SERVERS = 64
_SERVER_NAME_RE = re.compile(r"[^\x00-\x1f\x7f]{1,64}\Z")
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamableHttp"}
EMPTY_CONFIG_TEXT = '{\n  "mcpServers": {}\n}\n'

Transport = Literal["stdio", "http"]


class McpConfigError(CorralError, ValueError):
    """mcp.json is malformed; the message names the file, the line and the problem."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, repr=False)
class MCPServerConfig:
    """One server entry: a command to run (stdio) or a URL (Streamable HTTP)."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    disabled: bool = False  # "disabled": true in the file (Cline's key)
    line: int = 0  # where the entry starts in the file

    def __repr__(self) -> str:  # no env values, no headers: they hold secrets
        return f"MCPServerConfig({self.name!r}, {self.transport}, {self.describe()!r})"

    def describe(self) -> str:
        """What runs, for display: the command with its arguments (anything that looks like
        a token masked), or the URL's scheme, host and port; env and header names only,
        never their values."""
        if self.transport == "http":
            text = short_url(self.url)
            if self.headers:
                text += " (headers: " + ", ".join(k for k, _ in self.headers) + ")"
            return text
        text = " ".join(mask_args([self.command, *self.args]))
        if self.env:
            text += " (env: " + ", ".join(k for k, _ in self.env) + ")"
        return text

    def secrets(self) -> list[str]:
        """What to scrub out of any message before it is shown or logged (with
        `redact`): env and header values (and the token in "Bearer TOKEN"), the arguments
        `describe` masks, the URL's user name, password, query and token-like path parts."""
        values = [v for _, v in self.env + self.headers]
        values += [part for v in values for part in v.split() if len(part) >= 8]
        values += secret_args([self.command, *self.args])
        if self.url:
            parts = urlsplit(self.url)
            values += [parts.username or "", parts.password or "", parts.query, parts.fragment]
            values += [p for p in parts.path.split("/") if looks_like_token(p) or len(p) >= 24]
        return [v for v in values if len(v) >= 4]

    def plan(self) -> str:
        """One line saying what starting this server does, secrets masked: what the user
        sees before a server starts (the CLI's --mcp, the app's confirmation)."""
        verb = "connects to" if self.transport == "http" else "runs"
        return f"{self.name}: {verb} {self.describe()}"

    def fingerprint(self) -> str:
        """A hash of what this server runs or reaches and with what (command, arguments,
        env, cwd, URL, headers; not its name, its place in the file or its switch): an
        approval given to one configuration never carries over to another."""
        what = {
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": sorted(self.env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": sorted(self.headers),
        }
        text = json.dumps(what, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class McpConfig:
    """The servers of one mcp.json, in file order."""

    servers: tuple[MCPServerConfig, ...] = ()
    source: str = ""

    def server(self, name: str) -> MCPServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)


def default_config_path() -> Path:
    """mcp.json in the user's config folder (platformdirs)."""
    return Path(platformdirs.user_config_dir("Corral", "Corral")) / CONFIG_NAME


# ---- parsing with line numbers ----


class _Located(dict[str, Any]):
    """A JSON object that remembers where it starts and ends in the text."""

    start = 0
    end = 0


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> _Located:
    out = _Located()
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _LocatingDecoder(json.JSONDecoder):
    """json's pure-Python scanner with a hook on objects, to keep their positions."""

    def __init__(self) -> None:
        super().__init__(object_pairs_hook=_pairs)
        self.parse_object = self._parse_object
        self.scan_once = json.scanner.py_make_scanner(self)  # type: ignore[attr-defined]

    @staticmethod
    def _parse_object(
        s_and_end: tuple[str, int],
        strict: bool,
        scan_once: Any,
        object_hook: Any,
        object_pairs_hook: Any,
        memo: Any = None,
    ) -> tuple[Any, int]:
        start = s_and_end[1] - 1
        value, end = json.decoder.JSONObject(  # type: ignore[attr-defined]
            s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo
        )
        if isinstance(value, _Located):
            value.start, value.end = start, end
        return value, end


class _Reader:
    """Checks one file's structure; every error carries a line number."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source

    def line_at(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def key_line(self, obj: _Located, key: str) -> int:
        """The line of `key` inside `obj` (the object's first line if it is not found)."""
        match = re.compile(re.escape(json.dumps(key)) + r"\s*:").search(
            self.text, obj.start, obj.end
        )
        if match is None:  # keys written with escapes: fall back to the object
            match = re.compile(re.escape(json.dumps(key, ensure_ascii=False)) + r"\s*:").search(
                self.text, obj.start, obj.end
            )
        return self.line_at(match.start() if match else obj.start)

    def error(self, line: int, message: str) -> McpConfigError:
        where = f"{self.source}, line {line}" if self.source else f"line {line}"
        return McpConfigError(f"{where}: {message}", line)

    def parse(self) -> McpConfig:
        try:
            data = _LocatingDecoder().decode(self.text)
        except _DuplicateKey as exc:
            raise self.error(self._duplicate_line(exc.key), f'"{exc.key}" appears twice') from None
        except json.JSONDecodeError as exc:
            message = f"not valid JSON: {exc.msg} (column {exc.colno})"
            raise self.error(exc.lineno, message) from None
        if not isinstance(data, _Located):
            raise self.error(1, 'expected an object like {"mcpServers": {...}}')
        key = "mcpServers" if "mcpServers" in data else "servers" if "servers" in data else None
        if key is None:
            raise self.error(1, 'no "mcpServers" object (expected {"mcpServers": {"NAME": ...}})')
        servers = data[key]
        if not isinstance(servers, _Located):
            raise self.error(self.key_line(data, key), f'"{key}" must be an object of servers')
        if len(servers) > MAX_SERVERS:
            raise self.error(self.line_at(servers.start), "more than 64 servers")
        return McpConfig(
            tuple(self.server(name, entry, servers) for name, entry in servers.items()),
            self.source,
        )

    def _duplicate_line(self, key: str) -> int:
        hits = [m.start() for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", self.text)]
        return self.line_at(hits[1] if len(hits) > 1 else 0)

    def server(self, name: str, entry: Any, parent: _Located) -> MCPServerConfig:
        line = self.key_line(parent, name)
        label = f'server "{name}"'
        if not _SERVER_NAME_RE.match(name):
            raise self.error(line, f"{label}: a name needs 1-64 printable characters")
        if not isinstance(entry, _Located):
            raise self.error(line, f"{label} must be an object with a command or a url")

        def at(key: str) -> int:
            return self.key_line(entry, key)

        kind = entry.get("type", entry.get("transport"))
        if kind is not None and kind not in _HTTP_TYPES | {"stdio"}:
            hint = " (SSE servers are not supported: use Streamable HTTP)" if kind == "sse" else ""
            raise self.error(at("type"), f'{label}: unknown "type" {kind!r}{hint}')
        has_command, has_url = "command" in entry, "url" in entry or "serverUrl" in entry
        if has_command == has_url:
            raise self.error(
                line,
                f'{label}: give either "command" (a program to run) or "url" (a Streamable '
                "HTTP endpoint)" + (", not both" if has_command else ""),
            )
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            raise self.error(at("disabled"), f'{label}: "disabled" must be true or false')
        if has_url:
            url_key = "url" if "url" in entry else "serverUrl"
            url = entry[url_key]
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                raise self.error(at(url_key), f'{label}: "url" must be an http(s) URL')
            return MCPServerConfig(
                name,
                "http",
                url=url,
                headers=self.string_map(entry, "headers", label, at),
                disabled=disabled,
                line=line,
            )
        command = entry["command"]
        if not isinstance(command, str) or not command.strip() or "\x00" in command:
            raise self.error(at("command"), f'{label}: "command" must be a non-empty string')
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(
            isinstance(a, str) and "\x00" not in a for a in args
        ):
            raise self.error(at("args"), f'{label}: "args" must be a list of strings')
        cwd = entry.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise self.error(at("cwd"), f'{label}: "cwd" must be a folder path')
        return MCPServerConfig(
            name,
            "stdio",
            command=command,
            args=tuple(args),
            env=self.string_map(entry, "env", label, at),
            cwd=os.path.expanduser(cwd) if cwd else None,
            disabled=disabled,
            line=line,
        )

    def string_map(
        self, entry: Mapping[str, Any], key: str, label: str, at: Any
    ) -> tuple[tuple[str, str], ...]:
        value = entry.get(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) and "\x00" not in v + k
            for k, v in value.items()
        ):
            raise self.error(at(key), f'{label}: "{key}" must map names to strings')
        return tuple(value.items())


def parse_config(text: str, source: str = "") -> McpConfig:
    """Read mcp.json text; raise McpConfigError naming the line of the first problem."""
    return _Reader(text, source).parse()


def load_config(path: str | Path) -> McpConfig:
    """Read an mcp.json file (a missing file is an empty configuration)."""
    path = Path(path).expanduser()
    if not path.exists():
        return McpConfig(source=str(path))
    try:  # a regular file of bounded size: never a device or a pipe
        text = read_text_limited(path, MAX_CONFIG_BYTES, "MCP configuration")
    except FileRefused as exc:
        raise McpConfigError(str(exc)) from None
    return parse_config(text, str(path))


@dataclass
class ImportOutcome:
    """What an import did: the names added and the names that replaced existing entries."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImportPlan:
    """A file's servers, read once: what the user is shown before anything is written or
    started, and (if they confirm) exactly what is written, even if the file changes."""

    source: str
    config: McpConfig  # the incoming servers, checked
    entries: dict[str, Any]  # name -> the entry as written in the file
    replaces: tuple[str, ...] = ()  # names the target already has (their entries are replaced)


def read_import(source: str | Path, target: str | Path) -> ImportPlan:
    """Read and check the mcp.json at `source` (and the target it would go into) without
    writing anything; raises McpConfigError naming the file and line of a problem."""
    path = Path(source).expanduser()
    if not path.exists():
        raise McpConfigError(f"{path}: no such file")
    try:
        text = read_text_limited(path, MAX_CONFIG_BYTES, "MCP configuration")
    except FileRefused as exc:
        raise McpConfigError(str(exc)) from None
    incoming = parse_config(text, str(path))
    raw = json.loads(text)
    entries = raw.get("mcpServers", raw.get("servers", {}))
    existing = load_config(target)  # a malformed target is reported, not overwritten
    replaces = tuple(s.name for s in incoming.servers if existing.server(s.name) is not None)
    return ImportPlan(str(path), incoming, dict(entries), replaces)


def apply_import(plan: ImportPlan, target: str | Path) -> ImportOutcome:
    """Add the servers of `plan` to the mcp.json at `target` (same names are replaced). A
    malformed target is reported and left as it is."""
    target = Path(target)
    load_config(target)
    data: dict[str, Any] = (
        json.loads(read_text_limited(target, MAX_CONFIG_BYTES, "MCP configuration"))
        if target.exists()
        else {"mcpServers": {}}
    )
    key = "mcpServers" if "mcpServers" in data or "servers" not in data else "servers"
    servers = data.setdefault(key, {})
    outcome = ImportOutcome()
    for server in plan.config.servers:
        (outcome.replaced if server.name in servers else outcome.added).append(server.name)
        servers[server.name] = plan.entries[server.name]
    write_config_text(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return outcome


def import_servers(source: str | Path, target: str | Path) -> ImportOutcome:
    """Add the servers of the mcp.json at `source` to the one at `target` (same names are
    replaced). Both files are checked first: if either is malformed nothing is written."""
    return apply_import(read_import(source, target), target)


def write_config_text(target: str | Path, text: str) -> None:
    """Check `text` and write it to `target` atomically (a temporary file, then rename)."""
    target = Path(target)
    parse_config(text, str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mcp-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)  # it may hold tokens
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
