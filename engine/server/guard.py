"""ASGI middleware in front of every endpoint: the Host check and the API key.

While bound to loopback, a request must be addressed to localhost: a web page cannot then
reach the server through a DNS name that resolves to 127.0.0.1 (DNS rebinding). With a
key set, every endpoint but /health needs `Authorization: Bearer KEY` or `x-api-key: KEY`
(Anthropic's clients send the latter), compared in constant time. Refusals are logged
without the key, and answered in the shape of the API the path belongs to.
"""

from __future__ import annotations

import hmac
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from engine.server.activity import RequestRecord, ServerActivity
from engine.server.config import LOOPBACK_NAMES, ServerConfig
from engine.server.errors import APIError


class Guard:
    """ASGI middleware: the Host check (against DNS rebinding while on loopback) and the
    API key (constant-time compare). /health answers without a key."""

    def __init__(self, app: ASGIApp, config: ServerConfig, activity: ServerActivity) -> None:
        self.app = app
        self.config = config
        self.activity = activity
        self._key = config.api_key.encode() if config.api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        refusal = self._refusal(scope["path"], headers)
        if refusal is not None:
            self.activity.record(
                RequestRecord(time.time(), scope["path"], refusal.status, error=refusal.message)
            )
            await refusal.response(scope["path"])(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, path: str, headers: dict[str, bytes]) -> APIError | None:
        if self.config.loopback:
            host = headers.get("host", b"").decode("latin-1").lower()
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name.strip("[]") not in LOOPBACK_NAMES:
                return APIError(
                    400,
                    f"Host {host!r} is not this server's address; a local server only answers "
                    "requests addressed to localhost or 127.0.0.1",
                    code="invalid_host",
                )
        if self._key is None or path == "/health":
            return None
        auth = headers.get("authorization", b"")
        scheme, _, given = auth.partition(b" ")
        if "x-api-key" in headers and not auth:
            scheme, given = b"bearer", headers["x-api-key"]
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self._key):
            message = "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)"
            if not auth and "x-api-key" not in headers:
                message = (
                    "no API key given; send it as Authorization: Bearer KEY (or x-api-key: KEY)"
                )
            return APIError(
                401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}
            )
        return None
