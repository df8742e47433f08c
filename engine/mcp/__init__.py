"""MCP servers as tool sources: the configuration file, the hub that runs the servers on
an asyncio thread of its own, the tool catalog the model sees, and the tool loop.

Importing this package does not import the `mcp` SDK; the hub loads it on its own thread.
"""

from engine.mcp.catalog import CatalogTool, ToolCatalog, ToolInfo, build_catalog, check_tool
from engine.mcp.config import (
    McpConfig,
    McpConfigError,
    MCPServerConfig,
    default_config_path,
    load_config,
    parse_config,
)
from engine.mcp.results import ToolResult

__all__ = [
    "CatalogTool",
    "McpConfig",
    "McpConfigError",
    "MCPServerConfig",
    "ToolCatalog",
    "ToolInfo",
    "ToolResult",
    "build_catalog",
    "check_tool",
    "default_config_path",
    "load_config",
    "parse_config",
]
