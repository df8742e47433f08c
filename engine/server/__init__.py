"""Corral's HTTP server over the shared Engine: OpenAI's chat and text completions,
Anthropic's Messages (`anthropic/`) and OpenAI's Responses (`openai_responses/`), each a
translation layer over one core.

`config` (address, key, limits, the loopback rule), `schemas` (completion bodies),
`translate` (completion bodies into ChatRequests, and the checks every dialect shares),
`responses` (results and events in OpenAI's completion shapes), `errors` (error bodies in
each dialect's shape), `activity` (requests in flight and the request log), `guard` (Host
check and API key), `streaming` (engine events into the event loop and out as SSE),
`core` (reading bodies, admission, the engine call, cancellation), `app` (the Starlette
app and the completion endpoints), `runner` (uvicorn on a thread or in the foreground),
`compat` (the one table of fields real clients send: accepted or refused by name),
`agents` (how Claude Code, Codex and OpenCode are pointed at the server), `launch`
(`python -m engine launch`: the server, then the agent), `keepalive` (what each dialect
sends while a reply has nothing to say), `context_scaling` (`--report-context`) and
`embeddings` (`/v1/embeddings` and `/v1/rerank`). The only package under engine/ that
imports an HTTP framework.
"""

from __future__ import annotations

from engine.server.activity import RequestRecord, ServerActivity
from engine.server.config import ServerConfig, ServerConfigError, is_loopback
from engine.server.runner import HTTPServer

__all__ = [
    "HTTPServer",
    "RequestRecord",
    "ServerActivity",
    "ServerConfig",
    "ServerConfigError",
    "is_loopback",
]
