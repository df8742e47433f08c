"""The MCP hub against real servers: mcp-server-time from PyPI over stdio, a Streamable HTTP
server built with the SDK on loopback (dotted names, nested schemas, a bearer token), and
an SDK server that crashes, hangs or writes garbage. Every failure is a clear message, the
hub stays usable, and closing it leaves no child process."""

from __future__ import annotations

import threading
import time

import pytest
from mcp_support import (
    TOKEN,
    child_processes,
    config_text,
    http_server,
    misbehaving_entry,
    stdio_entry,
    time_server_command,
    wait_no_children,
)

from engine.mcp.catalog import check_tool
from engine.mcp.config import parse_config
from engine.mcp.hub import McpHub
from engine.mcp.runner import ServerState


@pytest.fixture
def hubs():
    """Makes hubs and closes them; checks that no server process outlives its hub."""
    before = {p.pid for p in child_processes()}
    made: list[McpHub] = []

    def make(servers: dict, **kwargs) -> McpHub:
        hub = McpHub(parse_config(config_text(servers)), **kwargs)
        made.append(hub)
        hub.start().result(10)
        assert hub.wait_until_settled(60)
        return hub

    yield make
    for hub in made:
        hub.close()
    assert wait_no_children(before) == []


def test_time_server_over_stdio(hubs) -> None:
    hub = hubs({"time": stdio_entry(time_server_command(), env={"TZ_TOKEN": "abcd-1234"})})
    snapshot = hub.snapshots()["time"]
    assert snapshot.state == ServerState.READY, snapshot.detail
    assert snapshot.server_info.startswith("mcp-time")
    assert "abcd-1234" not in repr(snapshot)
    tools = {t.name: t for t in snapshot.tools}
    assert set(tools) == {"get_current_time", "convert_time"}
    assert all(t.error is None and t.description for t in tools.values())
    assert tools["convert_time"].input_schema["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]

    result = hub.call("time", "get_current_time", {"timezone": "Asia/Tokyo"}).result(30)
    assert not result.is_error and result.failure is None
    assert result.structured["timezone"] == "Asia/Tokyo"
    assert '"timezone": "Asia/Tokyo"' in result.text
    assert result.text.count('"timezone"') == 1  # its text block repeats it: sent once
    bad = hub.call("time", "get_current_time", {"timezone": "Nowhere/Land"}).result(30)
    assert bad.is_error and bad.failure is None and "Nowhere/Land" in bad.text


def test_streamable_http_with_dotted_names_and_nested_schemas(hubs) -> None:
    with http_server() as url:
        hub = hubs(
            {
                "shop": {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}},
                "time": stdio_entry(time_server_command()),
            }
        )
        shop = hub.snapshots()["shop"]
        assert shop.state == ServerState.READY, shop.detail
        tools = {t.name: t for t in shop.tools}
        assert set(tools) == {"catalog.search", "orders.v2.place", "get_current_time"}
        assert all(t.error is None for t in tools.values()), [t.error for t in tools.values()]
        schema = tools["orders.v2.place"].input_schema
        assert schema["properties"]["items"]["type"] == "array" and "$defs" in schema

        catalog = hub.catalog(reserved=["calculator"])
        names = catalog.names()
        # Dotted names stay as they are; the name both servers offer is qualified.
        assert "catalog.search" in names and "orders.v2.place" in names
        assert "shop__get_current_time" in names and "time__get_current_time" in names
        assert "get_current_time" not in names and "convert_time" in names
        back = catalog.lookup("time__get_current_time")
        assert (back.server, back.name) == ("time", "get_current_time")

        arguments = {"filters": {"category": "music", "max_price": 20, "tags": ["sale"]}}
        result = hub.call("shop", "catalog.search", arguments).result(30)
        assert result.structured == {"found": 3, "category": "music", "tags": ["sale"]}
        order = {"items": [{"sku": "B-2", "quantity": 2}], "shipping": {"method": "express"}}
        result = hub.call("shop", "orders.v2.place", order).result(30)
        assert result.text == "order placed: 2 item(s), express shipping"
        invalid = hub.call("shop", "orders.v2.place", {"items": []}).result(30)
        assert invalid.is_error


def test_a_wrong_token_fails_without_showing_it(hubs) -> None:
    with http_server() as url:
        hub = hubs({"shop": {"url": url, "headers": {"Authorization": "Bearer wrong-token-42"}}})
        shop = hub.snapshots()["shop"]
        assert shop.state == ServerState.FAILED
        assert shop.detail.startswith("could not connect to http://127.0.0.1:")
        assert "wrong-token-42" not in shop.detail + shop.description
        assert "401" in shop.detail or "nauthorized" in shop.detail, shop.detail


def test_results_keep_text_images_links_structured_content_and_errors(hubs) -> None:
    hub = hubs({"odd": misbehaving_entry()})
    picture = hub.call("odd", "picture", {}).result(30)
    kinds = [b["type"] for b in picture.blocks]
    assert kinds == ["text", "image", "resource_link"]
    assert picture.blocks[1]["mime_type"] == "image/png"
    assert picture.structured == {"width": 1, "height": 1}
    assert "[image: image/png" in picture.text and "<file:///tmp/pixel.png>" in picture.text
    # The structured content is not in its text block ("a red pixel"): the model gets it too.
    assert picture.text.startswith("a red pixel\n") and '{"width": 1, "height": 1}' in picture.text
    assert not picture.structured_in_text()
    failed = hub.call("odd", "fail", {}).result(30)
    assert failed.is_error and failed.text == "Error: the disk is full"


