"""Anthropic's Messages API over the shared core: `schemas` (request bodies), `translate`
(bodies into ChatRequests), `replies` (messages and their streamed events), `endpoints`
(the routes)."""

from __future__ import annotations

from engine.server.anthropic.endpoints import MessagesAPI

__all__ = ["MessagesAPI"]
