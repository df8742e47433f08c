"""Corral's OpenAI-compatible HTTP server over the shared Engine.

`config` (address, key, limits, the loopback rule), `schemas` (request bodies),
`translate` (bodies into ChatRequests, checked at the edge), `responses` (results and
events in OpenAI's shapes), `errors` (OpenAI error bodies), `activity` (requests in flight
and the request log), `guard` (Host check and API key), `streaming` (engine events into
the event loop and out as SSE), `app` (the Starlette app and its endpoints), `runner`
(uvicorn on a thread or in the foreground). The only package under engine/ that imports
an HTTP framework.
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
