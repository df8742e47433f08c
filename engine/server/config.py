"""How the server is set up: address, key, limits; and the rule that keeps it private.

A server reachable from other machines without an API key would hand the user's model
(and anything its tools can do) to anyone on the network, so binding to a non-loopback
address requires a key.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from engine.errors import CorralError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class ServerConfigError(CorralError):
    """The server cannot start with these settings; the message says why and what to do."""


@dataclass
class ServerConfig:
    """Settings of one server. `port=0` picks a free port (tests, benchmarks)."""

    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = 8 * 1024 * 1024
    # Requests in flight (waiting or decoding) at most, beyond which the server answers 503
    # itself; None: no count of its own, only the engine's bound on replies waiting for a
    # row (`Engine.max_queued`, engine.engine.DEFAULT_MAX_QUEUED), so that one number
    # holds for the app's engine and the server alike.
    max_queued_requests: int | None = None
    default_max_tokens: int = 2048
    # Fetch http(s) image URLs of requests (never this machine's own or private addresses);
    # off, images come only as data: URLs or base64 (engine.server.images).
    allow_image_urls: bool = False
    # Answer a request naming any model with the loaded one (agents send their own default
    # names, such as `claude-...`); off, another name is a 404.
    serve_any_model_name: bool = False
    # Stored Responses (`store`, `previous_response_id`): the SQLite file (None: Corral's
    # data folder), and how many are kept and for how long.
    responses_db: Path | None = None
    max_stored_responses: int = 1000
    stored_response_days: float = 30.0
    # While a reply has nothing to send (a long prompt being read, a queue), a keep-alive
    # goes out at least this often: an SSE comment, Anthropic's `ping`, or a space before a
    # whole JSON body (engine.server.keepalive). 0 sends none.
    keep_alive_s: float = 10.0
    # "Context scaling": token counts in usage and count_tokens reported as if the model
    # read this many tokens (N / its real context), so an agent built for a larger window
    # compacts in time (engine.server.report_context). None: the real counts.
    report_context: int | None = None

    def check(self) -> None:
        """Raise ServerConfigError for settings the server must refuse to start with."""
        if not 0 <= self.port <= 65535:
            raise ServerConfigError(f"port must be between 0 and 65535, got {self.port}")
        if self.api_key is not None and not self.api_key.strip():
            raise ServerConfigError("the API key is empty; give a key or none at all")
        if not self.keep_alive_s >= 0:
            raise ServerConfigError(
                f"keep-alive must be 0 or more seconds, got {self.keep_alive_s}"
            )
        if self.report_context is not None and self.report_context < 1:
            raise ServerConfigError(
                f"the reported context must be a positive token count, got {self.report_context}"
            )
        if not is_loopback(self.host) and not self.api_key:
            raise ServerConfigError(
                f"refusing to serve on {self.host} without an API key: any machine that can "
                "reach this address could use the model. Set --api-key (or CORRAL_API_KEY), "
                "or bind to 127.0.0.1"
            )

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def data_dir() -> Path:
    """Corral's data folder (the app keeps its conversations there too)."""
    return Path(platformdirs.user_data_dir("Corral", "Corral"))


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) only accepts connections from this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: it may resolve to any interface
