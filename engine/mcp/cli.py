"""`python -m engine chat --mcp mcp.json`: the tool loop in a terminal.

Servers start from the given file, each first printed (command and arguments, or the URL's
host; secrets masked) to stderr; each call is shown with its arguments and asked about on
stdin (`y` once, `a` always for this tool, anything else no) unless `--approve all`. Text
streams to stdout; calls, results and server problems go to stderr, so `--json` prints
exactly one JSON object (every reply, call and result) on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from engine.mcp.catalog import CatalogTool
from engine.mcp.turn import DEFAULT_MAX_STEPS, Approval, CallRecord, ToolTurn
from engine.types import EXIT_STATUS, ChatRequest, ToolCall

_SHOWN_RESULT_CHARS = 600


def add_arguments(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("--mcp", metavar="FILE", help="MCP servers to use as tools (mcp.json)")
    chat.add_argument(
        "--approve",
        choices=["ask", "all"],
        default="ask",
        help="ask before each MCP call (default) or allow all",
    )
    chat.add_argument(
        "--max-steps",
        type=int,
        default=DEFAULT_MAX_STEPS,
        help=f"tool-call rounds before the model must answer (default {DEFAULT_MAX_STEPS})",
    )
    chat.add_argument(
        "--tool-timeout", type=float, default=60.0, help="seconds per MCP call (default 60)"
    )


def _ask(call: ToolCall, tool: CatalogTool, stdin: TextIO, out: TextIO) -> Approval:
    where = f"{tool.server}/{tool.name}"
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    out.write(f"\nAllow {call.name} ({where}) with {arguments}?\n")
    out.write("  [y] allow once  [a] always allow this tool  [n] deny: ")
    out.flush()
    answer = stdin.readline().strip().lower()
    if answer in ("a", "always"):
        return "always"
    return "once" if answer in ("y", "yes") else "deny"


def _show_call(record: CallRecord, out: TextIO) -> None:
    result = record.result
    if result is None:
        return
    arguments = json.dumps(record.call.arguments, ensure_ascii=False)
    out.write(f"\n[tool call] {record.call.name}({arguments}) → {record.server}\n")
    text = result.text
    if len(text) > _SHOWN_RESULT_CHARS:
        text = text[:_SHOWN_RESULT_CHARS] + " …"
    label = "declined" if result.failure == "declined" else "error" if result.is_error else "result"
    out.write(f"[{label} after {record.after_last_token_s:.2f}s] {text}\n")
    out.flush()


def run_chat(args: argparse.Namespace, engine: Any, request: ChatRequest) -> int:
    """Start the servers of `args.mcp`, run one turn on `engine`, print it."""
    from engine.mcp.config import load_config
    from engine.mcp.hub import McpHub

    err = sys.stderr
    config = load_config(args.mcp)
    if not config.servers:
        err.write(f"warning: {args.mcp} lists no MCP servers\n")
    # What is about to run, before it runs (secrets masked): the user named the file, and
    # sees what it starts.
    for server in config.servers:
        note = " (disabled in the file: not started)" if server.disabled else ""
        err.write(f"[mcp] {server.plan()}{note}\n")
    err.flush()
    hub = McpHub(config, call_timeout=args.tool_timeout)
    try:
        hub.start().result()
        hub.wait_until_settled(hub.start_timeout + 5)
        for snapshot in hub.snapshots().values():
            if snapshot.state.value == "failed":
                tail = snapshot.stderr_tail.strip().splitlines()[-3:]
                extra = "".join(f"\n    {line}" for line in tail)
                err.write(f'MCP server "{snapshot.name}" failed: {snapshot.detail}{extra}\n')
        reserved = [t["function"]["name"] for t in request.tools or []]
        catalog = hub.catalog(reserved=reserved)
        if not args.json:
            names = ", ".join(catalog.names()) or "none"
            err.write(f"[mcp] tools: {names}\n")

        def approve(call: ToolCall, tool: CatalogTool) -> Approval:
            if args.approve == "all":
                return "once"
            return _ask(call, tool, sys.stdin, err)

        turn = ToolTurn(
            engine,
            hub,
            approve,
            max_steps=args.max_steps,
            timeout=args.tool_timeout,
            on_text=None if args.json else lambda text: print(text, end="", flush=True),
            on_call=None if args.json else lambda record: _show_call(record, err),
        )
        try:
            outcome = turn.run(request, catalog)
        except KeyboardInterrupt:
            turn.cancel()
            raise
        servers = {
            name: {"state": s.state.value, "detail": s.detail}
            for name, s in hub.snapshots().items()
        }
    finally:
        hub.close()
    final = outcome.final
    if args.json:
        data = outcome.to_dict()
        data["servers"] = servers
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print()
        if outcome.end == "other_tool" and final is not None:
            for call in final.tool_calls:
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                print(f"[tool call] {call.name}({arguments})")
        err.write(f"[{outcome.end}] {len(outcome.replies)} replies, {len(outcome.calls)} calls\n")
    if final is not None and final.error:
        err.write(f"error: {final.error_line}\n")
    # as `chat` without MCP: 0 when the model finished its last reply, 3 when Corral
    # filled or cut it, 1 when it failed
    return EXIT_STATUS[final.ending] if final is not None else 0
