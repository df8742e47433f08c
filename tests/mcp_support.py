"""Helpers for the MCP tests: configs for the real servers (mcp-server-time from PyPI and
the SDK-built fixture server), and a Streamable HTTP server built with the SDK, run on
loopback in a thread, with dotted tool names and schemas with nested objects, enums and
arrays."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import psutil
from pydantic import BaseModel, Field

REPO = Path(__file__).resolve().parents[1]
MISBEHAVING = REPO / "tests" / "fixtures" / "mcp_servers" / "misbehaving.py"


def time_server_command() -> list[str]:
    """mcp-server-time as installed next to this Python (the dev extra)."""
    exe = Path(sys.executable).with_name("mcp-server-time")
    found = str(exe) if exe.exists() else shutil.which("mcp-server-time")
    assert found, "mcp-server-time is not installed (pip install the dev extra)"
    return [found, "--local-timezone", "UTC"]


def stdio_entry(command: list[str], **extra: Any) -> dict[str, Any]:
    return {"command": command[0], "args": command[1:], **extra}


def misbehaving_entry(mode: str = "normal", **extra: Any) -> dict[str, Any]:
    return stdio_entry([sys.executable, str(MISBEHAVING), "--mode", mode], **extra)


def config_text(servers: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"mcpServers": servers}, indent=2)


def child_processes() -> list[psutil.Process]:
    """This process's living descendants (zombies awaiting a wait() do not count)."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.NoSuchProcess:
            pass
    return alive


def wait_no_children(before: set[int], timeout: float = 10.0) -> list[psutil.Process]:
    """Wait until no descendant other than those in `before` lives; return the rest."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in child_processes() if p.pid not in before]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


# ---- the Streamable HTTP server ----


class Category(StrEnum):
    books = "books"
    music = "music"
    games = "games"


class Filters(BaseModel):
    category: Category
    max_price: Annotated[int, Field(ge=1, le=500)]
    tags: Annotated[list[Literal["new", "used", "sale"]], Field(max_length=3)] = []


class Item(BaseModel):
    sku: Literal["A-1", "B-2", "C-3"]
    quantity: Annotated[int, Field(ge=1, le=9)]


class Shipping(BaseModel):
    method: Literal["standard", "express"]
    gift: bool = False


HTTP_TOOLS = ("catalog.search", "orders.v2.place", "get_current_time")
TOKEN = "s3cret-token-value"


def build_http_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("shop")

    @server.tool(name="catalog.search", description="Search the catalog")
    def search(filters: Filters, limit: Annotated[int, Field(ge=1, le=5)] = 3) -> dict[str, Any]:
        return {"found": limit, "category": filters.category.value, "tags": filters.tags}

    @server.tool(name="orders.v2.place", description="Place an order for catalog items")
    def place(
        items: Annotated[list[Item], Field(min_length=1, max_length=3)], shipping: Shipping
    ) -> str:
        count = sum(i.quantity for i in items)
        return f"order placed: {count} item(s), {shipping.method} shipping"

    # The same name as mcp-server-time's tool: two servers offering it get qualified names.
    @server.tool(name="get_current_time", description="The shop's clock")
    def shop_time() -> str:
        return "09:00 at the shop"

    return server


@contextmanager
def http_server(token: str | None = TOKEN) -> Iterator[str]:
    """Serve the shop on 127.0.0.1 (a free port); yield its URL. With `token`, requests
    without `Authorization: Bearer <token>` get 401."""
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = build_http_server().streamable_http_app(host="127.0.0.1")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the test MCP server did not start"
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
