"""Load and validate tool definitions in the OpenAI format.

A tool is `{"type": "function", "function": {"name", "description", "parameters"}}`.
Every definition is checked up front: the name is unique and well formed, and `parameters`
is an object schema that llguidance compiles (with the same options the tool grammar
uses), so a request never starts with a tool the decoder cannot constrain. Errors name the
tool (by position and name) and the problem.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.constraints.tight import tighten
from engine.errors import CorralError
from engine.files import FileRefused, read_text_limited
from engine.types import FunctionDefinition, SchemaOptions, ToolDefinition

DEFAULT_OPTIONS = SchemaOptions()

# Tool names as MCP servers and real tool sets write them (MCP spec, SEP-986: 1-128 ASCII
# letters, digits, '_', '-' and '.'; BFCL's `instrument_price.get`). OpenAI's own rule,
# `^[a-zA-Z0-9_-]{1,64}$`, is a subset. Dots are safe everywhere a name goes: the grammar
# and the call formats embed names as JSON strings.
TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")
TOOL_NAME_RULE = "1-128 letters, digits, '_', '-' or '.'"
MAX_FILE_BYTES = 4 * 1024 * 1024  # a tools file
# What one request may offer: more than this is not a tool set a model can use, and each
# limit keeps a hostile definition (from an API client or an MCP server) from costing
# minutes of prompt processing or compile time before anyone is told.
MAX_TOOLS = 256
# Coding agents write long ones: Claude Code's Workflow tool has ~19,000 characters.
MAX_DESCRIPTION_CHARS = 65_536
MAX_PARAMETERS_BYTES = 256 * 1024

# JSON layout inside tool calls: no free whitespace (it would let a small model ramble) and
# the separators chat templates write with `tojson`, so calls look like the prompt's examples.
JSON_OPTIONS: dict[str, Any] = {
    "whitespace_flexible": False,
    "item_separator": ", ",
    "key_separator": ": ",
}

_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class ToolDefinitionError(CorralError, ValueError):
    """A tool definition (or a tool_choice naming one) is malformed."""


@dataclass(frozen=True)
class ToolSpec:
    """One validated tool: its name, description, parameter schema and compile warnings."""

    name: str
    description: str
    parameters: dict[str, Any]
    warnings: tuple[str, ...] = field(default=())

    def to_openai(self) -> ToolDefinition:
        """The tool in the OpenAI format, as chat templates expect it."""
        function: FunctionDefinition = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}


def arguments_grammar_schema(
    parameters: dict[str, Any], options: SchemaOptions = DEFAULT_OPTIONS
) -> dict[str, Any]:
    """The schema embedded in the tool grammar for `parameters`: tightened (declared
    argument names only, I-JSON numbers, bounded free-form values; see
    engine.constraints.tight) unless `options.tight` is off or the tightened schema hits an
    llguidance limit (then as written), in the compact layout, and lenient about keywords
    llguidance cannot enforce unless `options.lenient` is off. The tool grammar and the
    tool's own check use this one schema.

    Raises ValueError for a schema nothing can satisfy (proven by the tight rewrite or by
    llguidance) or one llguidance cannot read."""
    key = json.dumps(parameters)  # in its own key order: calls write keys in that order
    return copy.deepcopy(_grammar_schema(key, options))


@functools.lru_cache(maxsize=512)
def _grammar_schema(parameters_json: str, options: SchemaOptions) -> dict[str, Any]:
    # Requests repeat the same tools turn after turn: decide each schema once.
    from llguidance import LLMatcher

    parameters = json.loads(parameters_json)
    guidance = dict(JSON_OPTIONS)
    if options.lenient:
        guidance["lenient"] = True
    if options.tight:
        tight = tighten(parameters)
        if tight.unsatisfiable is not None:  # no call could ever fit: refuse the tool
            raise ValueError(f"Unsatisfiable schema: {tight.unsatisfiable}, so no call fits it")
        schema = {**tight.schema, "x-guidance": guidance}
        grammar = LLMatcher.grammar_from_json_schema(schema)
        is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
        if not is_error:
            return schema
        if any("Unsatisfiable" in m for m in messages):
            raise ValueError(messages[0])
        # else the tightened schema hit an llguidance limit: the schema as written
    return {**parameters, "x-guidance": guidance}


def compile_parameters(
    parameters: dict[str, Any], options: SchemaOptions = DEFAULT_OPTIONS
) -> tuple[str | None, list[str]]:
    """Compile a parameter schema with llguidance: (error or None, warnings)."""
    from engine.constraints import ConstraintError
    from engine.constraints.limits import MAX_JSON_NESTING, check_schema, nesting

    try:
        key = json.dumps(parameters, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}", []
    except RecursionError:
        return "nested too deeply", []
    if len(key) > MAX_PARAMETERS_BYTES:
        return f"too large ({len(key):,} bytes; the limit is {MAX_PARAMETERS_BYTES:,})", []
    if nesting(parameters) > MAX_JSON_NESTING:
        return f"nested more than {MAX_JSON_NESTING} levels deep", []
    try:
        check_schema(parameters)  # before llguidance: too deep a schema would crash it
    except ConstraintError as exc:
        return str(exc.diagnostics[0]) if exc.diagnostics else str(exc), []
    error, warnings = _compile_cached(key, options)
    return error, list(warnings)


@functools.lru_cache(maxsize=512)
def _compile_cached(
    parameters_json: str, options: SchemaOptions
) -> tuple[str | None, tuple[str, ...]]:
    from llguidance import LLMatcher

    from engine.constraints.validate import parse_message

    try:
        schema = arguments_grammar_schema(json.loads(parameters_json), options)
        grammar = LLMatcher.grammar_from_json_schema(schema)
    except (ValueError, TypeError) as exc:
        return str(exc), ()
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error:
        return (messages[0] if messages else "llguidance rejected the schema"), ()
    return None, tuple(str(parse_message(m, "json_schema", "warning")) for m in messages)


def _where(index: int, name: str | None) -> str:
    return f'tool {index + 1} ("{name}")' if name else f"tool {index + 1}"


def _validate_one(index: int, tool: Any, options: SchemaOptions) -> ToolSpec:
    if not isinstance(tool, dict):
        raise ToolDefinitionError(
            f"{_where(index, None)}: expected an object, got {type(tool).__name__}"
        )
    if "function" in tool:
        kind = tool.get("type", "function")
        if kind != "function":
            raise ToolDefinitionError(
                f'{_where(index, None)}: "type" must be "function", got {kind!r}'
            )
        function = tool["function"]
        if not isinstance(function, dict):
            raise ToolDefinitionError(f'{_where(index, None)}: "function" must be an object')
    elif "name" in tool:
        function = tool  # the bare function form some tools files use
    else:
        raise ToolDefinitionError(
            f'{_where(index, None)}: missing "function" (expected '
            '{"type": "function", "function": {"name": ..., "parameters": ...}})'
        )
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError(f'{_where(index, None)}: missing "name" (a non-empty string)')
    where = _where(index, name)
    if not TOOL_NAME_RE.match(name):
        raise ToolDefinitionError(f"{where}: invalid name; use {TOOL_NAME_RULE}")
    description = function.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise ToolDefinitionError(f'{where}: "description" must be a string')
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise ToolDefinitionError(
            f'{where}: "description" is too long ({len(description):,} characters; the '
            f"limit is {MAX_DESCRIPTION_CHARS:,})"
        )
    parameters = function.get("parameters")
    if parameters is None:
        parameters = copy.deepcopy(_EMPTY_PARAMETERS)
    if not isinstance(parameters, dict):
        raise ToolDefinitionError(
            f'{where}: "parameters" must be a JSON schema object, got {type(parameters).__name__}'
        )
    if parameters.get("type", "object") != "object":
        raise ToolDefinitionError(
            f'{where}: "parameters" must describe an object (type "object"), '
            f"got type {parameters.get('type')!r}"
        )
    error, warnings = compile_parameters(parameters, options)
    if error is not None:
        raise ToolDefinitionError(f'{where}: "parameters" is not a usable JSON schema: {error}')
    return ToolSpec(name, description, copy.deepcopy(parameters), tuple(warnings))


def validate_tools(
    tools: Any, source: str = "", options: SchemaOptions = DEFAULT_OPTIONS
) -> list[ToolSpec]:
    """Validate OpenAI-format tool definitions; raise ToolDefinitionError naming the problem.

    `source` (a file name) prefixes error messages; `options` say how parameter schemas
    compile (oneOf, unknown formats and keywords llguidance cannot enforce are accepted
    with a warning unless `options.lenient` is off).
    """
    prefix = f"{source}: " if source else ""
    if isinstance(tools, dict) and isinstance(tools.get("tools"), list):
        tools = tools["tools"]
    elif isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise ToolDefinitionError(f"{prefix}tools must be a list of tool definitions")
    if not tools:
        raise ToolDefinitionError(f"{prefix}the tool list is empty")
    if len(tools) > MAX_TOOLS:
        raise ToolDefinitionError(
            f"{prefix}too many tools ({len(tools):,}; a request may offer at most {MAX_TOOLS})"
        )
    specs: list[ToolSpec] = []
    seen: dict[str, int] = {}
    for index, tool in enumerate(tools):
        try:
            spec = _validate_one(index, tool, options)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"{prefix}{exc}") from None
        if spec.name in seen:
            raise ToolDefinitionError(
                f"{prefix}{_where(index, spec.name)}: duplicate name, already used by "
                f"tool {seen[spec.name] + 1}"
            )
        seen[spec.name] = index
        specs.append(spec)
    return specs


def load_tools(
    source: str | Path | list[dict[str, Any]] | dict[str, Any],
) -> list[ToolDefinition]:
    """Validated tools in the OpenAI format, from a list (or `{"tools": [...]}`) or from a
    `.json` file holding one."""
    if not isinstance(source, (str, Path)):
        return [spec.to_openai() for spec in validate_tools(source)]
    path = Path(source).expanduser()
    try:
        text = read_text_limited(path, MAX_FILE_BYTES, "tools file")
    except FileRefused as exc:
        raise ToolDefinitionError(str(exc)) from None
    return tools_from_text(text, str(path))


def tools_from_text(text: str, source: str = "") -> list[ToolDefinition]:
    """Validated tools in the OpenAI format from JSON text; errors name `source` and where."""
    prefix = f"{source}: " if source else ""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolDefinitionError(
            f"{prefix}invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ToolDefinitionError(f"{prefix}the JSON is nested too deeply") from None
    return [spec.to_openai() for spec in validate_tools(data, source)]