def test_a_server_that_exits_mid_call(hubs) -> None:
    hub = hubs({"odd": misbehaving_entry(), "time": stdio_entry(time_server_command())})
    result = hub.call("odd", "crash", {}).result(30)
    assert result.failure == "server_exited" and result.is_error
    assert 'the tool server "odd" stopped during the call' in result.text
    assert "fatal: the crash tool was called" in result.text  # its stderr, for the user
    deadline = time.monotonic() + 10
    while hub.snapshots()["odd"].state != ServerState.FAILED and time.monotonic() < deadline:
        time.sleep(0.05)
    odd = hub.snapshots()["odd"]
    assert odd.state == ServerState.FAILED and odd.detail == "the server exited"
    assert "fatal: the crash tool was called" in odd.stderr_tail
    again = hub.call("odd", "echo.text", {"message": "hi"}).result(10)
    assert again.failure == "not_running"
    # The other server is unaffected, and a restart brings this one back.
    assert not hub.call("time", "get_current_time", {"timezone": "UTC"}).result(30).is_error
    hub.restart("odd").result(10)
    assert hub.wait_until_settled(30)
    assert hub.call("odd", "echo.text", {"message": "hi"}).result(10).text == "echo: hi"


def test_a_server_that_never_answers_times_out(hubs) -> None:
    hub = hubs({"odd": misbehaving_entry()}, call_timeout=1.0)
    started = time.monotonic()
    result = hub.call("odd", "hang", {}).result(30)
    assert result.failure == "timeout"
    assert result.text == 'Error: the tool server "odd" did not answer within 1 s'
    assert time.monotonic() - started < 20  # far from the 60 s default: the timeout worked
    # The server is still usable (the SDK cancelled the request), and a per-call timeout wins.
    assert hub.call("odd", "echo.text", {"message": "x"}, timeout=5).result(10).text == "echo: x"


def test_garbage_on_stdout(hubs) -> None:
    # The garbage server writes at once; the banner one needs its time to load the SDK.
    hub = hubs({"noise": misbehaving_entry("garbage")}, start_timeout=3.0)
    noise = hub.snapshots()["noise"]
    assert noise.state == ServerState.FAILED
    assert noise.detail == (
        "it did not finish starting within 3 s; it wrote 3 lines that are not MCP (JSON-RPC) "
        "to stdout, e.g. 'Hello! I am not JSON-RPC (0)'"
    )
    assert "starting in garbage mode" in noise.stderr_tail
    # One stray line before the protocol starts is tolerated, and reported.
    hub = hubs({"banner": misbehaving_entry("banner")})
    banner = hub.snapshots()["banner"]
    assert banner.state == ServerState.READY
    assert "'Welcome to the misbehaving server v1'" in banner.detail
    assert hub.call("banner", "echo.text", {"message": "ok"}).result(10).text == "echo: ok"


def test_a_missing_program_fails_at_once(hubs) -> None:
    hub = hubs({"nope": {"command": "/nonexistent/mcp-server"}})
    assert hub.snapshots()["nope"].detail == "the program was not found (/nonexistent/mcp-server)"


def test_switches_and_new_configs_start_and_stop_servers(hubs) -> None:
    threads: set[str] = set()
    hub = hubs(
        {"a": misbehaving_entry(), "b": misbehaving_entry(disabled=True)},
        on_change=lambda _snapshots: threads.add(threading.current_thread().name),
    )
    # The servers live on the hub's own asyncio thread: not the GUI's, not the engine's.
    assert threads == {"corral-mcp"}
    assert [s.state for s in hub.snapshots().values()] == [ServerState.READY, ServerState.OFF]
    hub.set_enabled("a", False).result(20)
    assert hub.snapshots()["a"].state == ServerState.OFF
    assert hub.call("a", "echo.text", {"message": "x"}).result(5).failure == "not_running"
    hub.set_enabled("a", True).result(20)
    hub.set_config(parse_config(config_text({"c": misbehaving_entry()}))).result(20)
    assert hub.wait_until_settled(30)
    assert list(hub.snapshots()) == ["c"] and hub.snapshots()["c"].state == ServerState.READY


def test_close_stops_servers_even_during_a_call(hubs) -> None:
    before = {p.pid for p in child_processes()}
    hub = hubs({"odd": misbehaving_entry(), "time": stdio_entry(time_server_command())})
    assert len([p for p in child_processes() if p.pid not in before]) == 2
    pending = hub.call("odd", "hang", {})
    started = time.monotonic()
    hub.close()
    assert time.monotonic() - started < 10
    assert wait_no_children(before, timeout=5) == []
    assert pending.done()


def test_tools_whose_schema_cannot_be_constrained_are_left_out_with_the_reason() -> None:
    info = check_tool("lookup", "d", {"type": "object", "properties": {"q": {"type": "strnig"}}})
    assert info.error.startswith("its inputSchema is not a usable JSON schema: Invalid type")
    assert info.error.endswith("its calls could not be constrained, so it is not offered")
    assert check_tool("t", "", {"type": "array"}).error.startswith("its inputSchema must")
    # A keyword Corral cannot enforce is ignored, and the tool says so.
    q = {"type": "string", "not": {"pattern": "\\d"}}  # a not over `\d`: unenforceable
    loose = check_tool("lookup", "d", {"type": "object", "properties": {"q": q}})
    assert loose.error is None and any("not" in w for w in loose.warnings), loose.warnings
    odd = check_tool("fs/read file", "", {"type": "object"})
    assert odd.error is None and "offered to the model as 'fs_read_file'" in odd.warnings[0]
