"""The tool loop through the Engine with real MCP servers: calls constrained to each tool's
inputSchema, results back to the model, approval (deny tells the model; always-allow stops
asking), the step limit, Stop during a call, and the CLI (`chat --mcp`).

The default model runs one turn against mcp-server-time (the figure for the closing
note); the rest uses the tiny random model, whose calls are valid only because they are
constrained."""

from __future__ import annotations

import io
import json
import threading
import time

import jsonschema
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

from engine.mcp.config import parse_config
from engine.mcp.hub import McpHub
from engine.mcp.results import DECLINED_TEXT
from engine.mcp.turn import ToolTurn
from engine.types import ChatRequest, SamplingSettings

FIGURES: list[dict] = []  # per tool: calls made, calls that validated, last token → result


def _figure(tool: str, calls: list) -> None:
    FIGURES.append(
        {
            "tool": tool,
            "calls": len(calls),
            "valid": sum(1 for c in calls if c.arguments_valid),
            "after_last_token_s": [round(c.after_last_token_s, 3) for c in calls],
        }
    )
    print("MCP-FIGURE", json.dumps(FIGURES[-1]))


@pytest.fixture
def hub_for():
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


def _request(text: str, choice="required", *, seed=0, max_tokens=64, temperature=1.0):
    return ChatRequest(
        [{"role": "user", "content": text}],
        SamplingSettings(temperature=temperature, seed=seed, max_tokens=max_tokens),
        tool_choice=choice,
        parallel_tool_calls=False,
    )


def _allow(call, tool):
    return "once"


@pytest.mark.slow
def test_time_server_through_the_default_model(default_engine, hub_for) -> None:
    """mcp-server-time over stdio, tool_choice required: the call validates against the
    tool's inputSchema, the server's answer goes back, and the model answers with it."""
    hub = hub_for({"time": stdio_entry(time_server_command())})
    catalog = hub.catalog()
    turn = ToolTurn(default_engine, hub, _allow, max_steps=1)
    outcome = turn.run(_request("What time is it in Tokyo?", max_tokens=40, temperature=0), catalog)
    first, second = outcome.replies
    assert len(first.tool_calls) == 1, first.text
    call = outcome.calls[0]
    tool = catalog.lookup(call.call.name)
    jsonschema.validate(call.call.arguments, tool.input_schema)
    assert call.arguments_valid and call.result is not None and call.result.failure is None
    # The result is in the conversation the second reply was generated from.
    tool_messages = [m for m in outcome.messages if m["role"] == "tool"]
    assert tool_messages[0]["content"] == call.result.text
    assert '"datetime"' in call.result.text or call.result.is_error
    assert second.error is None and second.text and not second.tool_calls
    assert outcome.end == "step_limit"
    _figure(f"time/{call.tool} (default model)", outcome.calls)


def test_dotted_http_tools_through_the_engine(tiny_engine, hub_for) -> None:
    """Streamable HTTP, dotted names, nested objects, enums and arrays: every call the
    random model makes is constrained into one that validates and the server accepts."""
    with http_server() as url:
        hub = hub_for({"shop": {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}}})
        catalog = hub.catalog()
        by_tool: dict[str, list] = {}
        for seed, choice in enumerate(["catalog.search", "orders.v2.place", "required"] * 2):
            turn = ToolTurn(tiny_engine, hub, _allow, max_steps=1)
            request = _request("Find cheap music", choice, seed=seed, max_tokens=120)
            outcome = turn.run(request, catalog)
            assert outcome.calls, outcome.final.text
            for record in outcome.calls:
                tool = catalog.lookup(record.call.name)
                jsonschema.validate(record.call.arguments, tool.input_schema)
                assert record.arguments_valid
                assert record.result.failure is None and not record.result.is_error
                by_tool.setdefault(tool.name, []).append(record)
        assert {"catalog.search", "orders.v2.place"} <= set(by_tool)
        for name, calls in sorted(by_tool.items()):
            _figure(f"shop/{name}", calls)


def test_a_qualified_name_is_mapped_back_to_its_server(tiny_engine, hub_for) -> None:
    """Two servers offer the same tools: the model sees `a__paint.pick` and
    `b__paint.pick`, and each call reaches the server its name says."""
    hub = hub_for({"a": misbehaving_entry(), "b": misbehaving_entry()})
    catalog = hub.catalog()
    assert {"a__paint.pick", "b__paint.pick"} <= set(catalog.names())
    assert "paint.pick" not in catalog.names()
    for exposed, server in (("b__paint.pick", "b"), ("a__paint.pick", "a")):
        outcome = ToolTurn(tiny_engine, hub, _allow, max_steps=1).run(
            _request("Paint it", exposed), catalog
        )
        (record,) = outcome.calls
        assert record.call.name == exposed and record.arguments_valid
        assert (record.server, record.tool) == (server, "paint.pick")
        assert record.result.server == server and "coat(s) of" in record.result.text
        _figure(f"{server}/paint.pick (as {exposed})", outcome.calls)


