"""MCP tools as the model sees them: checked at the edge, named without collisions.

`check_tool` vets one listed tool (name, description, schema size and depth, and whether
llguidance compiles its inputSchema into a grammar that constrains the call exactly); a tool
that fails is kept with its reason so the UI can show it, never offered. `build_catalog`
gives every offered tool the name the model uses: its own, or `server__tool` when two
servers (or a built-in or user tool) share it, and maps each back for the call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.tools.definitions import TOOL_NAME_RE, ToolDefinitionError, validate_tools
from engine.types import FunctionDefinition, ToolDefinition

MAX_DESCRIPTION_CHARS = 4000
MAX_SCHEMA_CHARS = 256 * 1024
MAX_SCHEMA_DEPTH = 48
MAX_TOOLS_PER_SERVER = 256
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class ToolInfo:
    """A tool one server lists, after the checks: `error` set means it is left out."""

    name: str  # as the server names it
    description: str
    input_schema: dict[str, Any]
    warnings: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class CatalogTool:
    """An offered MCP tool: the name the model uses and where the call goes."""

    exposed: str
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    warnings: tuple[str, ...] = ()
    server_fingerprint: str = ""  # the configuration it was listed under (approvals' key)

    def to_openai(self) -> ToolDefinition:
        function: FunctionDefinition = {"name": self.exposed, "parameters": self.input_schema}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}

    def argument_errors(self, arguments: Any) -> str | None:
        """Why `arguments` do not validate against the tool's inputSchema (None: they do).

        Calls are constrained to the schema, so this is a last check before anything goes
        to the server, and the measure of "calls whose arguments validated"."""
        import jsonschema

        try:
            validator = jsonschema.validators.validator_for(self.input_schema)
            error = jsonschema.exceptions.best_match(
                validator(self.input_schema).iter_errors(arguments)
            )
        except jsonschema.exceptions.SchemaError:
            return None  # a schema jsonschema cannot read: llguidance's constraint stands
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message[:300]}"


def safe_name(name: str) -> str:
    """`name` within the tool-name rule: other characters become '_', at most 128."""
    cleaned = _BAD_NAME_CHARS.sub("_", name)[:128]
    return cleaned or "tool"


def _depth(value: Any, limit: int) -> int:
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, (dict, list)):
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def check_tool(name: str, description: str | None, input_schema: Any) -> ToolInfo:
    """Vet one listed tool. Compiles its schema with llguidance (cached by schema)."""
    text = (description or "").strip()
    warnings: list[str] = []
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[:MAX_DESCRIPTION_CHARS] + "…"
        warnings.append(f"description cut to {MAX_DESCRIPTION_CHARS} characters")
    schema = input_schema if isinstance(input_schema, dict) else {}

    def left_out(reason: str) -> ToolInfo:
        return ToolInfo(name, text, schema, tuple(warnings), reason)

    if not isinstance(input_schema, dict):
        return left_out("its inputSchema is not a JSON object")
    try:
        size = len(json.dumps(input_schema))
    except (TypeError, ValueError):
        return left_out("its inputSchema is not JSON")
    if size > MAX_SCHEMA_CHARS:
        return left_out(f"its inputSchema is too large ({size // 1024} KB, limit 256 KB)")
    if _depth(input_schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        return left_out(f"its inputSchema nests deeper than {MAX_SCHEMA_DEPTH} levels")
    if not TOOL_NAME_RE.match(name):
        warnings.append(
            f"offered to the model as {safe_name(name)!r}: its name has characters that tool "
            "names may not use"
        )
    tool = {"type": "function", "function": {"name": safe_name(name), "parameters": schema}}
    try:
        (spec,) = validate_tools([tool])
    except ToolDefinitionError as exc:
        reason = str(exc).split(": ", 1)[-1].replace('"parameters"', "its inputSchema")
        return left_out(f"{reason} — its calls could not be constrained, so it is not offered")
    warnings += [f"schema: {w}" for w in spec.warnings]
    return ToolInfo(name, text, schema, tuple(warnings))


@dataclass
class ToolCatalog:
    """The MCP tools of one request, by the names the model sees."""

    tools: list[CatalogTool] = field(default_factory=list)

    def definitions(self) -> list[ToolDefinition]:
        return [t.to_openai() for t in self.tools]

    def lookup(self, exposed: str) -> CatalogTool | None:
        return next((t for t in self.tools if t.exposed == exposed), None)

    def names(self) -> list[str]:
        return [t.exposed for t in self.tools]


def _qualified(server: str, name: str, taken: set[str]) -> str:
    base = safe_name(f"{server}__{name}")
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[: 128 - len(suffix)] + suffix, n + 1
    return candidate


def build_catalog(
    servers: Iterable[tuple[str, Iterable[ToolInfo]]],
    *,
    reserved: Iterable[str] = (),
    disabled_tools: Iterable[tuple[str, str]] = (),
    fingerprints: Mapping[str, str] | None = None,
) -> ToolCatalog:
    """Offered tools from (server name, its checked tools) pairs, in order; `fingerprints`
    gives each server's configuration fingerprint, carried by its tools.

    Tools with an error and (server, tool) pairs in `disabled_tools` are left out. A name
    used by more than one server, or by a `reserved` (built-in or user) tool, is qualified
    as `server__tool` for every server offering it.
    """
    off = set(disabled_tools)
    offered = [
        (server, info)
        for server, infos in servers
        for info in list(infos)[:MAX_TOOLS_PER_SERVER]
        if info.error is None and (server, info.name) not in off
    ]
    counts: dict[str, int] = {}
    for _, info in offered:
        counts[safe_name(info.name)] = counts.get(safe_name(info.name), 0) + 1
    taken = set(reserved)
    clashing = {n for n, c in counts.items() if c > 1 or n in taken}
    taken |= {n for n in counts if n not in clashing}
    catalog = ToolCatalog()
    for server, info in offered:
        exposed = safe_name(info.name)
        if exposed in clashing:
            exposed = _qualified(server, info.name, taken)
            taken.add(exposed)
        catalog.tools.append(
            CatalogTool(
                exposed,
                server,
                info.name,
                info.description,
                info.input_schema,
                info.warnings,
                (fingerprints or {}).get(server, ""),
            )
        )
    return catalog