def test_deny_tells_the_model_and_always_allow_stops_asking(tiny_engine, hub_for) -> None:
    hub = hub_for({"paint": misbehaving_entry()})
    catalog = hub.catalog()
    asked: list[str] = []

    def deny(call, tool):
        asked.append(call.name)
        return "deny"

    outcome = ToolTurn(tiny_engine, hub, deny, max_steps=1).run(
        _request("Paint it", "paint.pick"), catalog
    )
    assert asked == ["paint.pick"] and outcome.calls[0].approval == "deny"
    assert outcome.calls[0].result.failure == "declined"
    told = [m for m in outcome.messages if m["role"] == "tool"]
    assert told == [
        {
            "role": "tool",
            "tool_call_id": outcome.calls[0].call.id,
            "name": "paint.pick",
            "content": DECLINED_TEXT,
        }
    ]
    assert len(outcome.replies) == 2  # the model went on after being told

    answers = iter(["always"])
    allowed: set[str] = set()
    asked.clear()

    def always(call, tool):
        asked.append(call.name)
        return next(answers)

    calls = []
    for seed in range(3):
        turn = ToolTurn(tiny_engine, hub, always, max_steps=1, always_allowed=allowed)
        calls += turn.run(_request("Paint it", "paint.pick", seed=seed), catalog).calls
    assert asked == ["paint.pick"]  # asked once, then allowed
    assert [c.approval for c in calls] == ["always", "allowed", "allowed"]
    assert all(c.result.text.endswith(("red", "green", "blue")) for c in calls)
    _figure("paint/paint.pick", calls)


def test_the_step_limit_ends_the_turn_with_an_answer(tiny_engine, hub_for) -> None:
    hub = hub_for({"paint": misbehaving_entry()})
    outcome = ToolTurn(tiny_engine, hub, _allow, max_steps=2).run(
        _request("Paint it", "paint.pick", max_tokens=48), hub.catalog()
    )
    # Step 1 must call; step 2 may call again ("auto"); step 3 may not ("none").
    assert 1 <= len(outcome.calls) <= 2
    assert not outcome.final.tool_calls
    assert outcome.end in ("answered", "step_limit")
    assert len(outcome.replies) == len(outcome.calls) + 1


def test_stop_cancels_the_call_in_flight_and_the_turn(tiny_engine, hub_for) -> None:
    hub = hub_for({"odd": misbehaving_entry()})
    turn = ToolTurn(tiny_engine, hub, _allow, max_steps=3)
    box: dict = {}
    thread = threading.Thread(
        target=lambda: box.update(out=turn.run(_request("Wait", "hang"), hub.catalog()))
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not any(hasattr(f, "set_running_or_notify_cancel") for f in turn._in_flight):
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.02)
    turn.cancel()
    thread.join(10)
    outcome = box["out"]
    assert outcome.end == "cancelled" and len(outcome.replies) == 1
    assert outcome.calls[0].result.failure == "cancelled"
    # The server is still there for the next turn.
    assert not hub.call("odd", "paint.pick", {"color": "red"}).result(10).is_error


@pytest.fixture
def mcp_file(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(config_text({"paint": misbehaving_entry()}))
    return path


def _cli(args: list[str], monkeypatch, capsys, stdin: str = "") -> tuple[int, str, str]:
    from engine.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_asks_on_stdin_and_json_has_every_call(tiny_model_dir, mcp_file, monkeypatch, capsys):
    before = {p.pid for p in child_processes()}
    common = ["chat", "--model", str(tiny_model_dir), "--mcp", str(mcp_file)]
    common += ["--prompt", "Paint it", "--tool-choice", "paint.pick", "--max-tokens", "40"]
    common += ["--max-steps", "1", "--seed", "1"]
    code, out, err = _cli([*common, "--json"], monkeypatch, capsys, stdin="n\n")
    data = json.loads(out)
    # the exit status says how the last reply ended: 0 finished by the model, 3 not
    assert code == (0 if data["ending"] == "finished" else 3), err
    (call,) = data["calls"]
    assert (call["name"], call["server"], call["tool"]) == ("paint.pick", "paint", "paint.pick")
    assert call["approval"] == "deny" and call["result"]["failure"] == "declined"
    assert "Allow paint.pick (paint/paint.pick)" in err
    assert len(data["steps"]) == 2 and data["servers"]["paint"]["state"] == "ready"

    code, out, err = _cli([*common, "--approve", "all"], monkeypatch, capsys)
    assert code in (0, 3), err  # 3: its last reply ran to --max-tokens
    assert "[tool call] paint.pick(" in err and "coat(s) of" in err and "Allow" not in err
    assert wait_no_children(before) == []
